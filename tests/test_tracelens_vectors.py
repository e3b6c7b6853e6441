"""TraceLens's own numbers, reproduced to the last integer.

`data/tracelens-vectors.json` holds values computed by calling TraceLens (snapshot
171dd747) itself. Static-function vectors are replayed against the compatible API with
the same arguments; trace-event vectors are replayed through our op records under the
`tracelens` conventions, with the event's shapes and dtypes written out.
"""

import json
from pathlib import Path

import pytest

from modelcost.base.dtypes import DType
from modelcost.perfmodel import (
    CONV,
    GEMM,
    SDPA,
    BinaryElementwise,
    BinaryOp,
    CausalConv1dOp,
    ConvOp,
    CrossEntropyOp,
    FusedMoE,
    GemmOp,
    GroupedGemm,
    GroupedGemmOp,
    InferenceAttention,
    MambaSsdOp,
    MoECommOp,
    Normalization,
    NormOp,
    Reduce,
    ReduceOp,
    RopeOp,
    SdpaOp,
    Softmax,
    UnaryElementwise,
    UnaryOp,
    UnfusedMoE_Down,
    UnfusedMoE_Up,
)

VECTORS = json.loads((Path(__file__).parent / "data" / "tracelens-vectors.json").read_text())

STATIC = {
    "GEMM.flops_func": GEMM.flops_func,
    "GEMM.bytes_func": GEMM.bytes_func,
    "SDPA.flops_func": SDPA.flops_func,
    "SDPA.bytes_func": SDPA.bytes_func,
    "SDPA.flops_bwd_func": SDPA.flops_bwd_func,
    "SDPA.bytes_bwd_func": SDPA.bytes_bwd_func,
    "Softmax.flops_func": Softmax.flops_func,
    "Softmax.bytes_func": Softmax.bytes_func,
    "Softmax.flops_bwd": Softmax.flops_bwd,
    "Normalization.flops_func": Normalization.flops_func,
    "Normalization.bytes_func": Normalization.bytes_func,
    "Normalization.flops_func_bwd": Normalization.flops_func_bwd,
    "Normalization.bytes_func_bwd": Normalization.bytes_func_bwd,
    "GroupedGemm.flops_func": GroupedGemm.flops_func,
    "GroupedGemm.bytes_func": GroupedGemm.bytes_func,
    "GroupedGemm.flops_bwd_func": GroupedGemm.flops_bwd_func,
    "GroupedGemm.bytes_bwd_func": GroupedGemm.bytes_bwd_func,
    "UnaryElementwise.flops_func": UnaryElementwise.flops_func,
    "UnaryElementwise.bytes_func": UnaryElementwise.bytes_func,
    "BinaryElementwise.bytes_func": BinaryElementwise.bytes_func,
    "Reduce.flops_func": Reduce.flops_func,
    "Reduce.bytes_func": Reduce.bytes_func,
    "Reduce.bytes_bwd_func": Reduce.bytes_bwd_func,
    "FusedMoE.bytes_func": FusedMoE.bytes_func,
    "UnfusedMoE_Up.bytes_func": UnfusedMoE_Up.bytes_func,
    "UnfusedMoE_Down.flops_func": UnfusedMoE_Down.flops_func,
    "UnfusedMoE_Down.bytes_func": UnfusedMoE_Down.bytes_func,
    "InferenceAttention.flops_func": InferenceAttention.flops_func,
    "InferenceAttention.bytes_func": InferenceAttention.bytes_func,
}
# CONV vectors name their shape arguments x, w, out; TraceLens's are positional.
CONV_POSITIONAL = {
    "CONV.flops_func": (CONV.flops_func, ("x", "w", "out", "bias")),
    "CONV.bytes_func": (CONV.bytes_func, ("x", "w", "out", "bias", "bytes_per_element")),
    "CONV.bytes_bwd_func": (CONV.bytes_bwd_func, ("x", "w", "out", "bias", "bytes_per_element")),
}

static_vectors = [
    v for v in VECTORS if v["func"] in STATIC and not str(v["value"]).startswith("ValueError")
]
conv_vectors = [v for v in VECTORS if v["func"] in CONV_POSITIONAL]


