"""Parameter counting: total and active (per-token) parameters of a Spec, by component.

Counts every weight, bias and norm scale the reference implementations allocate.
"Active" counts what one token touches: for MoE, top_k routed experts plus the shared
experts and the router, instead of all experts.
"""

from __future__ import annotations

from collections.abc import Iterator
from enum import StrEnum

from pydantic import Field

from . import spec as ir
from .frozen import Frozen
from .memo import per_object
from .perfmodel.deltanet import conv_channels


class Component(StrEnum):
    embedding = "embedding"
    attention = "attention"
    mlp = "mlp"
    experts = "experts"
    ssm = "ssm"
    norms = "norms"
    head = "head"


class ParamCount(Frozen):
    model: str
    total: int
    active: int
    components: dict[Component, int]
    active_components: dict[Component, int]
    # each named stream's parameters (an encoder's, a vision tower's): in the total
    streams: dict[str, int] = Field(default_factory=dict)
    # an auxiliary stream's (multi-token prediction): counted apart, not in the total
    apart: dict[str, int] = Field(default_factory=dict)


def _linear(n_in: int, n_out: int, bias: bool) -> int:
    return n_in * n_out + (n_out if bias else 0)


def _ffn(dim: int, d_ff: int, act: ir.Activation, bias: bool) -> int:
    """One MLP (or one expert): gated ones have gate and up projections, then down."""
    ups = 2 if act.gated else 1
    return ups * _linear(dim, d_ff, bias) + _linear(d_ff, dim, bias)


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def kv_heads(kv: int, tp: int) -> int:
    """KV heads one of `tp` tensor-parallel ranks keeps: kv/tp, or one (replicated)
    when tp exceeds them."""
    return kv // tp if kv >= tp else 1


def vocab_shard(vocab: int, tp: int) -> int:
    """One rank's slice of a vocabulary-parallel embedding or head (padded to tp)."""
    return ceil_div(vocab, tp)


COMPONENTS: dict[type, Component] = {
    ir.Embedding: Component.embedding, ir.PositionEmbedding: Component.embedding,
    ir.TokenTypeEmbedding: Component.embedding,
    ir.PatchEmbed: Component.embedding, ir.LayerNorm: Component.norms,
    ir.RMSNorm: Component.norms, ir.Residual: Component.norms,
    ir.Attention: Component.attention, ir.MLA: Component.attention, ir.MLP: Component.mlp,
    ir.MoE: Component.experts, ir.Linear: Component.mlp, ir.Mamba2: Component.ssm,
    ir.GatedDeltaNet: Component.ssm, ir.ConvStem: Component.embedding,
    ir.RelativePositionBias: Component.embedding, ir.CrossAttention: Component.attention,
    ir.MTPProjection: Component.mlp, ir.Keep: Component.norms, ir.Pool: Component.norms,
    ir.PixelShuffle: Component.norms,
    ir.LMHead: Component.head,
    ir.Pooler: Component.head, ir.Classifier: Component.head,
}  # fmt: skip


