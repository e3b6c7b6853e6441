"""The kernel-aware estimate: tile and wave quantization by hand, and published kernel
measurements (tests/data/measured-kernels.json) against it and against the roofline."""

import json
import math
import re
from pathlib import Path

import pytest
from conftest import MODELS
from hypothesis import given, settings
from hypothesis import strategies as st

from modelcost.base.dtypes import DType
from modelcost.estimate.estimate import estimate
from modelcost.estimate.gemm_plan import tile_waves
from modelcost.estimate.kernel_rates import LAUNCH_S, library
from modelcost.estimate.measured import DTYPE, check, load_points
from modelcost.ir.graph import Phase, Workload
from modelcost.perfmodel import GemmOp, GroupedGemmOp, SdpaOp
from modelcost.roofline.compile import compile_report
from modelcost.targets.hardware import load_hardware

DATA = Path(__file__).parent / "data" / "measured-kernels.json"
MI355X = load_hardware("mi355x")  # 256 CUs; Gluon a8w8 sustains 3,527 TFLOPS (library.json)


def test_tiles_and_waves_by_hand() -> None:
    # M = N = 4352 with 256×256 tiles: ⌈4352/256⌉² = 17² = 289 tiles; on 256 CUs that is
    # 2 waves, the second 33/256 = 13 % full
    assert tile_waves(4352, 4352, (256, 256), 256) == (289, 2)
    # 4096² fills exactly one wave; a batch of 3 of them, three
    assert tile_waves(4096, 4096, (256, 256), 256) == (256, 1)
    assert tile_waves(4096, 4096, (256, 256), 256, batch=3) == (768, 3)
    # a tall tile over a ragged shape: ⌈1000/128⌉ · ⌈3000/256⌉ = 8 · 12 = 96 tiles, one
    # wave on 132 SMs (rows cut by the tile's height, columns by its width)
    assert tile_waves(1000, 3000, (128, 256), 132) == (96, 1)
    assert tile_waves(3000, 1000, (128, 256), 132) == (96, 1)  # 24 · 4
    op = GemmOp(4352, 4352, 8192, a=DType.fp8_e4m3, b=DType.fp8_e4m3)
    e = estimate(op, op.flops(), op.bytes(), 0.0, MI355X)
    assert "289 tiles in 2 waves on 256 CUs; the last is 13% full" in e.reason
    # each wave is one tile per CU at 3,527/256 TFLOPS a CU, its K loop 128 longer for
    # the pipeline's fill and drain (two 64-deep steps); then the 2 µs launch
    per_wave = 2 * 256 * 256 * (8192 + 128) * 256 / 3527e12
    assert e.time_s == pytest.approx(2 * per_wave + 2e-6, rel=1e-12)


def test_published_kernels_against_the_estimate_and_the_roofline() -> None:
    # 114 GEMM, attention and bandwidth points with their shapes stated: no measurement
    # beats its roofline, and the estimate never claims less time than the roofline. How
    # close the estimate comes is the accuracy gate's (tests/test_accuracy_gate.py), on
    # the 97 out-of-sample points only
    checks = [check(p) for p in load_points(DATA)]
    assert len(checks) == 114
    assert not [c.id for c in checks if c.beaten]
    assert all(c.estimate_s >= c.roofline_s for c in checks)
    assert sum(c.in_sample for c in checks) == 17
    excluded = json.loads(DATA.read_text())["excluded"]
    assert len(excluded) == 15 and all(x["why"] for x in excluded)


def _measured_figure(point: dict) -> float:
    """A point's measurement as the figure it would build: TFLOPS (GEMM at 2·M·N·K,
    attention at the op's FLOPs over its time) or bytes/s."""
    if point["kind"] == "attention":
        dt = DTYPE[point["precision"]]
        op = SdpaOp(point["B"], point["S_q"], point["H_q"], point["S_kv"], point["H_kv"],
                    point["d"], point["d"], causal=point["causal"], act=dt, kv=dt)  # fmt: skip
        flops = op.flops() if point["pass_"] == "fwd" else op.flops_bwd()
        return flops / (point["time_ms"] * 1e-3) / 1e12
    if point["kind"] == "bandwidth":
        return point["bytes_per_s"]
    return point.get("tflops") or point["unique_bytes_per_s"]


def _figure(built: str) -> float:
    """The model's figure a `built` mark names, in the point's unit."""
    where, name = built.split(" ", 1)
    if where == "specs/kernels/library.json":
        return next(k.tflops for k in library() if k.id == name)
    part = where.removeprefix("specs/hardware/").removesuffix(".hw")
    ach = load_hardware(part).achievable
    figure = name.removeprefix("achievable ")
    return ach.memory_bandwidth if figure == "memory_bandwidth" else ach.matrix[figure] / 1e12


def test_in_sample_marks_are_true_and_complete() -> None:
    # a point marked `built` was taken into the figure it names: that figure is its
    # measurement (TFLOPS, or bytes/s), to the published rounding (HipKittens prints times
    # to 0.1 µs: 0.3 %)
    points = load_points(DATA)
    marked = {p["id"]: p for p in points if p.get("built")}
    for p in marked.values():
        for built in p["built"]:
            assert _figure(built) == pytest.approx(_measured_figure(p), rel=3e-3), built
    # every point a library figure's source cites by id is marked as built into it
    for entry in library():
        for cited in map(int, re.findall(r"\(id (\d+)\)", entry.source)):
            if cited in {p["id"] for p in points}:
                assert f"specs/kernels/library.json {entry.id}" in marked[cited]["built"]
    # a part's achievable bandwidth equal to one of its bandwidth points came from it
    for p in points:
        if p["kind"] == "bandwidth":
            bw = load_hardware(p["hardware"]).achievable.memory_bandwidth
            taken = bw is not None and math.isclose(bw, p["bytes_per_s"], rel_tol=1e-3)
            assert taken == (p["id"] in marked), p["id"]