def _id(v: dict) -> str:
    return v["func"] + ":" + ",".join(f"{k}={a}" for k, a in v["args"].items())[:80]


def test_every_static_function_vector_is_covered() -> None:
    static_names = {
        v["func"]
        for v in VECTORS
        if v["func"]
        .split(".")[-1]
        .endswith(("_func", "_func_bwd", "flops_bwd", "get_output_shape"))
        and " " not in v["func"]
        and v["func"][0].isupper()  # a class's static function, not a trace-event method
    }
    covered = set(STATIC) | set(CONV_POSITIONAL) | {"CONV.get_output_shape"}
    assert static_names <= covered, static_names - covered
    assert (len(static_vectors), len(conv_vectors)) == (54, 4)  # all of them, in the file


@pytest.mark.parametrize("vector", static_vectors, ids=_id)
def test_static_function_vector(vector: dict) -> None:
    assert STATIC[vector["func"]](**vector["args"]) == vector["value"]


@pytest.mark.parametrize("vector", conv_vectors, ids=_id)
def test_conv_static_vector(vector: dict) -> None:
    func, names = CONV_POSITIONAL[vector["func"]]
    assert func(*(vector["args"][n] for n in names)) == vector["value"]


def test_conv_output_shape_vectors() -> None:
    for v in (v for v in VECTORS if v["func"] == "CONV.get_output_shape"):
        a = v["args"]
        shape = CONV.get_output_shape(
            a["x"], a["w"], a["stride"], a["padding"], a["dilation"], a["transposed"],
            a.get("output_padding"),
        )  # fmt: skip
        assert list(shape) == v["value"]


def test_causal_mismatch_returns_the_trapezoid_where_tracelens_raises() -> None:
    (v,) = [v for v in VECTORS if str(v["value"]).startswith("ValueError")]
    assert v["value"] == "ValueError: causal=True but N_Q != N_K: 1 != 2048"
    # decode against 2048 keys: pairs = N_Q·N_KV − N_Q²/2 = 2047.5 per head
    # flops = 2·B·H_Q·pairs·(d_qk + d_v) = 2·1·64·2047.5·256
    assert SDPA.flops_func(**v["args"]) == 2 * 64 * 2047.5 * 256 == 67_092_480


def _value(func: str, **match) -> int | float | dict:
    hits = [v for v in VECTORS if v["func"] == func]
    for key, want in match.items():
        hits = [v for v in hits if v["args"].get(key) == want]
    (hit,) = hits
    return hit["value"]


# ---- trace-event vectors, replayed through op records with the tracelens conventions


def test_gemm_events() -> None:
    # aten::addmm: bias (6144), mat1 (40960, 1536), mat2 (1536, 6144), bf16
    addmm = GemmOp(M=40960, N=6144, K=1536, bias=True)
    assert addmm.tracelens_flops() == _value("aten_addmm.flops") == 773_345_771_520
    assert addmm.tracelens_bytes() == _value("aten_addmm.bytes") == 648_032_256
    # aten::mm (8944, 1024) x (1024, 2816), from TraceLens's reference CSV
    mm = GemmOp(M=8944, N=2816, K=1024)
    ref = [v for v in VECTORS if v["func"] == "aten_mm.flops/.bytes via op map (aten::mm)"]
    assert {"flops": mm.tracelens_flops(), "bytes": mm.tracelens_bytes()} == {
        k: ref[0]["value"][k] for k in ("flops", "bytes")
    }
    # aten::bmm 32 x (512, 128) x (128, 512); baddbmm adds a bias counted N per batch
    bmm = GemmOp(M=512, N=512, K=128, B=32)
    assert bmm.tracelens_flops() == _value("aten_bmm.flops") == 2_147_483_648
    assert bmm.tracelens_bytes() == _value("aten_bmm.bytes") == 25_165_824
    baddbmm = GemmOp(M=512, N=512, K=128, B=32, bias=True)
    assert baddbmm.tracelens_bytes() == _value("aten_baddbmm.bytes") == 25_198_592
    # aten::_scaled_mm fp8 x fp8 → the output is assumed 2 bytes
    fp8 = DType.fp8_e4m3
    scaled = GemmOp(M=8192, N=8192, K=4096, a=fp8, b=fp8, out=DType.bf16)
    assert scaled.tracelens_flops() == _value("aten_scaled_mm.flops") == 549_755_813_888
    assert scaled.tracelens_bytes() == _value("aten_scaled_mm.bytes") == 201_326_592
    # base backward formulas, called on an mm (M=4096, N=2048, K=1024) and the addmm
    mm2 = GemmOp(M=4096, N=2048, K=1024)
    assert mm2.tracelens_flops_bwd() == 34_359_738_368
    assert mm2.tracelens_bytes_bwd() == 58_720_256
    assert addmm.tracelens_flops_bwd() == 1_546_439_884_800


