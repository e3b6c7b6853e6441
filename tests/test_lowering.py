"""Structural truth: the graph's GEMMs are the GEMMs each reference implementation runs.

Shapes are M × N × K for Y (M, N) = X (M, K) · Wᵀ, derived by hand from each model's
config.json (quoted in the spec files). Prefill is B=1 with S=2048 (GPT-2: 1024, its
position limit; ViT-L/16: 197 tokens per image), logits on every token.
"""

import pytest
from conftest import MODELS

from modelcost import SpecError, load_spec
from modelcost.base.dtypes import DType
from modelcost.ir.graph import OpGraph, Phase, Workload
from modelcost.lowering.lower import lower
from modelcost.lowering.validate import for_phase
from modelcost.perfmodel import GemmOp, GroupedGemmOp, MambaSsdOp, MambaStepOp, SdpaOp


def graph(name: str, phase=Phase.prefill, batch=1, seq=2048, context=2048, logits="all"):
    return lower(load_spec(MODELS / name), for_phase(Workload(phase, batch, seq, context, logits)))


def gemms(g: OpGraph, group: str) -> dict[str, tuple]:
    """{op name within the layer: (M, N, K[, B])} for the GEMMs of one group."""
    prefix = f"{group}." if group != "model" else ""
    out = {}
    for n in g.nodes:
        if n.group == group and isinstance(n.op, GemmOp):
            op = n.op
            shape = (op.M, op.N, op.K) if op.B == 1 else (op.M, op.N, op.K, op.B)
            out[n.name.removeprefix(prefix)] = shape
    return out


def node(g: OpGraph, name: str):
    (n,) = [n for n in g.nodes if n.name == name]
    return n


def counts(g: OpGraph) -> dict[str, int]:
    return {grp.name: grp.count for grp in g.groups}


def llama_layer(S, d, heads, kv, hd, ff):
    return {
        "attn.q_proj": (S, heads * hd, d),
        "attn.k_proj": (S, kv * hd, d),
        "attn.v_proj": (S, kv * hd, d),
        "attn.o_proj": (S, d, heads * hd),
        "mlp.gate_proj": (S, ff, d),
        "mlp.up_proj": (S, ff, d),
        "mlp.down_proj": (S, d, ff),
    }


def test_llama3_70b_prefill_matches_the_issue() -> None:
    g = graph("llama3-70b.model")
    assert gemms(g, "layers.0") == {
        "attn.q_proj": (2048, 8192, 8192),
        "attn.k_proj": (2048, 1024, 8192),
        "attn.v_proj": (2048, 1024, 8192),
        "attn.o_proj": (2048, 8192, 8192),
        "mlp.gate_proj": (2048, 28672, 8192),
        "mlp.up_proj": (2048, 28672, 8192),
        "mlp.down_proj": (2048, 8192, 28672),
    }
    assert gemms(g, "model") == {"lm_head": (2048, 128256, 8192)}
    assert counts(g) == {"model": 1, "layers.0": 80}
    sdpa = node(g, "layers.0.attn.sdpa").op
    assert (sdpa.B, sdpa.N_Q, sdpa.H_Q, sdpa.N_KV, sdpa.H_KV, sdpa.d_h_qk, sdpa.causal) == (
        1, 2048, 64, 2048, 8, 128, True,
    )  # fmt: skip


def test_llama3_70b_decode_and_last_token_logits() -> None:
    g = graph("llama3-70b.model", Phase.decode, batch=8, context=4096)
    assert gemms(g, "layers.0") == llama_layer(8, 8192, 64, 8, 128, 28672)
    assert gemms(g, "model") == {"lm_head": (8, 128256, 8192)}
    sdpa = node(g, "layers.0.attn.sdpa").op
    # one new query per sequence reads all 4096 cached keys; nothing is masked
    assert (sdpa.B, sdpa.N_Q, sdpa.N_KV, sdpa.causal) == (8, 1, 4096, False)
    last = graph("llama3-70b.model", batch=2, logits="last")
    assert gemms(last, "model") == {"lm_head": (2, 128256, 8192)}  # one row per sequence


def test_llama3_8b_and_405b() -> None:
    g = graph("llama3-8b.model")
    assert gemms(g, "layers.0") == llama_layer(2048, 4096, 32, 8, 128, 14336)
    assert gemms(g, "model") == {"lm_head": (2048, 128256, 4096)}
    assert counts(g)["layers.0"] == 32
    g = graph("llama3.1-405b.model")
    assert gemms(g, "layers.0") == llama_layer(2048, 16384, 128, 8, 128, 53248)
    assert gemms(g, "model") == {"lm_head": (2048, 128256, 16384)}
    assert counts(g)["layers.0"] == 126