def test_each_fit_gives_back_the_point_it_was_taken_from() -> None:
    # a regression pin on the fits, not accuracy: each in-sample point's estimate error,
    # which is the tile and wave quantization of its own shape on the part (0 where the
    # figure's shape fills whole waves) and the launch. A figure that drifts from its
    # point fails here
    pins = {4: 0.0931, 20: -0.0036, 38: 0.0208, 41: 0.0206, 46: 0.0275, 62: 0.009,
            71: 0.0088, 83: 0.1101, 86: 0.0, 91: 0.0, 133: -0.0358, 134: -0.0102,
            151: -0.0133, 269: 0.0, 274: 0.0, 280: 0.0, 281: 0.0}  # fmt: skip
    got = {c.id: round(c.error, 4) for c in map(check, load_points(DATA)) if c.in_sample}
    assert got == pins


def test_a_report_with_estimates_keeps_the_roofline_and_adds_the_kernels() -> None:
    w = Workload(Phase.prefill, 1, 2048)
    plain = compile_report(MODELS / "llama3-70b-fp8.model", "mi355x", w)
    r = compile_report(MODELS / "llama3-70b-fp8.model", "mi355x", w, estimate="kernels")
    assert r.totals.time_s == plain.totals.time_s  # the roofline is untouched
    assert plain.totals.estimate_s is None and plain.ops[0].estimate_s is None
    for o in r.ops:
        assert o.estimate_s >= o.time_s and o.efficiency == o.time_s / o.estimate_s
        assert o.total_estimate_s == o.count * o.estimate_s and o.estimate_reason
    # the step is its ops' estimates end to end (one device: no overlap, no bubble)
    assert r.totals.estimate_s == sum(o.total_estimate_s for o in r.ops)
    assert r.totals.efficiency == r.totals.time_s / r.totals.estimate_s
    q = next(o for o in r.ops if o.name == "layers.0.attn.q_proj")
    assert "256 tiles in 1 wave on 256 CUs" in q.estimate_reason
    assert "Triton Gluon a8w8" in q.estimate_reason


def test_the_diff_of_two_estimated_reports_has_the_estimate_row() -> None:
    from conftest import run_cli

    r = run_cli("diff", str(MODELS / "llama3-70b.model"), str(MODELS / "llama3-70b-fp8.model"),
                "--hw", "mi355x", "--estimate", "kernels", "--format", "json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    (phase,) = json.loads(r.stdout)["phases"]
    keys = [c["key"] for c in phase["totals"]]
    assert keys[-1] == "estimate_s"


def test_a_narrow_prefill_projection_takes_smaller_tiles_and_splits_k() -> None:
    # Llama 3 70B's k/v projection at 2,048 tokens on MI355X, bf16: M=2048, N=1024,
    # K=8192. One 256×256 tile per CU gave 32 tiles on 256 CUs, 12.9× the roofline.
    # hipBLASLt's tile set (library.json `tile_sets`) has 128×128: 16·8 = 128 tiles;
    # stream-K (tritonBLAS's rule) splits K 2 ways (256 ≤ 256 CUs, 64 steps of 64 each)
    from modelcost.estimate.measured import _timed

    op = GemmOp(2048, 1024, 8192)
    roof, est, why = _timed(op, MI355X)
    # the reason names the kernel the report's kernel column links (kernels.serve)
    assert why.startswith(
        "a16w16 v9 (4-wave, 256×256×64) (the kernel column), estimated as "
        "128×128 tiles, K split 2 ways: 256 tiles in 1 wave on 256 CUs"
    )
    # the rate: AITER's tuned time at the published shape nearest in M (2048×8192×8192 in
    # 192.94 µs, llama70B_bf16_tuned_gemm.csv) per tile, that shape's waves taken out
    from modelcost.estimate.kernel_rates import library, per_tile_rate

    k = next(x for x in library() if x.id == "aiter-tgemm-bf16-mi355x-m2048")
    rate = per_tile_rate(k, MI355X)
    assert _timed(GemmOp(2048, 8192, 8192), MI355X)[1] == pytest.approx(192.94e-6, rel=1e-5)
    assert "AITER tuned_gemm (asm 256x256) sustains 1,425 TFLOPS at 2048×8192×8192" in why
    per_tile = 2 * 128 * 128 * (4096 + 128) * 256 / rate  # the K loop's 128-deep fill
    reduce = 2 * 2 * 2048 * 1024 * 4 / 6.442e12  # fp32 partials written and read back
    assert est == pytest.approx(per_tile + reduce + 2e-6, rel=1e-12)  # and the launch
    assert est / roof < 2.4


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 16384), st.integers(1, 16384), st.integers(1, 16384))
def test_the_chosen_plan_is_never_slower_than_any_single_tile_of_its_set(M, N, K) -> None:
    # the rule: the fewest waves × tile time over the set; each tile alone is a set of one
    from modelcost.estimate.kernel_rates import TileSet, plan, tile_sets

    ts = tile_sets()["hipblaslt"]
    best = plan((M,), N, K, 1590.8e12, MI355X, ts)
    for tile in ts.tiles:
        one = plan((M,), N, K, 1590.8e12, MI355X, TileSet(tiles=(tile,), stream_k=True))
        assert best.time_s <= one.time_s
    assert (best.tm, best.tn) in [(min(t[0], max(16, 1 << (M - 1).bit_length())), t[1])
                                  for t in ts.tiles]  # fmt: skip


