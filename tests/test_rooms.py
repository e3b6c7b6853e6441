"""Every room run on a real instance of its kind: for each kind of spec.OP_TYPES, the
smallest `.model` spec that holds it (a tower's token op inside an image stream, a
cross-attention beside the encoder stream it reads, the multi-token-prediction input in
its auxiliary stream), resolved as a user's would be, then each of its room's callables
(params, active, memory, sharding, lower) called on that instance at tp 1 and tp 2, with
the values a reader derives by hand from the kind's definition."""

import dataclasses

import pytest

from modelcost import parse_spec
from modelcost.base.errors import SpecError
from modelcost.ir.graph import Parallel, Phase, Workload
from modelcost.kinds import registry
from modelcost.kinds.room import REPLICATED
from modelcost.language import spec as ir
from modelcost.language.spec import streams_of, walk
from modelcost.lowering.lower import lower
from modelcost.lowering.validate import decodes
from modelcost.perfmodel import NormOp
from modelcost.roofline.compile import compile_report

D = 64  # every spec's d_model
LENGTH = 100  # the sequence length memory.tokens is asked about
BATCH = 2
# a causal attention after a decoder's kinds, so that the model decodes and decode lowers
# them too (4 heads of 16)
DECODER = "  attention(4)\n"


@dataclasses.dataclass(frozen=True)
class Case:
    """One instance of a kind, in the body of `model m { d_model = 64 ... }`, and what its
    room says of it on one rank, derived by hand (bf16 unless said: 2 bytes)."""

    body: str
    dense: tuple[int, int]  # its dense parameters at tp 1 and tp 2
    experts: tuple[int, int] = (0, 0)  # its routed experts' at tp 1 and tp 2 (ep 1)
    active: int | None = None  # one token's of the tp-1 count (None: all of them)
    per_token: tuple[int, int] = (0, 0)  # KV cache elements per token kept, tp 1 and 2
    per_sequence: tuple[float, float] = (0.0, 0.0)  # state bytes per sequence, tp 1 and 2
    kept: int = LENGTH  # tokens kept of a LENGTH-token sequence (the source's: 8)
    decodes: bool = False  # the spec decodes (so decode is compiled too)


def _tower(*ops: str, length: int, joins: int, cls_token: bool = True) -> str:
    """An image stream of 4 × 4 patches of 16 pixels (plus a class token) joining a
    decoder's sequence."""
    patch = "patch_embed(16, 64)" if cls_token else "patch_embed(16, 64, cls_token = false)"
    inner = "".join(f"    {op}\n" for op in (patch, *ops))
    return (f"  stream image(length = {length}, joins = {joins}) {{\n{inner}  }}\n"
            f"  embed(100)\n{DECODER}")  # fmt: skip