def grouped(g: OpGraph, name: str) -> tuple:
    op = node(g, name).op
    assert isinstance(op, GroupedGemmOp)
    return (op.M, op.K, op.N, op.G)


def test_mixtral() -> None:
    g = graph("mixtral-8x7b.model")
    layer = gemms(g, "layers.0")
    assert layer == {
        "attn.q_proj": (2048, 4096, 4096),
        "attn.k_proj": (2048, 1024, 4096),
        "attn.v_proj": (2048, 1024, 4096),
        "attn.o_proj": (2048, 4096, 4096),
        "moe.router": (2048, 8, 4096),
    }
    # 2048 tokens × top-2 = 4096 rows; w1 and w3 side by side (N = 2·14336); all 8 hit
    assert grouped(g, "layers.0.moe.experts.gate_up") == (4096, 4096, 28672, 8)
    assert grouped(g, "layers.0.moe.experts.down") == (4096, 14336, 4096, 8)
    assert gemms(g, "model") == {"lm_head": (2048, 32000, 4096)}
    # at decode a single token touches its top-2 experts: E·(1 − (6/8)^1) = 2
    d = graph("mixtral-8x7b.model", Phase.decode)
    assert grouped(d, "layers.0.moe.experts.down") == (2, 14336, 4096, 2)


MLA_PREFILL = {
    "attn.q_a_proj": (2048, 1536, 7168),
    "attn.q_b_proj": (2048, 128 * 192, 1536),  # heads × (nope 128 + rope 64)
    "attn.kv_a_proj": (2048, 512 + 64, 7168),  # latent + shared rope key
    "attn.kv_b_proj": (2048, 128 * 256, 512),  # heads × (nope 128 + v 128)
    "attn.o_proj": (2048, 7168, 128 * 128),
}


def test_deepseek_v3_prefill() -> None:
    g = graph("deepseek-v3.model")
    assert counts(g) == {"model": 1, "layers.0": 3, "layers.3": 58}  # 3 dense, 58 MoE
    assert gemms(g, "layers.0") == MLA_PREFILL | {
        "mlp.gate_proj": (2048, 18432, 7168),
        "mlp.up_proj": (2048, 18432, 7168),
        "mlp.down_proj": (2048, 7168, 18432),
    }
    assert gemms(g, "layers.3") == MLA_PREFILL | {
        "moe.router": (2048, 256, 7168),
        "moe.shared.gate_proj": (2048, 2048, 7168),
        "moe.shared.up_proj": (2048, 2048, 7168),
        "moe.shared.down_proj": (2048, 7168, 2048),
    }
    assert grouped(g, "layers.3.moe.experts.gate_up") == (2048 * 8, 7168, 2 * 2048, 256)
    assert grouped(g, "layers.3.moe.experts.down") == (2048 * 8, 2048, 7168, 256)
    assert gemms(g, "model") == {"lm_head": (2048, 129280, 7168)}
    sdpa = node(g, "layers.3.attn.sdpa").op
    assert (sdpa.H_Q, sdpa.H_KV, sdpa.d_h_qk, sdpa.d_h_v) == (128, 128, 192, 128)
    # recipe fp8_block (DeepSeek-V3 report, section 3.3): fp8 weights in 128×128 blocks,
    # activations quantized to fp8 in 1×128 blocks first, so the GEMM runs at fp8
    q = node(g, "layers.3.attn.q_a_proj")
    assert (q.op.a, q.op.b, q.op.precision) == (DType.fp8_e4m3, DType.fp8_e4m3, "fp8")
    # it reads fp32 scales: ⌈1536/128⌉·⌈7168/128⌉ = 12·56 of the weights', 2048·56 of
    # the activations': (672 + 114,688) · 4 bytes
    assert q.op.scale_bytes == (12 * 56 + 2048 * 56) * 4 == 461_440
    (x,) = q.inputs
    quant = node(g, x).op
    assert (quant.kind, quant.elements, quant.dst, quant.block) == (
        "Quantize",
        2048 * 7168,
        DType.fp8_e4m3,
        128,
    )
    assert quant.scale_bytes == 2048 * 56 * 4
    # the router and the LM head stay bf16
    assert node(g, "layers.3.moe.router").op.a == DType.bf16
    assert node(g, "lm_head").op.b == DType.bf16