@pytest.mark.parametrize(("part", "sibling"), [("h200", "h100"), ("mi350x", "mi355x")])
def test_a_part_without_a_figure_borrows_its_siblings_efficiency(part, sibling) -> None:
    # H200 = H100 compute: a compute-bound bf16 GEMM takes the same time on both (the
    # H100's MAMF 794.5 of 989.4 TFLOPS); MI350X: MI355X's AITER 1590.8 of 2516.6 TFLOPS,
    # times its own 2306.9 peak
    from modelcost.estimate.measured import _timed

    op = GemmOp(8192, 8192, 8192)
    mine, theirs = load_hardware(part), load_hardware(sibling)
    _, est, why = _timed(op, mine)
    _, ref, _ = _timed(op, theirs)
    scale = mine.matrix["bf16"] / theirs.matrix["bf16"]
    # (to 0.2 %: 2,048 tiles on 132 SMs leave a partial wave that stream-K spreads over
    # every SM, and its partial tiles' fix-up moves at each part's own bandwidth)
    assert est - LAUNCH_S == pytest.approx((ref - LAUNCH_S) / scale, rel=2e-3)
    assert f"no published bf16 figure on {part}: on the {sibling}" in why
    assert "compute" in why or "silicon" in why


def test_a_parts_own_figure_comes_before_its_siblings_and_fills_what_it_lacks() -> None:
    from modelcost.estimate.kernel_rates import matrix_rate

    # MI325X fp8: its own hipBLASLt 1,519 TFLOPS (AMD ROCm blog, Measuring Max-Achievable
    # FLOPs Part 2, the table) before the MI300X's kernel efficiency, and not its roof
    # (1,527.7, the same blog's footnote 4)
    fp8 = GemmOp(8192, 8192, 8192, a=DType.fp8_e4m3, b=DType.fp8_e4m3)
    r = matrix_rate("gemm", fp8, load_hardware("mi325x"))
    assert r.flops == 1519e12 and r.kernel is not None
    assert r.kernel.id == "hipblaslt-maf-fp8-mi325x"
    assert r.source == "hipBLASLt (hipblaslt-bench) sustains 1,519 TFLOPS"
    # B200 bf16: no library figure of its own, the GB200's is none either: its best
    # published figure, the achievable roof (ml-engineering MAMF, 1,745 TFLOPS)
    bf16 = GemmOp(8192, 8192, 8192)
    r = matrix_rate("gemm", bf16, load_hardware("b200"))
    assert r.flops == 1745e12 and r.kernel is None
    assert r.source == "no published kernel for bf16 on b200: the best published 1,745 TFLOPS"
    # MI350X fp8: no figure of its own; the MI355X's Gluon a8w8 3,527 of its 5,033.2 dense
    # fp8 TFLOPS (gfx950-gluon-tutorials) times the MI350X's own 4,613.7
    r = matrix_rate("gemm", fp8, load_hardware("mi350x"))
    assert r.flops == pytest.approx(3527 / 5033.2 * 4613.7e12, rel=1e-4)
    assert "no published fp8 figure on mi350x: on the mi355x" in r.source
    # B200 fp8: figures published at several token counts (vLLM's SM100 CUTLASS tables)
    # come before its shape-less best (ml-engineering's MAMF 3,432.5 TFLOPS); an 8192³
    # GEMM takes the one measured nearest in M, the GB200's (the same silicon) cuBLASLt
    # 8192³ figure (Azure ND GB200 v6, 2,876.6 TFLOPS), reproduced at that shape
    r = matrix_rate("gemm", fp8, load_hardware("b200"))
    assert r.kernel is not None and r.kernel.id == "cublaslt-fp8-gb200"
    assert (
        "at 8192×8192×8192, the published token count serving 8,192 or fewer (the gb200's, × 0.9"
        in r.source
    )


@pytest.mark.parametrize(
    ("part", "bandwidth", "note"),
    [
        ("h100", 3.18e12, ""),  # its own: Azure AI benchmarking guide (ND H100 v5), dot
        # B200: the GB200's measured 7.35 of 8 TB/s (the same HBM3E), times its own 8 TB/s
        ("b200", 7.35 / 8.0 * 8.0e12, " (the gb200's 92% of the datasheet: the same memory)"),
        # MI350X: the MI355X's 6.442 of 8 TB/s (gfx950-gluon-tutorials' skinny GEMM)
        ("mi350x", 6.442 / 8.0 * 8.0e12, " (the mi355x's 81% of the datasheet: the same memory)"),
        # MI325X: the MI300X's 4.28 of 5.3 TB/s (Azure MI300X guide, Mul) on its 6 TB/s
        ("mi325x", 4.28 / 5.3 * 6.0e12, " (the mi300x's 81% of the datasheet: the same memory)"),
    ],
)
def test_the_sustained_bandwidth_is_the_parts_own_else_its_memory_siblings(
    part, bandwidth, note
) -> None:
    from modelcost.estimate.kernel_rates import sustained_bandwidth

    bw = sustained_bandwidth(load_hardware(part))
    assert bw.bytes_s == pytest.approx(bandwidth, rel=1e-12)
    assert bw.note == note
    # a memory-bound op moves its bytes at it: a 2 GB fp32 copy, plus one launch
    from modelcost.perfmodel import UnaryOp

    op = UnaryOp(tensor=(250_000_000,), x=DType.fp32, out=DType.fp32)
    assert op.bytes() == 2_000_000_000
    e = estimate(op, op.flops(), op.bytes(), 0.0, load_hardware(part))
    assert e.time_s == pytest.approx(op.bytes() / bandwidth + 2e-6, rel=1e-12)