CASES: dict[type[ir.IR], Case] = {
    # a 100 × 64 table; vocabulary-parallel: 50 rows a rank at tp 2
    ir.Embedding: Case(f"  embed(100)\n{DECODER}", (100 * D, 50 * D), decodes=True),
    # 32 × 64 and 2 × 64 tables, replicated
    ir.PositionEmbedding: Case(
        f"  embed(100)\n  pos_embed(32)\n{DECODER}", (32 * D, 32 * D), decodes=True
    ),
    ir.TokenTypeEmbedding: Case(
        f"  embed(100)\n  type_embed(2)\n{DECODER}", (2 * D, 2 * D), decodes=True
    ),
    # a 16 × 16 conv over 3 channels to 64, with its bias, and the class token's 64
    ir.PatchEmbed: Case("  patch_embed(16, 64)\n", (3 * 16 * 16 * D + D + D,) * 2),
    # a scale, and LayerNorm's bias
    ir.LayerNorm: Case(f"  embed(100)\n  layernorm\n{DECODER}", (2 * D, 2 * D), decodes=True),
    ir.RMSNorm: Case(f"  embed(100)\n  rmsnorm\n{DECODER}", (D, D), decodes=True),
    # q, k, v and o: 64 × 64 each, half the heads a rank at tp 2; k and v of 4 heads of
    # 16 per token (2 heads at tp 2)
    ir.Attention: Case(
        "  embed(100)\n  attention(4)\n",
        (4 * D * D, 2 * D * D),
        per_token=(2 * 4 * 16, 2 * 2 * 16),
        decodes=True,
    ),
    # mla(heads 4, kv_lora 32, nope 16, rope 8, v 16): q_proj 64 × (4 · 24), kv_a_proj
    # 64 × (32 + 8), kv_a_norm 32, kv_b_proj 32 × (4 · (16 + 16)), o_proj (4 · 16) × 64;
    # the heads split, the latent and rope key (32 + 8) kept whole on every rank
    ir.MLA: Case(
        "  embed(100)\n  mla(4, 32, 16, 8, 16)\n",
        (
            D * 4 * 24 + D * 40 + 32 + 32 * 4 * 32 + 4 * 16 * D,
            D * 2 * 24 + D * 40 + 32 + 32 * 2 * 32 + 2 * 16 * D,
        ),
        per_token=(40, 40),
        decodes=True,
    ),
    # swiglu: gate, up (64 × 128) and down (128 × 64); d_ff split at tp 2
    ir.MLP: Case(f"  embed(100)\n  mlp(128)\n{DECODER}", (3 * D * 128, 3 * D * 64), decodes=True),
    # moe(4 experts, top 2, d_ff 32): a 64 × 4 router (dense, replicated) and 4 swiglu
    # experts of 3 · 64 · 32 (their width split at tp 2); a token touches 2 of the 4
    ir.MoE: Case(
        f"  embed(100)\n  moe(4, 2, 32)\n{DECODER}",
        (D * 4, D * 4),
        experts=(4 * 3 * D * 32, 4 * 3 * D * 16),
        active=D * 4 + 2 * 3 * D * 32,
        decodes=True,
    ),
    # d_inner 2 · 64 = 128 in 8 heads of 16, 2 B/C groups of d_state 16: in_proj
    # 64 × (2 · 128 + 2 · 2 · 16 + 8), conv over 128 + 64 channels (4 taps and a bias),
    # dt_bias, A_log and D per head, the norm's 128, out_proj 128 × 64; its state: 8 heads
    # × 16 × 16 fp32 and 4 taps of the 192 channels in bf16 (all of it halved at tp 2)
    ir.Mamba2: Case(
        "  embed(100)\n  mamba2(d_state = 16, head_dim = 16, groups = 2)\n",
        (
            D * 328 + 192 * 4 + 192 + 3 * 8 + 128 + 128 * D,
            D * 164 + 96 * 4 + 96 + 3 * 4 + 64 + 64 * D,
        ),
        per_sequence=(8 * 16 * 16 * 4 + 192 * 4 * 2, 4 * 16 * 16 * 4 + 96 * 4 * 2),
        decodes=True,
    ),
    # 2 key heads and 4 value heads of 16: in_proj_qkvz 64 × (2 · 32 + 2 · 64),
    # in_proj_ba 64 × (2 · 4), the conv over q, k, v (32 + 32 + 64 channels, 4 taps),
    # dt_bias and A_log per value head, the norm's 16, out_proj 64 × 64; its state:
    # 4 value heads × 16 × 16 fp32 and 4 taps of the 128 channels in bf16
    ir.GatedDeltaNet: Case(
        "  embed(100)\n  gated_deltanet(2, 4, head_k_dim = 16, head_v_dim = 16)\n",
        (
            D * 192 + D * 8 + 128 * 4 + 2 * 4 + 16 + 64 * D,
            D * 96 + D * 4 + 64 * 4 + 2 * 2 + 16 + 32 * D,
        ),
        per_sequence=(4 * 16 * 16 * 4 + 128 * 4 * 2, 2 * 16 * 16 * 4 + 64 * 4 * 2),
        decodes=True,
    ),
    # 64 × 32 and its bias, replicated
    ir.Linear: Case("  embed(100)\n  linear(32)\n", (D * 32 + 32,) * 2),
    # conv1 16 mels × 3 taps → 64, conv2 64 × 3 → 64, both with biases, replicated
    ir.ConvStem: Case("  conv_stem(16)\n", (16 * 3 * D + D + D * 3 * D + D,) * 2),
    # 32 buckets × 4 heads
    ir.RelativePositionBias: Case(
        f"  embed(100)\n  rel_pos_bias(4)\n{DECODER}", (32 * 4,) * 2, decodes=True
    ),
    # as attention's (the encoder is 64 wide too); it keeps k and v of the source's 8
    # tokens, whatever the decoder's length
    ir.CrossAttention: Case(
        f"  stream encoder(length = 8) {{\n    embed(100)\n  }}\n  embed(100)\n{DECODER}"
        "  cross_attention(4)\n",
        (4 * D * D, 2 * D * D),
        per_token=(2 * 4 * 16, 2 * 2 * 16),
        kept=8,
        decodes=True,
    ),
    # enorm and hnorm (64 each) and eh_proj 128 × 64, replicated; it runs in training
    ir.MTPProjection: Case(
        "  embed(100)\n  lm_head(100)\n  stream mtp(auxiliary = true) {\n    embed(100)\n"
        "    mtp_proj\n    lm_head(100)\n  }\n",
        (2 * D + 2 * D * D,) * 2,
    ),
    # weightless token ops at the top of a tower: drop the class token (17 → 16), pool
    # 2 × 2 squares of the 4 × 4 grid (16 → 4), shuffle them into 4 tokens 256 wide
    ir.Keep: Case(_tower("keep(16)", "layernorm", length=17, joins=16), (0, 0), decodes=True),
    ir.Pool: Case(_tower("pool(2)", length=16, joins=4, cls_token=False), (0, 0), decodes=True),
    ir.PixelShuffle: Case(
        _tower("pixel_shuffle(2)", "linear(64)", length=16, joins=4, cls_token=False),
        (0, 0),
        decodes=True,
    ),
    ir.Residual: Case(f"  embed(100)\n  mlp(128)\n  residual\n{DECODER}", (0, 0), decodes=True),
    # 64 × 100, vocabulary-parallel: 50 columns a rank at tp 2
    ir.LMHead: Case(f"  embed(100)\n{DECODER}  lm_head(100)\n", (D * 100, D * 50), decodes=True),
    # BERT's dense 64 × 64 with its bias, replicated
    ir.Pooler: Case("  embed(100)\n  pooler\n", (D * D + D,) * 2),
    # 64 × 10 with its bias, on the class token
    ir.Classifier: Case("  patch_embed(16, 64)\n  classifier(10)\n", (D * 10 + 10,) * 2),
}