def test_sdpa_events() -> None:
    # flash attention, q (2, 32, 2048, 128), k/v (2, 8, 2048, 128), causal
    gqa = SdpaOp(B=2, N_Q=2048, H_Q=32, N_KV=2048, H_KV=8, d_h_qk=128, d_h_v=128, causal=True)
    assert gqa.tracelens_flops() == 68_719_476_736
    assert gqa.tracelens_flops_bwd() == 171_800_264_704
    assert gqa.tracelens_bytes_bwd() == 134_217_728
    # flash_attn (4, 1024, 16, 128) causal
    fa = SdpaOp(B=4, N_Q=1024, H_Q=16, N_KV=1024, H_KV=16, d_h_qk=128, d_h_v=128, causal=True)
    assert fa.tracelens_flops() == 17_179_869_184
    assert fa.tracelens_bytes() == 67_108_864
    # fp32 q/k/v (1, 16, 1024, 64): TraceLens still counts 2 bytes per element
    f32 = SdpaOp(1, 1024, 16, 1024, 16, 64, 64, False, act=DType.fp32, kv=DType.fp32)
    assert f32.tracelens_bytes() == 8_388_608
    # efficient attention (no recompute in the backward), MHA 32 heads, non-causal
    eff = SdpaOp(2, 2048, 32, 2048, 32, 128, 128, False, flash_impl=False)
    assert eff.tracelens_flops_bwd() == 274_877_906_944


def test_other_events() -> None:
    # aten::convolution 3-D (2,3,16,224,224) * (96,3,2,16,16), stride (2,16,16): the
    # values TraceLens recorded count no bias term, so the record is built without one
    conv = ConvOp((2, 3, 16, 224, 224), (96, 3, 2, 16, 16), stride=(2, 16, 16), padding=(0,))
    assert conv.out_shape == (2, 96, 8, 14, 14)
    assert conv.tracelens_flops() == 924_844_032
    assert conv.tracelens_bytes() == 10_530_816
    # primus grouped gemm X (16384, 2048), W (16, 2048, 1408)
    gg = GroupedGemmOp(M=16384, K=2048, N=1408, G=16)
    assert gg.tracelens_bytes() == 205_520_896
    # variable-K grouped gemm: two groups of 1024 and 3072 rows, K=2048, N=1408
    assert GroupedGemmOp(M=1024 + 3072, K=2048, N=1408, G=2).tracelens_flops() == 23_622_320_128
    assert MoECommOp(8192, 7168).tracelens_bytes() == 117_440_512
    assert MoECommOp(8192, 7168).tracelens_bytes_bwd() == 117_440_512
    conv1d = CausalConv1dOp(batch=4, channels=4096, seq=2048, kernel=4, bias=True)
    assert (conv1d.tracelens_flops(), conv1d.tracelens_bytes()) == (268_435_456, 134_258_688)
    rope = RopeOp(tokens=4096 * 2, heads=32, rotary_dim=128)
    assert (rope.tracelens_flops(), rope.tracelens_bytes()) == (100_663_296, 134_217_728)
    ce = CrossEntropyOp(tokens=8192, vocab=128256)
    assert (ce.tracelens_flops(), ce.tracelens_bytes()) == (5_253_365_760, 2_101_444_608)
    # Mamba SSD: B=2, T=4096, H=64, P=64, G=8, N=128, chunk 256, d_conv 4, fp32 params
    ssd = MambaSsdOp(B=2, T=4096, H=64, P=64, G=8, N=128, chunk=256, d_conv=4)
    assert (ssd.conv_channels, ssd.combined_dim) == (6144, 10304)
    assert (ssd.tracelens_flops(), ssd.tracelens_bytes()) == (39_057_358_848, 235_991_808)