def test_a_part_with_no_published_bandwidth_and_no_sibling_reads_its_datasheet(tmp_path) -> None:
    from modelcost.estimate.kernel_rates import sustained_bandwidth

    text = (Path(__file__).parent.parent / "specs/hardware/mi355x.hw").read_text()
    text = text.replace("hardware mi355x", "hardware mine").replace(
        "    memory_bandwidth = 6.442 TB/s\n", ""
    )
    (tmp_path / "mine.hw").write_text(text)
    bw = sustained_bandwidth(load_hardware(str(tmp_path / "mine.hw")))
    assert bw.bytes_s == 8.0e12  # the datasheet's 8 TB/s, said so
    assert bw.note == " (the datasheet: none published)"


def test_moe_rows_are_skewed_by_the_routing_imbalance_and_padded_per_expert() -> None:
    from modelcost.estimate.gemm_plan import _expert_rows
    from modelcost.estimate.kernel_rates import moe_imbalance

    imbalance, source = moe_imbalance()
    assert imbalance == 2.56 and "TensorRT-LLM" in source  # DeepSeek-R1 without EPLB
    # 8,192 rows over 128 experts: a mean of 64; the hottest ⌈2.56 · 64⌉ = 164, the
    # other 127 share 8,028 = 127 · 63 + 27: 27 experts get 64, 100 get 63
    rows = _expert_rows(8192, 128, imbalance)
    assert rows == (164,) + (64,) * 27 + (63,) * 100 and sum(rows) == 8192
    assert _expert_rows(10, 1, imbalance) == (10,)
    # 4 rows, 8 experts: a mean of 0.5, the hottest ⌈1.28⌉ = 2, two others 1 each
    assert _expert_rows(4, 8, imbalance) == (2, 1, 1)


def test_every_estimated_pass_has_a_reason_attention_backward_too() -> None:
    # training: each op's backward pass is estimated; before, its reason was dropped
    r = compile_report(MODELS / "llama3-70b.model", "mi355x", Workload(Phase.train, 1, 2048),
                       estimate="kernels")  # fmt: skip
    backs = [o for o in r.ops if o.backward is not None and o.backward.estimate_s is not None]
    assert backs and all(o.backward.estimate_reason for o in backs)
    attn = next(o for o in backs if o.kind == "SDPA")
    # AITER's asm backward published at S=2048, B=8, 64/8 heads, causal (PR #1270)
    assert "AITER asm flash attention backward (bwd_v3, a16) sustains 818 TFLOPS at B=8, " \
           "S=2048" in attn.backward.estimate_reason  # fmt: skip


def test_stream_k_spreads_a_partial_last_wave_over_every_cu() -> None:
    # Stream-K's hybrid (Osama et al., PPoPP 2023): 200 tiles of 128×128 on 132 CUs are
    # one full wave and 68 tiles streamed over all 132 CUs (68/132 of a K loop each),
    # plus every CU's fp32 partial tile written and read back: never the 2 whole waves
    # a tile-per-CU schedule takes
    from modelcost.estimate.kernel_rates import PARTIAL_BYTES, TileSet, plan

    hw = load_hardware("h100")
    rate = 989.4e12
    one = TileSet(tiles=((128, 128),), stream_k=True)
    p = plan((128 * 10,), 128 * 20, 4096, rate, hw, one)
    per_tile = 2 * 128 * 128 * (4096 + 128) * 132 / rate  # the K loop's 128-deep fill
    streamed = 2 * 128 * 128 * (4096 * 68 / 132 + 128) * 132 / rate
    fixup = 2 * 132 * 128 * 128 * PARTIAL_BYTES / hw.bandwidth("achievable")
    assert p.time_s == pytest.approx(per_tile + streamed + fixup, rel=1e-12)
    plain = plan((128 * 10,), 128 * 20, 4096, rate, hw, TileSet(tiles=((128, 128),),
                                                                stream_k=False))  # fmt: skip
    assert plain.time_s == pytest.approx(2 * per_tile, rel=1e-12)


# B200 NVFP4 GEMMs published at several token counts (library.json `shape`): flashinfer
# issue #1732 (M=1, N=K=8192: 8192²·0.5 B at 1.78 TB/s = 18.85 µs), flashinfer PR #1979
# (1024×7168×4608: 3,370.4 TFLOPS, 0.020 ms), pytorch/ao PR #2427 (6144³: 5.50e15 FLOP/s)
B200_FP4 = [((1, 8192, 8192), 7.12), ((1024, 7168, 4608), 3370.4), ((6144, 6144, 6144), 5500)]


def _fp4(M: int, N: int, K: int) -> GemmOp:
    return GemmOp(M, N, K, a=DType.nvfp4, b=DType.nvfp4, out=DType.bf16, bias_dtype=DType.bf16)