def test_every_kind_has_a_case() -> None:
    assert set(CASES) == set(ir.OP_TYPES) == set(registry.ROOMS)


def _instance(kind: type[ir.IR]) -> tuple[ir.Spec, ir.Op]:
    spec = parse_spec(f"model m {{\n  d_model = {D}\n\n{CASES[kind].body}}}\n")
    (op,) = [op for op, _ in walk(spec.body, auxiliary=True) if type(op) is kind]
    return spec, op


def _is_count(n: object) -> bool:
    return type(n) is int and n >= 0


def _is_amount(n: object) -> bool:
    return isinstance(n, int | float) and not isinstance(n, bool) and n >= 0


@pytest.mark.parametrize("kind", ir.OP_TYPES, ids=lambda k: k.__name__)
def test_a_rooms_params_and_active_on_an_instance(kind: type[ir.IR]) -> None:
    case, (_, op) = CASES[kind], _instance(kind)
    room = registry.room(op)
    at = {tp: room.params(op, tp, 1) for tp in (1, 2)}
    for tp, (dense, experts) in at.items():
        assert _is_count(dense) and _is_count(experts), (tp, dense, experts)
        active = room.active(op, dense, experts)
        assert _is_count(active) and active <= dense + experts, (tp, active)
    assert at[2][0] <= at[1][0]  # a rank holds no more of a layer when there are two
    assert (at[1][0], at[2][0]) == case.dense
    assert (at[1][1], at[2][1]) == case.experts
    expected = sum(at[1]) if case.active is None else case.active
    assert room.active(op, *at[1]) == expected


@pytest.mark.parametrize("kind", ir.OP_TYPES, ids=lambda k: k.__name__)
def test_a_rooms_memory_on_an_instance(kind: type[ir.IR]) -> None:
    case, (spec, op) = CASES[kind], _instance(kind)
    memory = registry.room(op).memory
    per_token = tuple(memory.per_token(op, tp) for tp in (1, 2))
    per_sequence = tuple(memory.per_sequence(op, tp) for tp in (1, 2))
    assert all(_is_count(n) for n in per_token) and all(_is_amount(n) for n in per_sequence)
    assert per_token == case.per_token and per_sequence == case.per_sequence
    sources = {s.name: s.length for s in streams_of(spec)}
    kept = memory.tokens(op, LENGTH, sources)
    assert _is_count(kept) and kept == case.kept


@pytest.mark.parametrize("kind", ir.OP_TYPES, ids=lambda k: k.__name__)
def test_a_rooms_sharding_on_an_instance(kind: type[ir.IR]) -> None:
    """Every instance splits over 2 ranks; none of their heads, widths or experts
    divides by 3, so --tp 3 is refused by each kind that splits (and named), and
    accepted by each one every rank runs whole."""
    _, op = _instance(kind)
    room, where = registry.room(op), f"`{op.kind}` of `m`"
    assert room.sharding(op, Parallel(tp=1), where) is None
    assert room.sharding(op, Parallel(tp=2), where) is None
    error = room.sharding(op, Parallel(tp=3), where)
    if room.sharding is REPLICATED:
        assert error is None
    else:
        assert isinstance(error, SpecError)
        assert "--tp 3" in error.message and where in error.message


@pytest.mark.parametrize("kind", ir.OP_TYPES, ids=lambda k: k.__name__)
def test_a_rooms_lowering_compiles_its_instance(kind: type[ir.IR]) -> None:
    """Prefill and training (which runs an auxiliary stream's layers), and decode where
    the model decodes, lower and compile at tp 1 and tp 2; training's graph holds the
    instance's ops, under its scope."""
    case, (spec, op) = CASES[kind], _instance(kind)
    assert decodes(spec) is case.decodes
    phases = [Phase.prefill, Phase.train] + ([Phase.decode] if case.decodes else [])
    for tp in (1, 2):
        for phase in phases:
            workload = Workload(phase, BATCH, parallel=Parallel(tp=tp))
            report = compile_report(spec, "mi355x", workload)
            assert report.ops and report.totals.time_s > 0, (tp, phase)
        graph = lower(spec, Workload(Phase.train, BATCH, parallel=Parallel(tp=tp)))
        if kind is ir.Keep:  # a slice, no op of its own: the norm after it runs on 16 tokens
            (norm,) = [n.op for n in graph.nodes if n.name == "image.norm"]
            assert isinstance(norm, NormOp) and norm.num_elems == BATCH * 16 * D
        else:
            assert any(op.scope in n.name.split(".") for n in graph.nodes), (tp, op.scope)