def test_deepseek_v3_decode_is_absorbed() -> None:
    g = graph("deepseek-v3.model", Phase.decode, batch=4, context=4096)
    layer = gemms(g, "layers.3")
    # q_nope (per head 128) × W_UK → the 512-wide latent; latent output × W_UV → 128
    assert layer["attn.q_absorb"] == (4, 512, 128, 128)
    assert layer["attn.o_absorb"] == (4, 128, 512, 128)
    assert "attn.kv_b_proj" not in layer
    sdpa = node(g, "layers.3.attn.sdpa").op
    assert (sdpa.B, sdpa.N_Q, sdpa.H_Q, sdpa.N_KV, sdpa.H_KV, sdpa.d_h_qk, sdpa.d_h_v) == (
        4, 1, 128, 4096, 1, 576, 512,
    )  # fmt: skip
    assert any("absorbed" in note for note in g.notes)


def test_qwen3_30b_a3b() -> None:
    g = graph("qwen3-30b-a3b.model")
    assert gemms(g, "layers.0") == {
        "attn.q_proj": (2048, 32 * 128, 2048),  # head_dim 128 ≠ 2048/32
        "attn.k_proj": (2048, 4 * 128, 2048),
        "attn.v_proj": (2048, 4 * 128, 2048),
        "attn.o_proj": (2048, 2048, 32 * 128),
        "moe.router": (2048, 128, 2048),
    }
    assert grouped(g, "layers.0.moe.experts.gate_up") == (2048 * 8, 2048, 2 * 768, 128)
    assert grouped(g, "layers.0.moe.experts.down") == (2048 * 8, 768, 2048, 128)
    assert {n.name for n in g.nodes} >= {"layers.0.attn.q_norm", "layers.0.attn.k_norm"}
    assert gemms(g, "model") == {"lm_head": (2048, 151936, 2048)}


def test_gemma2_alternates_local_and_global_attention() -> None:
    g = graph("gemma2-9b.model")
    assert counts(g) == {"model": 1, "layers.0": 21, "layers.1": 21}
    layer = llama_layer(2048, 3584, 16, 8, 256, 14336)
    assert gemms(g, "layers.0") == layer and gemms(g, "layers.1") == layer
    assert node(g, "layers.0.attn.sdpa").op.window == 4096  # even layers slide
    assert node(g, "layers.1.attn.sdpa").op.window == 0
    assert gemms(g, "model") == {"lm_head": (2048, 256000, 3584)}  # tied, still a GEMM
    assert {g.layer_label for g in g.groups} == {"", "0, 2, …, 40", "1, 3, …, 41"}


def test_gpt_oss_120b() -> None:
    g = graph("gpt-oss-120b.model")
    assert counts(g) == {"model": 1, "layers.0": 18, "layers.1": 18}
    assert gemms(g, "layers.0") == {
        "attn.q_proj": (2048, 64 * 64, 2880),
        "attn.k_proj": (2048, 8 * 64, 2880),
        "attn.v_proj": (2048, 8 * 64, 2880),
        "attn.o_proj": (2048, 2880, 64 * 64),
        "moe.router": (2048, 128, 2880),
    }
    gu = node(g, "layers.0.moe.experts.gate_up").op
    assert (gu.M, gu.K, gu.N, gu.G) == (2048 * 4, 2880, 2 * 2880, 128)
    assert (gu.x, gu.w) == (DType.bf16, DType.mxfp4)  # MXFP4 experts
    assert node(g, "layers.0.attn.sdpa").op.window == 128
    assert node(g, "layers.1.attn.sdpa").op.window == 0
    assert gemms(g, "model") == {"lm_head": (2048, 201088, 2880)}


def test_mamba2() -> None:
    g = graph("mamba2-2.7b.model")
    # in_proj: z and x (2·5120), B and C (2·1·128), dt (80 heads)
    assert gemms(g, "layers.0") == {
        "mamba.in_proj": (2048, 2 * 5120 + 2 * 128 + 80, 2560),
        "mamba.out_proj": (2048, 2560, 5120),
    }
    ssd = node(g, "layers.0.mamba.ssd").op
    assert isinstance(ssd, MambaSsdOp)
    assert (ssd.B, ssd.T, ssd.H, ssd.P, ssd.G, ssd.N, ssd.chunk, ssd.d_conv) == (
        1, 2048, 80, 64, 1, 128, 256, 4,
    )  # fmt: skip
    assert gemms(g, "model") == {"lm_head": (2048, 50288, 2560)}
    d = graph("mamba2-2.7b.model", Phase.decode, batch=4)
    assert isinstance(node(d, "layers.0.mamba.ssd").op, MambaStepOp)  # a recurrent update