@pytest.mark.parametrize(("shape", "tflops"), B200_FP4)
def test_a_shaped_figure_is_reproduced_at_its_own_shape(shape: tuple, tflops: float) -> None:
    # the per-tile rate takes the shape's tile and wave quantization out, so the estimate
    # (plan + its launch) gives back the published time: 2·M·N·K / TFLOPS
    M, N, K = shape
    c = check({"id": 0, "kind": "gemm", "hardware": "b200", "precision": "fp4",
               "M": M, "N": N, "K": K, "tflops": tflops})  # fmt: skip
    assert c.estimate_s == pytest.approx(2 * M * N * K / (tflops * 1e12), rel=1e-9)
    assert f"at {M}×{N}×{K}, the published token count serving {M:,} or fewer" in c.reason


def test_a_gemm_takes_the_figure_published_for_its_bucket_of_tokens() -> None:
    from modelcost.estimate.kernel_rates import library, matrix_rate, per_tile_rate

    b200, gb200 = load_hardware("b200"), load_hardware("gb200")

    def source(M: int) -> str:
        return matrix_rate("gemm", _fp4(M, 8192, 8192), b200).source

    # the smallest published M at or above the GEMM's (a tuned GEMM pads M up to its
    # bucket): 1 → M=1; 2 … 1,024 → M=1,024; 1,025 … 6,144 → M=6,144; past it, the
    # GB200's 16,384 (the same silicon)
    assert "at 1×8192×8192" in source(1) and "at 1024×7168×4608" in source(2)
    assert "at 1024×7168×4608" in source(1024) and "at 6144×6144×6144" in source(1025)
    assert "at 16384×16384×16384" in source(6145)
    # a sibling's figure is scaled by the two datasheet peaks, as a borrowed efficiency:
    # the GB200's cuBLASLt per-tile rate × 9,000 / 10,000 TFLOPS (B200 / GB200 dense FP4)
    cublas = next(k for k in library() if k.id == "cublaslt-fp4-gb200")
    r = matrix_rate("gemm", _fp4(8192, 8192, 8192), b200)
    assert r.flops == pytest.approx(per_tile_rate(cublas, gb200) * 9000 / 10000, rel=1e-12)
    # the other way: a decode step's 377 tokens on the GB200 take the B200's M=1,024
    # figure × 10,000 / 9,000, said so
    r = matrix_rate("gemm", _fp4(377, 28672, 8192), gb200)
    flashinfer = next(k for k in library() if k.id == "flashinfer-cutlass-fp4-b200-m1024")
    assert r.flops == pytest.approx(per_tile_rate(flashinfer, b200) * 10000 / 9000, rel=1e-12)
    assert "(the b200's, × 1.11 for this part's peak:" in r.source
    big = matrix_rate("gemm", _fp4(16384, 16384, 16384), gb200)
    assert big.kernel is not None and big.kernel.id == "cublaslt-fp4-gb200"


def test_more_tokens_never_take_less_time_where_figures_come_by_token_count() -> None:
    # each bucket's time is floored by every smaller bucket's configuration (a GEMM of
    # more rows never runs faster than one of fewer would): time is non-decreasing in M
    from modelcost.estimate.measured import _timed

    for part, dt in (("b200", DType.nvfp4), ("gb200", DType.fp8_e4m3),
                     ("mi300x", DType.fp8_e4m3), ("mi355x", DType.bf16),
                     ("mi350x", DType.bf16)):  # fmt: skip
        hw, prev = load_hardware(part), 0.0
        for M in [*range(1, 300), *range(300, 20000, 97)]:
            op = GemmOp(M, 8192, 8192, a=dt, b=dt, out=DType.bf16, bias_dtype=DType.bf16)
            t = _timed(op, hw)[1]
            assert t >= prev * (1 - 1e-12), (part, M)
            prev = t


def test_longer_attention_never_takes_less_time_where_figures_come_by_length() -> None:
    from modelcost.estimate.measured import _timed
    from modelcost.perfmodel import SdpaOp

    for causal in (False, True):
        for pass_ in ("fwd", "bwd"):
            prev = 0.0
            for S in range(65, 20000, 101):
                t = _timed(SdpaOp(8, S, 64, S, 8, 128, 128, causal=causal), MI355X, pass_)[1]
                assert t >= prev, (causal, pass_, S)
                prev = t


def test_every_figure_published_by_shape_is_reproduced_there() -> None:
    # every library.json entry with a `shape`, on its own part: its per-tile (per-block)
    # rate gives back its published time (2·M·N·K / TFLOPS for a GEMM; the source's FLOP
    # count / TFLOPS for attention), and so does the estimate, unless a smaller bucket's
    # configuration from another source is slower on these weights (a GEMM of more rows
    # never runs faster): then the estimate is that, said so, never below the figure
    from modelcost.estimate.attention_rates import published_flops
    from modelcost.estimate.kernel_rates import library, per_tile_rate, plan, tiles_for
    from modelcost.perfmodel import SdpaOp

    shaped = [k for k in library() if k.shape is not None]
    # B200 fp4 (3) and fp8 (6), MI300X fp8 (11), MI355X bf16 (13), the GB200's own fp4
    # and fp8 (2), MI355X flash attention (5 lengths × 2 passes × 2 masks), H100 flash
    # attention forward and backward (5 lengths × 2 passes × 2 masks: ThunderKittens'
    # chart of FlashAttention-3), MI300X's AITER asm attention (5 × 2 × 2), B200's cuDNN
    # causal attention (6 lengths × 2 passes), GB200's cuDNN attention (5 × 2 × 2)
    assert len(shaped) == 3 + 6 + 11 + 13 + 2 + 20 + 20 + 20 + 12 + 20
    for k in shaped:
        hw = load_hardware(k.part)
        if k.kind == "gemm":
            M, N, K = k.shape
            dt = {"fp4": DType.nvfp4, "fp8": DType.fp8_e4m3, "bf16": DType.bf16}[k.precision]
            op = GemmOp(M, N, K, a=dt, b=dt, out=DType.bf16, bias_dtype=DType.bf16)
            e = estimate(op, op.flops(), op.bytes(), 0.0, hw)
            want = 2 * M * N * K / (k.tflops * 1e12)
            p = plan((M,), N, K, per_tile_rate(k, hw), hw, tiles_for(hw, k), bucket=M)
            assert p.time_s + LAUNCH_S == pytest.approx(want, rel=1e-9), k.id
            if "bucket below" in e.reason:
                assert e.time_s > want, k.id
                continue
        else:
            S, B, H_Q, H_KV, causal = k.shape
            op = SdpaOp(B, S, H_Q, S, H_KV, 128, 128, causal=bool(causal))
            flops, nbytes = (op.flops(), op.bytes()) if k.pass_ == "fwd" else (
                op.flops_bwd(), op.bytes_bwd())  # fmt: skip
            e = estimate(op, flops, nbytes, 0.0, hw, k.pass_)
            want = published_flops(k) / (k.tflops * 1e12)
        assert e.time_s == pytest.approx(want, rel=1e-9), k.id


