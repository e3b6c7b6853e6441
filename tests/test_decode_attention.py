"""Decode attention over a paged KV cache (the KV bytes at the decode kernel's published
bandwidth, the split-KV grid, GQA packing) and prefill attention at the rate of the kernel
the engines run: by hand from their sources (specs/kernels/attention.json)."""

import json
import math

import pytest
from conftest import MODELS
from hypothesis import given, settings
from hypothesis import strategies as st

from modelcost.base.dtypes import DType
from modelcost.base.resources import specs_dir
from modelcost.estimate.attention_rates import (
    decode_blocks,
    decode_kernels,
    decode_rate,
    engine_prefill,
    split_kv,
)
from modelcost.estimate.estimate import estimate
from modelcost.estimate.kernel_rates import LAUNCH_S, library
from modelcost.ir.graph import Phase, Workload
from modelcost.perfmodel import SdpaOp
from modelcost.roofline.compile import compile_report
from modelcost.targets.hardware import load_hardware
from modelcost.targets.roofs import roof

H100 = load_hardware("h100")  # 132 SMs; 3.35 TB/s datasheet, 3.18 TB/s best published (h100.hw)
MI300X = load_hardware("mi300x")  # 304 CUs; best published 4.28 TB/s (mi300x.hw)
PARTS = ("h100", "h200", "b200", "gb200", "a100", "mi300x", "mi325x", "mi355x")


def _roofline(op: SdpaOp, hw) -> float:
    r = roof(op.unit, op.precision, hw, "datasheet", "datasheet")
    return max(op.flops() / r.peak_flops, op.bytes() / r.bytes_per_s)


def _estimate(op: SdpaOp, hw):
    return estimate(op, op.flops(), op.bytes(), _roofline(op, hw), hw)


def test_a_decode_step_on_h100_by_hand() -> None:
    # Llama 3 8B's attention, one sequence, 4,096 cached keys: Q and O are 32 heads × 128
    # bf16, K and V 4,096 × 8 heads × 128 bf16: 2·32·128·2 + 2·4096·8·128·2 = 16,793,600 B
    op = SdpaOp(1, 1, 32, 4096, 8, 128, 128, causal=False)
    assert op.bytes() == 16_793_600
    # GQA packs the 4 query heads of a KV head into one block: 1 × 8 blocks; 4,096 keys in
    # 128-key steps (d = 128) are 32 steps; FlashAttention-2's heuristic over 2 × 132 slots
    # takes 32 splits (see test_split_kv_as_flash_attention_2_does_it): 256 blocks, more
    # than the 30 % of 132 SMs that draw the whole bandwidth (FlashInfer: 32 of 108)
    assert decode_blocks(op, 132) == (256, 32, 4)
    e = _estimate(op, H100)
    # FlashInfer's decode reaches "close to 100 %" of the bandwidth: the best published
    # 3.18 TB/s; and the 23.4 µs a call its published times take beyond their bytes (the
    # intercept of the line through FlashInfer's batch-GQA decode times, attention.json),
    # its launch and the split combine within it
    assert e.time_s == pytest.approx(16_793_600 / 3.18e12 + 23.4e-6, rel=1e-12)
    assert e.reason == (
        "decode: 256 blocks, keys split 32 ways; KV cache read at 3.18 TB/s, the best "
        "published: FlashInfer batch decode (paged KV) reaches close to 100 %; +21.4 µs a "
        "call beyond its bytes and launch (its published 23.4 µs, the combine within it); "
        "+2 µs launch"
    )