def device_params(op: ir.Op, tp: int = 1, ep: int = 1) -> tuple[int, int]:
    """(dense, expert) parameters of one op instance on one device of a layout with `tp`
    tensor-parallel and `ep` expert-parallel ranks (parallel.py states the sharding
    rules); on one device, every parameter of the op. Counts every weight, bias and norm
    scale the reference implementation allocates."""
    match op:
        case ir.Embedding():  # vocabulary-parallel
            return (0 if op.tied else vocab_shard(op.vocab, tp) * op.dim), 0
        case ir.ConvStem():  # two convolutions with biases: mels → dim, dim → dim
            return _linear(op.mels * op.kernel, op.dim, True) + _linear(
                op.dim * op.kernel, op.dim, True
            ), 0
        case ir.RelativePositionBias():
            return op.buckets * op.heads, 0
        case ir.CrossAttention():  # as attention, k and v read the source's width
            q = op.heads // tp * op.head_dim
            kv = kv_heads(op.kv_heads, tp) * op.head_dim
            n = (
                _linear(op.dim, q, op.qkv_bias)
                + _linear(op.source_dim, kv, op.k_bias)
                + _linear(op.source_dim, kv, op.qkv_bias)
                + _linear(q, op.dim, op.out_bias)
            )
            return n, 0
        case ir.MTPProjection():  # enorm, hnorm and eh_proj (2·dim → dim, no bias)
            return 2 * op.dim + _linear(2 * op.dim, op.dim, False), 0
        case ir.PatchEmbed():
            conv = _linear(op.channels * op.patch * op.patch, op.dim, op.bias)
            return conv + (op.dim if op.cls_token else 0), 0
        case ir.PositionEmbedding():
            return op.positions * op.dim, 0
        case ir.TokenTypeEmbedding():
            return op.types * op.dim, 0
        case ir.Norm():
            return op.dim * (2 if op.bias else 1), 0
        case ir.Attention():
            q = op.heads // tp * op.head_dim
            kv = kv_heads(op.kv_heads, tp) * op.head_dim
            n = (
                _linear(op.dim, q * (2 if op.gate else 1), op.qkv_bias)  # and its gate
                + _linear(op.dim, kv, op.k_bias)
                + _linear(op.dim, kv, op.qkv_bias)
                + _linear(q, op.dim, op.out_bias)
                + (2 * op.head_dim if op.qk_norm else 0)
                + (op.heads // tp if op.sinks else 0)
            )
            return n, 0
        case ir.MLA():  # the low-rank a-projections are replicated, the heads split
            heads = op.heads // tp
            qk_head = op.qk_nope_head_dim + op.qk_rope_head_dim
            if op.q_lora_rank:
                q = op.dim * op.q_lora_rank + op.q_lora_rank + op.q_lora_rank * heads * qk_head
            else:
                q = op.dim * heads * qk_head
            kv = (
                op.dim * (op.kv_lora_rank + op.qk_rope_head_dim)
                + op.kv_lora_rank
                + op.kv_lora_rank * heads * (op.qk_nope_head_dim + op.v_head_dim)
            )
            return q + kv + heads * op.v_head_dim * op.dim, 0
        case ir.MLP():
            return _ffn(op.dim, op.d_ff // tp, op.act, op.bias), 0
        case ir.MoE():
            expert = _ffn(op.dim, op.d_ff // tp, op.act, op.bias)
            shared = op.shared_experts * _ffn(op.dim, op.shared_d_ff // tp, op.act, op.bias)
            # the correction bias is a buffer, not a parameter, in the reference code; it
            # is in the checkpoint, so it is counted (docs/conventions.md)
            router = _linear(op.dim, op.experts, op.router_bias) + (
                op.experts if op.correction_bias else 0
            )
            gate = op.dim if op.shared_gate else 0  # Linear(dim, 1), no bias
            return shared + gate + router, op.experts // ep * expert
        case ir.Mamba2():
            heads, groups, di = op.heads // tp, op.groups // tp, op.d_inner // tp
            bc = 2 * groups * op.d_state
            in_proj = _linear(op.dim, 2 * di + bc + heads, op.bias)
            conv_ch = di + bc
            conv = conv_ch * op.d_conv + (conv_ch if op.conv_bias else 0)
            per_head = 3 * heads  # dt_bias, A_log, D
            return in_proj + conv + per_head + di + _linear(di, op.dim, op.bias), 0
        case ir.GatedDeltaNet():  # heads split over the tensor-parallel ranks
            kd, vd, vh = op.key_dim // tp, op.value_dim // tp, op.v_heads // tp
            conv_ch = conv_channels(op.v_heads, op.k_heads, op.head_k_dim, op.head_v_dim) // tp
            n = (
                _linear(op.dim, 2 * kd + 2 * vd, False)  # q, k, v, z
                + _linear(op.dim, 2 * vh, False)  # β and the decay gate
                + conv_ch * op.d_conv  # the conv1d has no bias
                + 2 * vh  # dt_bias, A_log
                + op.head_v_dim  # the gated RMSNorm, shared by the heads
                + _linear(vd, op.dim, False)
            )
            return n, 0
        case ir.Linear():  # replicated on every tensor-parallel rank
            return _linear(op.dim, op.out, op.bias), 0
        case ir.Residual() | ir.Keep() | ir.Pool() | ir.PixelShuffle():
            return 0, 0
        case ir.LMHead():  # vocabulary-parallel
            return (0 if op.tied else _linear(op.dim, vocab_shard(op.vocab, tp), op.bias)), 0
        case ir.Pooler():
            return _linear(op.dim, op.dim, op.bias), 0
        case ir.Classifier():
            return _linear(op.dim, op.classes, op.bias), 0
    raise AssertionError(f"unhandled op {op!r}")  # pragma: no cover


def op_params(op: ir.Op) -> tuple[Component, int, int]:
    """(component, total, active) parameters of one op instance: for MoE, a token
    touches top_k of the experts."""
    dense, experts = device_params(op)
    active = dense + (op.top_k * experts // op.experts if isinstance(op, ir.MoE) else experts)
    return COMPONENTS[type(op)], dense + experts, active


def walk(
    nodes: tuple[ir.Statement, ...],
    multiplicity: int = 1,
    *,
    streams: bool = True,
    auxiliary: bool = False,
) -> Iterator[tuple[ir.Op, int]]:
    """Every op of a layer tree with how many times it occurs: the model's, its
    encoders' and towers' (unless `streams` is off: the main stream's alone); an
    auxiliary stream's (multi-token prediction) only when `auxiliary` is on."""
    for node in nodes:
        if isinstance(node, ir.Repeat):
            yield from walk(node.body, multiplicity * node.count, streams=streams,
                            auxiliary=auxiliary)  # fmt: skip
        elif isinstance(node, ir.Block):
            yield from walk(node.body, multiplicity, streams=streams, auxiliary=auxiliary)
        elif isinstance(node, ir.Stream):
            if streams and (auxiliary or not node.auxiliary):
                yield from walk(node.body, multiplicity)
        else:
            yield node, multiplicity


def streams_of(spec: ir.Spec) -> tuple[ir.Stream, ...]:
    """The spec's streams besides the main one, in order."""
    return tuple(n for n in spec.body if isinstance(n, ir.Stream))


@per_object
def residual_width(spec: ir.Spec) -> int:
    """The residual stream's width: the first layer op's `dim`, what a layer takes in
    per token and a pipeline stage passes on."""
    return next((op.dim for op, _ in walk(spec.body, streams=False)), 0)


@per_object
def count_params(spec: ir.Spec) -> ParamCount:
    """The model's parameters by component, total and active (computed once per spec)."""
    total: dict[Component, int] = dict.fromkeys(Component, 0)
    active: dict[Component, int] = dict.fromkeys(Component, 0)
    for op, times in walk(spec.body):
        component, n, n_active = op_params(op)
        total[component] += n * times
        active[component] += n_active * times
    present = [c for c in Component if total[c]]
    named: dict[str, int] = {}
    apart: dict[str, int] = {}
    for stream in streams_of(spec):
        n = sum(op_params(op)[1] * times for op, times in walk(stream.body))
        (apart if stream.auxiliary else named)[stream.name] = n
    return ParamCount(
        model=spec.name,
        total=sum(total.values()),
        active=sum(active.values()),
        components={c: total[c] for c in present},
        active_components={c: active[c] for c in present},
        streams=named,
        apart=apart,
    )
