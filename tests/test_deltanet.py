"""Gated DeltaNet (Qwen3-Next's linear attention) and gated attention, by hand."""

from conftest import MODELS

from modelcost import load_spec
from modelcost.ir.graph import Phase, Workload
from modelcost.lowering.lower import lower
from modelcost.perfmodel import GatedDeltaNetOp, GatedDeltaStepOp

SPEC = load_spec(MODELS / "qwen3-next-80b-a3b.model")


def test_the_chunked_delta_rule_by_hand() -> None:
    # one sequence of 128 tokens, 32 value heads of 128, 16 key heads of 128, chunks of
    # 64: per head and chunk 6·C²·dk + 4·C²·dv + 6·C·dk·dv + C³/3 (Yang et al. 2024),
    # plus the conv1d over 2·16·128 + 32·128 = 8192 channels with a 4-tap kernel
    op = GatedDeltaNetOp(1, 128, 32, 16, 128, 128, 64, 4)
    per_chunk = 6 * 64**2 * 128 + 4 * 64**2 * 128 + 6 * 64 * 128 * 128 + 64**3 // 3
    assert op.flops() == 2 * 8192 * 128 * 4 + 32 * 2 * per_chunk
    # a decode step: 7 FLOPs per state element, and the state read and written in fp32
    step = GatedDeltaStepOp(4, 32, 16, 128, 128, 4)
    assert step.flops() == 2 * 4 * 8192 * 4 + 7 * 4 * 32 * 128 * 128


def test_a_deltanet_layer_keeps_a_state_not_a_cache() -> None:
    g = lower(SPEC, Workload(Phase.decode, 8, context=32768))
    # per sequence: 36 deltanet layers of 32 · 128 · 128 fp32 states and 8192 · 4 bf16
    # conv values; 12 attention layers of 2 · 2 KV heads · 256 bf16 per position
    state = 36 * (32 * 128 * 128 * 4 + 8192 * 4 * 2)
    cache = 12 * 32768 * 2 * 2 * 256 * 2
    assert g.facts.cache_bytes == 8 * (state + cache)
    steps = [n for n in g.nodes if n.op.kind == "GatedDeltaNet"]
    assert {type(n.op) for n in steps} == {GatedDeltaStepOp}


def test_gated_attention_doubles_q_proj_and_gates_the_output() -> None:
    g = lower(SPEC, Workload(Phase.prefill, 1, 4096))
    q = next(n for n in g.nodes if n.name == "layers.3.attn.q_proj")
    assert (q.op.M, q.op.N, q.op.K) == (4096, 2 * 16 * 256, 2048)
    gate = next(n for n in g.nodes if n.name == "layers.3.attn.gate_mul")
    o = next(n for n in g.nodes if n.name == "layers.3.attn.o_proj")
    assert o.inputs == (gate.name,)