def test_the_decode_fits_give_back_the_points_they_were_fitted_to() -> None:
    # A regression pin on the fits in attention.json, not accuracy: the published times
    # below are the very points the lines were fitted through (in-sample).
    # trtllm-gen's decode on Blackwell (NVIDIA/Megatron-LM PR #6462): batch 256, 32 query
    # and 4 KV heads of 128, bf16: 45.1 / 80.7 / 151.9 µs at contexts 512 / 1,024 / 2,048.
    # The model (bytes at 94.25 % of 8 TB/s, plus 9.5 µs a call: the line fitted to K
    # and V alone) gives each within 2 %, the op's bytes also counting Q and O (4.2 MB)
    for ctx, published in ((512, 45.1e-6), (1024, 80.7e-6), (2048, 151.9e-6)):
        op = SdpaOp(256, 1, 32, ctx, 4, 128, 128, causal=False)
        e = _estimate(op, load_hardware("b200"))
        assert e.time_s == pytest.approx(published, rel=0.02)
    # FlashInfer's batch GQA decode on H100 (its blog's Figure 9: batch 64, 32 query and 4
    # KV heads, fp16), utilization read off the plot: 47 / 60 / 73 / 82 / 88 % of 3,352
    # GB/s at 512 to 8K; the model at the best published 3.18 TB/s plus 23.4 µs reaches
    # each within 4 points
    for ctx, util in ((512, 0.47), (1024, 0.60), (2048, 0.73), (4096, 0.82), (8192, 0.88)):
        op = SdpaOp(64, 1, 32, ctx, 4, 128, 128, causal=False)
        e = _estimate(op, H100)
        kv = 64 * ctx * 4 * 128 * 2 * 2
        assert kv / e.time_s / 3.352e12 == pytest.approx(util, abs=0.04)


def test_too_few_blocks_draw_a_share_of_the_bandwidth() -> None:
    # one sequence, 64 query / 8 KV heads, 1,024 keys: 8 blocks, 8 key steps, so at most 8
    # splits: 64 blocks; whole bandwidth takes 0.2963 × 256 = 75.9 CUs busy (FlashInfer's
    # 32 of 108), so 64 / 75.85 = 84 % of MI355X's best published 6.44 TB/s (MI355X has
    # no published decode kernel: its sustained bandwidth, said so)
    op = SdpaOp(1, 1, 64, 1024, 8, 128, 128, causal=False)
    assert decode_blocks(op, 256) == (64, 8, 8)
    share = 64 / (0.2963 * 256)
    e = _estimate(op, load_hardware("mi355x"))
    assert e.time_s == pytest.approx(op.bytes() / (6.442e12 * share) + 2 * 2e-6, rel=1e-12)
    assert "84% of the bandwidth (the whole of it takes 76 CUs busy)" in e.reason
    assert "6.44 TB/s, the best published on mi355x (no published decode kernel)" in e.reason


def test_mi300x_decode_at_aiters_published_gfx942_rate_pins_its_fit() -> None:
    # In-sample: the 0.512 fraction was taken from this very row, so giving it back is a
    # regression pin on attention.json's gfx942 figure, not a validation of the estimate.
    # ROCm/aiter PR #1383 row 46 (gfx942): batch 128, context 4096, 16 query / 1 KV head,
    # d=128, 16-bit KV: 268.4 MB of KV + 0.5 MB of queries in 99.1 µs = 2.71 TB/s, 0.512 of
    # the 5.3 TB/s datasheet. The grid: 128 blocks, keys split 4 ways (FlashAttention-2's
    # heuristic over 2 × 304 slots) = 512 blocks, more than the 90 CUs that draw the whole
    # bandwidth; so its bytes at 0.512 × 5.3 TB/s, plus the launch and the combine's
    op = SdpaOp(128, 1, 16, 4096, 1, 128, 128, causal=False)
    assert decode_blocks(op, 304) == (512, 4, 16)
    e = _estimate(op, MI300X)
    expected = op.bytes() / (0.512 * 5.3e12) + 2 * 2e-6
    assert e.time_s == pytest.approx(expected, rel=1e-12)
    assert "2.71 TB/s: AITER Gluon paged-attention decode (gfx942), 51.2% of 5.30 TB/s" in e.reason
    # the row it was taken from, 99.1 µs, plus the two 2 µs launches the model adds around
    # the kernel (the pin)
    assert e.time_s * 1e6 == pytest.approx(99.1 + 4, abs=0.5)