def test_mi300x_fp8_gemms_at_aiters_tuned_times_from_16_tokens_up() -> None:
    from modelcost.estimate.kernel_rates import matrix_rate

    # ROCm/aiter PR #1092's tuned a8w8 table (cu_num 304: MI300X), N=7168, K=8192:
    # M=1024 in 152.5955 µs, M=256 in 59.3987 µs (2·M·N·K / time: 788.1 and 506.2
    # TFLOPS), each reproduced at its own shape
    for M, us in ((1024, 152.5955), (256, 59.3987)):
        tflops = 2 * M * 7168 * 8192 / us / 1e6
        c = check({"id": 0, "kind": "gemm", "hardware": "mi300x", "precision": "fp8",
                   "M": M, "N": 7168, "K": 8192, "tflops": tflops})  # fmt: skip
        # the catalog keeps the derived TFLOPS to 0.01: the time back within 1e-5
        assert c.estimate_s == pytest.approx(us * 1e-6, rel=1e-5)
        assert "AITER CK gemm_a8w8 (rowwise)" in c.reason
    # below its smallest row (M=16) the part's hipBLASLt figure: vLLM sends a one-row FP8
    # GEMM to its skinny kernel, not to this table's
    mi300x = load_hardware("mi300x")
    one = GemmOp(1, 7168, 8192, a=DType.fp8_e4m3, b=DType.fp8_e4m3)
    assert matrix_rate("gemm", one, mi300x).flops == 1159.54e12
    sixteen = GemmOp(16, 7168, 8192, a=DType.fp8_e4m3, b=DType.fp8_e4m3)
    assert "at 16×7168×8192" in matrix_rate("gemm", sixteen, mi300x).source


def test_one_figure_a_token_count_the_parts_own_then_the_faster(monkeypatch) -> None:
    from modelcost.estimate import kernel_rates as e

    def k(id_: str, part: str, tflops: float, m: int) -> e.LibraryKernel:
        return e.LibraryKernel(id=id_, kind="gemm", part=part, precision="fp4", library=id_,
                               tile=(128, 128), tflops=tflops, measured="", source="",
                               shape=(m, 4096, 4096))  # fmt: skip

    kernels = (k("slow", "b200", 100, 64), k("fast", "b200", 200, 64),
               k("theirs", "gb200", 900, 64), k("theirs-big", "gb200", 900, 4096))  # fmt: skip
    monkeypatch.setattr(e, "library", lambda: kernels)
    e.shaped.cache_clear()
    try:
        # the B200's own at M=64 (the faster of its two), the GB200's at 4096 it lacks
        assert [x.id for x in e.shaped("gemm", "b200", "fp4")] == ["fast", "theirs-big"]
    finally:
        e.shaped.cache_clear()


@pytest.mark.parametrize(
    ("pass_", "causal", "tflops"),
    [("fwd", False, 979.9), ("fwd", True, 626.6), ("bwd", False, 883.3), ("bwd", True, 576.3)],
)
def test_a_flash_figure_is_reproduced_at_its_own_length(pass_, causal, tflops) -> None:
    # aiter op_tests/cpp/mha/README.md (PR #1270), MI355X, B=8, S=1024, 64/8 heads, d=128:
    # the per-block rate takes the grid's waves and key-loop fill out, so the estimate
    # gives back the published time, 4·B·H_Q·S²·d (10· backward, half causal) / TFLOPS
    from modelcost.perfmodel import SdpaOp

    op = SdpaOp(8, 1024, 64, 1024, 8, 128, 128, causal=causal)
    flops, nbytes = (op.flops(), op.bytes()) if pass_ == "fwd" else (op.flops_bwd(), op.bytes_bwd())
    e = estimate(op, flops, nbytes, 0.0, MI355X, pass_)
    published = (4 if pass_ == "fwd" else 10) * 8 * 64 * 1024**2 * 128 * (0.5 if causal else 1)
    assert e.time_s == pytest.approx(published / (tflops * 1e12), rel=1e-9)
    assert "S=1024, 64/8 heads" in e.reason