def test_gpt2_uses_its_fused_projections() -> None:
    g = graph("gpt2.model", seq=1024)
    assert gemms(g, "layers.0") == {
        "attn.qkv_proj": (1024, 3 * 768, 768),  # c_attn
        "attn.o_proj": (1024, 768, 768),  # c_proj
        "mlp.up_proj": (1024, 3072, 768),  # c_fc
        "mlp.down_proj": (1024, 768, 3072),  # mlp.c_proj
    }
    assert gemms(g, "model") == {"lm_head": (1024, 50257, 768)}
    with pytest.raises(SpecError, match="sequence length 2048 exceeds the 1024 learned"):
        graph("gpt2.model", seq=2048)


def test_vit_l16() -> None:
    g = graph("vit-l16.model", batch=2, seq=None)  # the image sets the length: 197
    assert gemms(g, "layers.0") == {
        "attn.q_proj": (2 * 197, 1024, 1024),
        "attn.k_proj": (2 * 197, 1024, 1024),
        "attn.v_proj": (2 * 197, 1024, 1024),
        "attn.o_proj": (2 * 197, 1024, 1024),
        "mlp.up_proj": (2 * 197, 4096, 1024),
        "mlp.down_proj": (2 * 197, 1024, 4096),
    }
    assert gemms(g, "model") == {"classifier": (2, 1000, 1024)}
    conv = node(g, "patch_embed").op
    assert conv.out_shape == (2, 1024, 14, 14)
    sdpa = node(g, "layers.0.attn.sdpa").op
    assert (sdpa.N_Q, sdpa.causal) == (197, False)
    with pytest.raises(SpecError, match="decode needs a causal decoder"):
        graph("vit-l16.model", Phase.decode)
    # an explicit length that is not the image's is refused, not silently replaced
    with pytest.raises(SpecError, match="197 tokens, not seq 999"):
        graph("vit-l16.model", batch=2, seq=999)
    # (196 patches + 1 class token) x batch 8 = 1,576 tokens per step (issue 8, item 1)
    assert graph("vit-l16.model", batch=8, seq=None).shape.T == 1_576
    # bidirectional attention keeps no KV cache: no cache writes
    assert not any("kv_cache_write" in n.name for n in g.nodes)


def test_training_adds_loss_and_optimizer() -> None:
    g = graph("llama3-8b.model", Phase.train, batch=2, seq=1024)
    names = [n.name for n in g.nodes]
    assert names[-3:] == ["lm_head", "loss", "optimizer"]
    assert node(g, "optimizer").op.params == 8_030_261_248
    assert not any("kv_cache_write" in n for n in names)
    assert node(g, "layers.0.norm.0").op.is_training


def test_edges_follow_the_residual_stream() -> None:
    g = graph("llama3-8b.model")
    assert node(g, "layers.0.norm.0").inputs == ("embed",)
    assert node(g, "layers.0.attn.sdpa").inputs == (
        "layers.0.attn.rope", "layers.0.attn.rope", "layers.0.attn.v_proj",
    )  # fmt: skip
    assert node(g, "layers.0.residual.0").inputs == ("layers.0.attn.o_proj", "embed")
    assert node(g, "layers.0.residual.1").inputs == (
        "layers.0.mlp.down_proj", "layers.0.residual.0",
    )  # fmt: skip
    assert node(g, "norm").inputs == ("layers.0.residual.1",)


def test_sdpa_of_every_attention_model_is_causal_at_prefill() -> None:
    for name in ("llama3-8b.model", "mixtral-8x7b.model", "gemma2-9b.model"):
        g = graph(name)
        assert all(n.op.causal for n in g.nodes if isinstance(n.op, SdpaOp))


def test_pooler_the_contributing_guides_example() -> None:
    """docs/contributing.md's worked example, `pooler` (BERT's): its test."""
    from modelcost import parse_spec
    from modelcost.lowering.params import count_params

    spec = parse_spec(
        "model m { d_model = 768\n  layernorm\n  attention(12, causal = false, rope = false)\n"
        "  residual\n  pooler\n  classifier(2)\n}\n"
    )
    g = lower(spec, Workload(Phase.prefill, 4, 128))
    assert gemms(g, "model")["pooler.dense"] == (4, 768, 768)  # one row per sequence
    tanh = next(n.op for n in g.nodes if n.name == "pooler.tanh")
    assert (tanh.fn, tanh.nelems) == ("tanh", 4 * 768)
    # BertPooler: Linear(768, 768) with bias = 768·768 + 768 = 590,592 parameters
    head = count_params(spec).components
    assert head[next(c for c in head if c.value == "head")] == 590_592 + 768 * 2 + 2