def test_absorbed_mla_decode_at_flashmla_s_published_bandwidth() -> None:
    # DeepSeek-V3 absorbed MLA: one latent KV head of 512 + 64 rope; FlashMLA's 3,000 GB/s
    # on H800 (the same 3.35 TB/s HBM3 as H100) is 0.8955 of the datasheet bandwidth.
    # The values are the latent's first 512 columns, so the cache is read once, 576 a
    # position, as FlashMLA counts its bytes (tests/test_flash_mla.py: total_seqlens ·
    # h_kv · d): 64 · 4,096 · 576 · 2 B of cache, Q 64 · 128 · 576 · 2 B, O 64 · 128 · 512 · 2 B
    op = SdpaOp(64, 1, 128, 4096, 1, 576, 512, causal=False, v_in_k=True)
    assert op.bytes() == 64 * 4096 * 576 * 2 + 64 * 128 * 576 * 2 + 64 * 128 * 512 * 2
    assert op.bytes() == 319_815_680
    # without the shared latent, the values' 512 columns would be read again: 1.89 × the cache
    apart = SdpaOp(64, 1, 128, 4096, 1, 576, 512, causal=False)
    assert apart.bytes() - op.bytes() == 64 * 4096 * 512 * 2
    blocks, splits, rows = decode_blocks(op, 132)
    # 64 × ⌈128 heads / 64 rows⌉ = 128 blocks < 0.8 × 264 slots; 2 splits fill 256 / 264
    assert (blocks, splits, rows) == (256, 2, 64)
    e = _estimate(op, H100)
    assert e.time_s == pytest.approx(op.bytes() / (0.8955 * 3.35e12) + 2 * 2e-6, rel=1e-12)
    assert "FlashMLA (paged latent KV, borrowed from H800), 89.5% of 3.35 TB/s" in e.reason


@pytest.mark.parametrize(
    ("work", "slots", "n_blocks", "splits"),
    [
        # FlashAttention-2's own example (flash_api.cpp): 48 blocks on 108 SMs, 2 splits
        # (wave efficiency 0.89) rather than 3 (0.67): the fewest within 85 % of the best
        (48, 108, 100, 2),
        # 8 blocks, 264 slots, 32 key steps: the best efficiency is 32 splits' 256/264;
        # 85 % of it needs 28 or more, and 28 to 31 take 2 steps each as 17 splits do
        # (not eligible), so 32
        (8, 264, 32, 32),
        (8, 264, 4, 4),  # no more splits than key steps
        (212, 264, 32, 1),  # 212 ≥ 0.8 × 264 = 211.2: the grid is full enough
        # just under: 1 to 4 splits leave their last wave 0.80 full (211·s / 264 waves),
        # below 85 % of 5 splits' 1,055 / 1,056: 5
        (211, 264, 32, 5),
    ],
)
def test_split_kv_as_flash_attention_2_does_it(work, slots, n_blocks, splits) -> None:
    assert split_kv(work, slots, n_blocks) == splits