def test_elementwise_and_norm_events() -> None:
    bf16, f32 = DType.bf16, DType.fp32
    copy = UnaryOp((16, 16, 559, 64))
    assert (copy.tracelens_flops(), copy.tracelens_bytes()) == (9_158_656, 36_634_624)
    assert UnaryOp((8, 2048, 28672), "silu").tracelens_bytes() == 1_879_048_192
    pow_ = UnaryOp((16, 559, 1024), "pow", x=f32, out=f32)
    assert (pow_.tracelens_flops(), pow_.tracelens_bytes()) == (9_158_656, 73_269_248)
    assert UnaryOp((4096, 4096), x=f32, out=bf16).tracelens_bytes() == 100_663_296
    mul = BinaryOp((16, 559, 1024), (16, 559, 1), "mul", a=f32, b=f32, out=f32)
    assert (mul.tracelens_flops(), mul.tracelens_bytes()) == (9_158_656, 73_305_024)
    assert BinaryOp((8, 2048, 4096), (4096,), b=f32).tracelens_flops() == 67_108_864
    scalar = BinaryOp((1024, 1024), (), "mul", b=f32)  # a Scalar: 4 bytes, one element
    assert scalar.tracelens_bytes() == 4_194_308
    add = BinaryOp((16, 16, 559, 64), (16, 16, 559, 64))
    assert add.tracelens_bytes() == 54_951_936
    assert BinaryOp((16, 16, 559, 64), (1, 1, 559, 64), "mul").tracelens_bytes() == 36_706_176
    # reductions: TraceLens never parses the dims, so the output is one element
    assert ReduceOp((8, 2048, 4096), (-1,)).tracelens_bytes() == 134_217_730
    mean = ReduceOp((16, 559, 1024), (-1,), "mean", x=f32, out=f32)
    assert (mean.tracelens_flops(), mean.tracelens_bytes()) == (9_158_656, 36_634_628)
    # LayerNorm (8, 2048, 4096) with weight and bias; RMSNorm (8, 2048, 8192)
    ln = NormOp("layernorm", 8 * 2048 * 4096, 4096, has_bias=True)
    assert (ln.tracelens_flops(), ln.tracelens_bytes()) == (335_568_896, 268_484_608)
    rms = NormOp("rmsnorm", 8 * 2048 * 8192, 8192)
    assert (rms.tracelens_flops(), rms.tracelens_bytes()) == (536_903_680, 536_887_296)
    assert rms.tracelens_flops_bwd() == 1_342_177_280
    # BatchNorm (32, 64, 56, 56): training by string truthiness, as TraceLens counts it
    e, c = 32 * 64 * 56 * 56, 64
    assert Normalization.flops_func(True, True, True, e, c) == 32_113_024
    assert Normalization.bytes_func(True, True, True, e, c, 2, 2) == 25_690_880


def test_the_moe_flops_the_vectors_leave_out_by_hand() -> None:
    # The reference vectors give FusedMoE's and UnfusedMoE_Up's bytes but not their FLOPs;
    # TraceLens's formulas (its extensions, tracelens-perf-model.md §2.10), by hand.
    # DeepSeek-V3's experts: 4,096 tokens, hidden 7,168, expert width 2,048, top 8, gated:
    # the gate and up GEMMs 2·4096·7168·2048·8·2 = 1,924,145,348,608, the down GEMM half
    # that, 962,072,674,304, and the weighted combine 4096·7168·(2·8 − 1) = 440,401,920
    assert FusedMoE.flops_func(4096, 7168, 2048, 8, True) == 2_886_658_424_832
    # ungated: one up GEMM, 962,072,674,304, beside the same down GEMM and combine
    assert FusedMoE.flops_func(4096, 7168, 2048, 8, False) == 1_924_585_750_528
    # gpt-oss-120b's (the bytes vector's shape): 512 tokens, 2,880 wide, top 4:
    # 2·512·2880·2880·4 = 33,973,862,400 a GEMM, two of them gated
    assert UnfusedMoE_Up.flops_func(512, 2880, 2880, 4, True) == 67_947_724_800
    assert UnfusedMoE_Up.flops_func(512, 2880, 2880, 4, False) == 33_973_862_400