def test_flash_attention_away_from_its_figures_shape_by_hand_and_against_hipkittens() -> None:
    # Out of sample: HipKittens' measurement of AITER's forward on MI355X (point 103:
    # B=15, S=16384, 16/16 heads of 128, causal, 13.2213 ms), past the longest length AITER
    # publishes (PR #1270: S=10240, B=8, 64/8 heads, causal, 1,313.7 TFLOPS). By hand:
    # that figure's time, 4·B·H·S²·d / 2 FLOPs at 1,313.7 TFLOPS less the 2 µs launch, over
    # its grid (8·64·⌈10240/128⌉ = 40,960 blocks of 128 rows: 160 whole waves on 256 CUs)
    # and its useful key-loop share: 5,120.5 keys a query row, each block's loop 256 keys
    # longer for its prologue and epilogue, and the causal diagonal's 64 keys computed whole
    fig_flops = 4 * 8 * 64 * 10240**2 * 128 * 0.5
    fig_time = fig_flops / 1313.7e12 - 2e-6
    keys = 10241 / 2
    fig_loop = keys / (keys + 256) * keys / (keys + 64)
    ours = 4 * 8 * 64 * (10240 * 10241 // 2) * 128  # the model's causal pairs, S(S+1)/2
    per_block = ours / (fig_time * fig_loop)
    # the point: 15·16·128 = 30,720 blocks, 120 whole waves; 8,192.5 keys a query row
    keys = 16385 / 2
    loop = keys / (keys + 256) * keys / (keys + 64)
    flops = 4 * 15 * 16 * (16384 * 16385 // 2) * 128
    by_hand = flops / (per_block * loop) + 2e-6
    point = next(p for p in load_points(DATA) if p["id"] == 103)
    c = check(point)
    assert not c.in_sample
    assert c.estimate_s == pytest.approx(by_hand, rel=1e-12)
    # against the measurement: 7.2 % fast
    assert c.error == pytest.approx(by_hand / 13.2213e-3 - 1, rel=1e-12)
    assert round(c.error, 4) == -0.0718


def test_cublaslt_fp8_away_from_its_figures_shape_by_hand_and_against_azure() -> None:
    # Out of sample: Azure's ND H100 v5 table measures cuBLASLt FP8 at several shapes; the
    # estimate takes one of them (16384³, 1,377.3 TFLOPS: point 62, in-sample) and must
    # come near the others through the tile and wave model alone. Each tile on one of the
    # 132 SMs at 1,377.3/132 TFLOPS, its K loop 128 deeper for the pipeline's fill, then
    # the 2 µs launch. This pins the figure's scale, the fill and the launch together.
    rate = 1377.3e12
    points = {p["id"]: p for p in load_points(DATA)}

    def tile(tm: int, tn: int, k: float) -> float:
        return 2 * tm * tn * (k + 128) * 132 / rate

    # point 59, 2048³ (1,011.3 TFLOPS): 16 × 8 = 128 tiles of 128×256, one wave (too few
    # to split K: 2 × 128 > 132 SMs)
    by_hand = tile(128, 256, 2048) + 2e-6
    c = check(points[59])
    assert c.estimate_s == pytest.approx(by_hand, rel=1e-12)
    assert round(c.error, 4) == -0.0777  # 15.67 µs against the published 16.99 µs
    # point 61, 8192³ (1,290.1 TFLOPS): 64 × 64 = 4,096 tiles of 128×128 are 31 whole
    # waves and 4 tiles streamed over the 132 SMs (4/132 of a K loop each, Stream-K), every
    # SM's fp32 partial tile written and read back at the best published 3.18 TB/s
    fixup = 2 * 132 * 128 * 128 * 4 / 3.18e12
    by_hand = 31 * tile(128, 128, 8192) + tile(128, 128, 8192 * 4 / 132) + fixup + 2e-6
    c = check(points[61])
    assert c.estimate_s == pytest.approx(by_hand, rel=1e-12)
    assert round(c.error, 4) == -0.0395  # 0.818 ms against the published 0.852 ms
    # the 128×256 tiles' schedule (2,048 tiles: 15 waves and 68 streamed) is the slower
    fixup_wide = 2 * 132 * 128 * 256 * 4 / 3.18e12
    wide = 15 * tile(128, 256, 8192) + tile(128, 256, 8192 * 68 / 132) + fixup_wide
    assert wide + 2e-6 > by_hand


def _sm90_fp8_gemm_by_hand(M: int, N: int, K: int, batch: int = 1) -> float:
    """A plain GEMM's time on H100 at cuBLASLt FP8's 1,377.3 TFLOPS by hand: the faster of
    CUTLASS SM90's tiles (128×256, 256×128, 128×128; the wider first on a tie), each
    either in whole waves of a tile per SM or, Stream-K, the full waves then the last
    wave's tiles streamed over all 132 SMs plus every SM's fp32 partial tile written and
    read back at 3.18 TB/s; every K loop 128 deeper for the pipeline's fill."""

    def one(tm: int, tn: int, k: float) -> float:
        return 2 * tm * tn * (k + 128) * 132 / 1377.3e12

    best = math.inf
    for tm, tn in ((128, 256), (256, 128), (128, 128)):
        tiles = batch * -(-M // tm) * -(-N // tn)
        full, rest = divmod(tiles, 132)
        time = -(-tiles // 132) * one(tm, tn, K)
        if rest and full:
            fixup = 2 * 132 * tm * tn * 4 / 3.18e12
            time = min(time, full * one(tm, tn, K) + one(tm, tn, K * rest / 132) + fixup)
        best = min(best, time)
    return best


def test_a_gemms_backward_is_dgrad_and_wgrad_by_hand() -> None:
    # Llama 3 70B's up projection at tp 4 in FP8 training, 4,096 tokens: X 4096×8192,
    # W 8192×7168. Its backward runs as two ordinary GEMMs at the forward's published
    # rate (cuBLAS has no backward figure): dX = dY·Wᵀ, 4,096 rows of 8,192 outputs, 7,168
    # deep; dW = Xᵀ·dY, 7,168 × 8,192 outputs, 4,096 deep (the tokens); each its own
    # launch, then the estimate's usual one
    op = GemmOp(4096, 7168, 8192, a=DType.fp8_e4m3, b=DType.fp8_e4m3)
    h100 = load_hardware("h100")
    e = estimate(op, op.flops_bwd(), op.bytes_bwd(), 0.0, h100, "bwd")
    dx = _sm90_fp8_gemm_by_hand(4096, 8192, 7168)
    dw = _sm90_fp8_gemm_by_hand(7168, 8192, 4096)
    assert e.time_s == pytest.approx(dx + dw + 2e-6 + 2e-6, rel=1e-12)
    assert e.reason.startswith(f"dX {dx * 1e6:,.1f} µs (")
    assert f"and dW {dw * 1e6:,.1f} µs (" in e.reason
    # the forward by the same hand: 4,096 rows of 7,168 outputs, 8,192 deep
    fwd = estimate(op, op.flops(), op.bytes(), 0.0, h100)
    assert fwd.time_s == pytest.approx(_sm90_fp8_gemm_by_hand(4096, 7168, 8192) + 2e-6,
                                       rel=1e-12)  # fmt: skip


def test_a_grouped_gemms_backward_is_the_experts_dgrad_and_wgrad_by_hand() -> None:
    # 8,192 routed rows through 8 experts of 7,168 → 2,048 in FP8, each expert at the mean
    # load (imbalance 1: 1,024 rows each). dX: the experts' rows back through their
    # weights, 1,024 × 7,168 outputs each, 2,048 deep (their tiles share the waves: 8 ×
    # 8 × 28 of 128×256); dW: each expert's 7,168 × 2,048 weights, its 1,024 rows deep
    op = GroupedGemmOp(8192, 7168, 2048, 8, x=DType.fp8_e4m3, w=DType.fp8_e4m3)
    h100 = load_hardware("h100")
    e = estimate(op, op.flops_bwd(), op.bytes_bwd(), 0.0, h100, "bwd", imbalance=1.0)
    dx = _sm90_fp8_gemm_by_hand(1024, 7168, 2048, batch=8)
    dw = _sm90_fp8_gemm_by_hand(7168, 2048, 1024, batch=8)
    assert e.time_s == pytest.approx(dx + dw + 2e-6 + 2e-6, rel=1e-12)
    assert "and 8 experts' dW, 1,024 rows deep each" in e.reason


def test_the_estimate_is_never_faster_than_the_roofline() -> None:
    # the kernel model can come out below the roofline (here a 1-second roofline beside a
    # 1024³ GEMM's microseconds): the estimate then takes the roofline, plus the launch
    op = GemmOp(1024, 1024, 1024, a=DType.fp8_e4m3, b=DType.fp8_e4m3)
    e = estimate(op, op.flops(), op.bytes(), 1.0, load_hardware("h100"))
    assert e.time_s == 1.0 + 2e-6
    assert e.reason.endswith("; no faster than its roofline; +2 µs launch")


@pytest.mark.parametrize(
    ("M", "G", "imbalance", "rows"),
    [
        (100, 1, 2.56, (100,)),  # one expert takes every row
        (100, 2, 1.25, (63, 37)),  # the hottest ⌈1.25 · 50⌉, the other the rest
        (1, 8, 1.5, (1,)),  # one row: one expert hit, one row
        (10, 4, 2.0, (5, 2, 2, 1)),  # ⌈2 · 2.5⌉ = 5, then 5 rows over 3 as evenly as whole rows go
    ],
)
def test_the_hottest_expert_takes_the_imbalance_the_rest_share_evenly(M, G, imbalance, rows):
    from modelcost.estimate.gemm_plan import _expert_rows

    assert _expert_rows(M, G, imbalance) == rows


def test_a_gemm_just_above_a_published_bucket_is_no_faster_than_the_bucket_below() -> None:
    # B200 FP8 GEMM figures come by token count (vLLM's SM100 CUTLASS tables: 1, 64, 256,
    # 512, 1,024 and 16,384 rows). 65 and 100 rows take the 256-row bucket's configuration
    # (its 128-row tiles and per-tile rate), which alone would run them faster than 64
    # rows run in theirs; more rows never run faster, so they are held at the 64-row
    # bucket's time, and the reason says so
    b200 = load_hardware("b200")

    def at(M: int) -> object:
        op = GemmOp(M, 8192, 8192, a=DType.fp8_e4m3, b=DType.fp8_e4m3)
        return estimate(op, op.flops(), op.bytes(), 0.0, b200)

    t64 = at(64).time_s
    for M in (65, 100):
        e = at(M)
        assert e.time_s == t64
        assert e.reason.startswith("128×128 tiles, K split 2 ways")
        assert "the published token count serving 256 or fewer" in e.reason
        assert "; no faster than the 64-token bucket below; +2 µs launch" in e.reason
    # at the bucket's own 256 rows its configuration is slower than 64 rows': no floor
    e = at(256)
    assert e.time_s > t64 and "bucket below" not in e.reason