@pytest.mark.parametrize(
    ("N_Q", "H_Q", "H_KV", "blocks"),
    [
        (1, 64, 8, 64 * 8),  # GQA: 8 query heads share their KV head's block
        (1, 64, 64, 64 * 64),  # MHA: a block per head
        (4, 64, 8, 64 * 8),  # 4 speculative tokens × 8 heads = 32 rows: one block
        (16, 64, 8, 64 * 8 * 2),  # 16 × 8 = 128 rows: two 64-row blocks
    ],
)
def test_gqa_packs_query_heads_per_kv_head(N_Q, H_Q, H_KV, blocks) -> None:
    # batch 64: 64 × H_kv blocks and more fill 264 slots, so no split
    op = SdpaOp(64, N_Q, H_Q, 4096, H_KV, 128, 128, causal=False)
    assert decode_blocks(op, 132) == (blocks, 1, min(64, N_Q * H_Q // H_KV))


@settings(max_examples=150, deadline=None)
@given(
    part=st.sampled_from(PARTS),
    B=st.integers(1, 256),
    N_Q=st.integers(1, 64),
    H_KV=st.sampled_from([1, 2, 4, 8, 16]),
    group=st.sampled_from([1, 2, 4, 8, 16]),
    N_KV=st.integers(1, 131072),
    d=st.sampled_from([64, 128, 256]),
    kv=st.sampled_from([DType.bf16, DType.fp8_e4m3]),
)
def test_a_decode_estimate_is_never_below_its_roofline(part, B, N_Q, H_KV, group, N_KV, d, kv):
    hw = load_hardware(part)
    op = SdpaOp(B, N_Q, H_KV * group, max(N_KV, N_Q), H_KV, d, d, causal=False, kv=kv)
    blocks, splits, _ = decode_blocks(op, hw.compute_units)
    assert blocks % splits == 0 and 1 <= splits <= 128
    e = _estimate(op, hw)
    assert e.time_s >= _roofline(op, hw) + LAUNCH_S
    assert e.reason.startswith("decode: ")


def test_prefill_attention_takes_the_engines_kernel() -> None:
    op = SdpaOp(16, 4096, 64, 4096, 8, 128, 128, causal=True)
    # MI355X: AITER's asm flash attention, published by sequence length (aiter's
    # op_tests/cpp/mha/README.md, PR #1270): causal, B=8, S=4096, 64/8 heads, 1,190.3
    # TFLOPS, not HipKittens' faster 1,325 nor AITER's one long-sequence figure
    e = _estimate(op, load_hardware("mi355x"))
    assert (
        "AITER asm flash attention (fwd_v3) sustains 1,190 TFLOPS at B=8, S=4096, 64/8 "
        "heads, causal: " in e.reason
    )
    # shorter than the shortest published length (1,024): its rate, not a long one's
    short = SdpaOp(16, 512, 64, 512, 8, 128, 128, causal=True)
    assert (
        "at B=8, S=1024, 64/8 heads, causal: " in _estimate(short, load_hardware("mi355x")).reason
    )
    # between two lengths: their per-block rates interpolated in log(length)
    mid = SdpaOp(16, 1448, 64, 1448, 8, 128, 128, causal=True)
    assert "interpolated in log(length)" in _estimate(mid, load_hardware("mi355x")).reason
    # a head dimension the sweep was not published at (MLA's 192): the engines' kernel
    mla = SdpaOp(16, 4096, 64, 4096, 8, 192, 128, causal=True)
    assert "AITER flash_attn_func" in _estimate(mla, load_hardware("mi355x")).reason
    # H100 at head dim 128: FlashAttention-3's figures by length (ThunderKittens'
    # chart @6d64b0cb: causal, B=16, H=16, 581 TFLOPS at S=3072 and 617 at S=6144)
    assert (
        "FlashAttention-3 sustains 581 TFLOPS at B=16, S=3072, 16/16 heads, causal and 617 "
        "at S=6144" in _estimate(op, H100).reason
    )
    # another head dimension: FlashAttention-3, as vLLM picks it on compute capability
    # 9.x, at the paper's one figure
    assert (
        "FlashAttention-3 (vLLM's and SGLang's FlashAttention backend on Hopper) "
        "sustains 740 TFLOPS" in _estimate(mla, H100).reason
    )
    # B200: cuDNN's causal figures by length (cudnn-frontend @0b1577c: B=1, 128/8 heads,
    # 855.7 TFLOPS at S=4096)
    assert (
        "cuDNN SDPA (PyTorch's cuDNN backend) sustains 856 TFLOPS at B=1, S=4096, 128/8 "
        "heads, causal" in _estimate(op, load_hardware("b200")).reason
    )


def test_the_attention_data_names_its_sources_and_its_kernels_exist() -> None:
    data = json.loads((specs_dir() / "kernels" / "attention.json").read_text(encoding="utf-8"))
    assert data["saturation"]["share"] == round(32 / 108, 4) and data["saturation"]["source"]
    ids = {k.id for k in library()}
    for k in decode_kernels():
        assert k.source and k.measured and load_hardware(k.part).name == k.part
        assert k.fraction is None or 0 < k.fraction <= 1
    for p in data["prefill"]:
        e = engine_prefill(p["part"])
        assert e is not None and e.source and set(e.kernels) <= ids


def test_a_decode_report_says_which_kernel_reads_the_cache() -> None:
    w = Workload(Phase.decode, 8, context=8192)
    r = compile_report(MODELS / "llama3-70b-fp8.model", "h100", w, estimate="kernels")
    sdpa = next(o for o in r.ops if o.name.endswith("attn.sdpa"))
    assert sdpa.estimate_reason.startswith("decode: ")
    assert "FlashInfer batch decode (paged KV)" in sdpa.estimate_reason
    assert sdpa.estimate_s >= sdpa.time_s


# ---- MLA decode on gfx942 at the rates AITER's kernel was published at (issue 34 item 3)

# AITER mla_decode_fwd on MI300X, batch 128, 128 heads, bf16, page size 1 (ROCm/gpuaidev
# @2d217d5, aiter_mla_decode_kernel.ipynb and its chart): ms by context
AITER_MLA_MS = {1024: 0.68, 2048: 0.81, 4096: 1.05, 6144: 1.18, 8192: 1.43}


def _mla_decode(batch: int, heads: int, context: int) -> SdpaOp:
    return SdpaOp(batch, 1, heads, context, 1, 576, 512, causal=False, act=DType.bf16,
                  kv=DType.bf16, flash_impl=True, v_in_k=True)  # fmt: skip


@pytest.mark.parametrize("context", sorted(AITER_MLA_MS))
@pytest.mark.parametrize("part", ["mi300x", "mi325x"])
def test_mla_decode_on_gfx942_takes_the_published_time(part, context) -> None:
    # at the published shape the estimate is the published time, plus the launch every
    # op pays and the split-KV combine's launch where the grid splits the keys
    op = _mla_decode(128, 128, context)
    hw = load_hardware(part)
    splits = decode_blocks(op, hw.compute_units)[1]
    e = _estimate(op, hw)
    launches = LAUNCH_S * (2 if splits > 1 else 1)
    assert e.time_s == pytest.approx(AITER_MLA_MS[context] * 1e-3 + launches, rel=1e-12)
    assert "AITER mla_decode_fwd (gfx942)" in e.reason and "compute-bound" in e.reason


def test_mla_decode_rate_between_published_contexts() -> None:
    # between 2,048 and 4,096 keys the rate is interpolated in log(context): at 3,000,
    # r = r2048^(1-w) · r4096^w, w = ln(3000/2048)/ln 2, each rate the published FLOPs
    # 2·128·128·ctx·(576 + 512) over the published time
    (k,) = [k for k in decode_kernels() if k.id == "aiter-mla-decode-mi300x"]
    r2, r4 = (2 * 128 * 128 * c * 1088 / (AITER_MLA_MS[c] * 1e-3) for c in (2048, 4096))
    w = math.log(3000 / 2048) / math.log(2)
    assert decode_rate(k, 3000)[0] == pytest.approx(r2 ** (1 - w) * r4**w, rel=1e-12)
    # outside the published contexts, the nearest published rate: 54 TFLOPS below, 204 above
    assert decode_rate(k, 512)[0] == pytest.approx(2 * 128 * 128 * 1024 * 1088 / 0.68e-3)
    assert decode_rate(k, 32768)[0] == pytest.approx(2 * 128 * 128 * 8192 * 1088 / 1.43e-3)


def test_mla_decode_elsewhere_keeps_its_kernel() -> None:
    # H100 reads the latent cache at FlashMLA's published bandwidth, as before
    assert "FlashMLA" in _estimate(_mla_decode(128, 128, 4096), H100).reason
