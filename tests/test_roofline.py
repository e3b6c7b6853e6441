"""Roofline arithmetic, TraceLens's roofline rows, the seed notebook, per-token figures
and the memory footprint."""

import json
import math
from pathlib import Path

import pytest
from conftest import MODELS

from modelcost import load_spec
from modelcost.ir.graph import Phase, Workload
from modelcost.perfmodel import TRACELENS, GemmOp
from modelcost.roofline.compile import compile_report
from modelcost.roofline.timing import time_op
from modelcost.targets.hardware import load_hardware, parse_hardware

VECTORS = json.loads((Path(__file__).parent / "data" / "tracelens-vectors.json").read_text())


def tracelens_arch(name: str, bf16_tflops: float, gbps: float):
    """TraceLens's arch JSON (max_achievable_tflops, mem_bw_gbps) as a hardware target."""
    return parse_hardware(
        f"""hardware {name} {{
          title = "{name}"
          vendor = "AMD"
          arch = "gfx942"
          memory = 192 GB
          memory_bandwidth = {gbps} GB/s
          scaleup_bandwidth = 896 GB/s
          compute_units = 304
          clock = 2100 MHz
          matrix {{ bf16 = {bf16_tflops} TFLOPS }}
          vector {{ fp32 = 81 TFLOPS }}
        }}"""
    )


ARCHS = {"MI300X": (708, 5300), "MI325X": (843, 6000)}
ROWS = [v for v in VECTORS if v["func"].startswith("TreePerfAnalyzer.compute_perf_metrics")]


def _gemm_from_event(args: dict) -> GemmOp:
    dims = args["Input Dims"]
    if args["name"] == "aten::addmm":  # (bias, mat1 (M, K), mat2 (K, N))
        (M, K), (_, N) = dims[1], dims[2]
        return GemmOp(M, N, K, bias=True)
    (M, K), (_, N) = dims[0], dims[1]
    return GemmOp(M, N, K)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r['args']['name']}-{r['args']['arch']}")
def test_tracelens_roofline_rows(row: dict) -> None:
    op = _gemm_from_event(row["args"])
    hw = tracelens_arch(row["args"]["arch"], *ARCHS[row["args"]["arch"]])
    t = time_op(op.cost(TRACELENS), op, hw, "datasheet", "datasheet")
    want = row["value"]
    assert op.tracelens_flops() / 1e9 == want["GFLOPS"]
    assert op.tracelens_bytes() / 2**20 == want["Data Moved (MB)"]  # TraceLens's "MB" is MiB
    assert op.tracelens_flops() / op.tracelens_bytes() == want["FLOPS/Byte"]
    assert t.time_s * 1e6 == pytest.approx(want["Roofline Time (µs)"], rel=1e-15)
    bound = "COMPUTE_BOUND" if t.compute_s >= t.memory_s else "MEMORY_BOUND"
    assert bound == want["Roofline Bound"]


def test_seed_notebook_is_reproduced_to_the_microsecond() -> None:
    # TraceLens's examples/perf_model_without_trace.ipynb: Llama 3 70B, GEMM and SDPA
    # only, MI300X at 708 TFLOPS (AMD's max-achievable bf16) and 5.3 TB/s: TraceLens's
    # MI300X.json, as docs/examples/tracelens-mi300x.hw carries it for docs/cli.md (the
    # shipped target's roof is MAMF's 781.9)
    spec = load_spec(MODELS / "llama3-70b.model")
    hw = load_hardware(Path(__file__).parents[1] / "docs" / "examples" / "tracelens-mi300x.hw")
    only = frozenset({"GEMM", "SDPA"})
    decode = compile_report(spec, hw, Workload(Phase.decode, 1, context=2048), TRACELENS,
                            only=only)  # fmt: skip
    prefill = compile_report(spec, hw, Workload(Phase.prefill, 1, 2048), TRACELENS,
                             only=only)  # fmt: skip
    # values recomputed with TraceLens's own functions (tests/data/tracelens-vectors.json)
    notebook = {v["args"]["S_q"]: v["value"] for v in VECTORS if v["op"] == "notebook"}
    assert round(decode.totals.time_s * 1e6, 6) == round(notebook[1], 6) == 26359.112936
    assert round(prefill.totals.time_s * 1e6, 6) == round(notebook[2048], 6) == 409853.927193
    # the notebook prints "26.36 ms (37.9 tok/s)" and "409.85 ms (4996.9 tok/s)"
    assert f"{decode.totals.per_token.ms_per_step:.2f}" == "26.36"
    assert f"{decode.totals.per_token.tokens_per_s:.1f}" == "37.9"
    assert f"{prefill.totals.per_token.ms_per_step:.2f}" == "409.85"
    assert f"{prefill.totals.per_token.tokens_per_s:.1f}" == "4996.9"
    # and its per-op breakdown (µs): q_proj 25.3 / 388.2, lm_head 396.5 / 6078.5
    q = next(o for o in prefill.ops if o.name == "layers.0.attn.q_proj")
    assert f"{q.time_s * 1e6:.1f}" == "388.2"
    head = next(o for o in decode.ops if o.name == "lm_head")
    assert f"{head.time_s * 1e6:.1f}" == "396.5"
    sdpa = next(o for o in decode.ops if o.name == "layers.0.attn.sdpa")
    assert f"{sdpa.time_s * 1e6:.1f}" == "1.6"


def test_per_token_figures_and_memory_for_a_decode_step() -> None:
    spec = load_spec(MODELS / "llama3-70b.model")
    hw = load_hardware("mi355x")
    r = compile_report(spec, hw, Workload(Phase.decode, 8, context=4096))
    t = r.totals
    assert t.per_token.tokens_per_step == 8
    # one definition of "per token" in every phase: the step over its 8 tokens (a
    # sequence still waits the whole step for each of its tokens: ms_per_step)
    assert t.per_token.ms_per_step == t.time_s * 1e3
    assert t.per_token.ms_per_token == t.time_s * 1e3 / 8
    assert t.per_token.tokens_per_s == 8 / t.time_s
    assert math.isclose(sum(o.total_time_s for o in r.ops), t.time_s, rel_tol=1e-12)
    # weights: 70,553,706,496 parameters × 2 bytes
    assert t.memory.weights == 70_553_706_496 * 2
    # KV cache: batch 8 × 4096 positions × (K and V) × 8 heads × 128 × 2 bytes × 80 layers
    assert t.memory.kv_cache == 8 * 4096 * 2 * 8 * 128 * 2 * 80
    assert t.memory.fits and t.memory.warning is None
    assert t.bound == "memory"
    assert r.hardware.knee == 2516.6e12 / 8e12  # bf16 peak / HBM bandwidth
    # every byte of weights is read once per step: a floor on the step time
    assert t.time_s >= t.memory.weights / 8e12


def test_prefill_per_token_and_sliding_window_cache() -> None:
    spec = load_spec(MODELS / "gemma2-9b.model")
    r = compile_report(spec, load_hardware("h100"), Workload(Phase.prefill, 2, 8192))
    t = r.totals
    assert t.per_token.tokens_per_step == 2 * 8192
    assert t.per_token.ms_per_token == t.time_s * 1e3 / (2 * 8192)
    # 21 local layers keep 4096 positions, 21 global ones all 8192:
    # 2 seqs × (21·4096 + 21·8192) × 2 (K, V) × 8 heads × 256 × 2 bytes
    assert t.memory.kv_cache == 2 * (21 * 4096 + 21 * 8192) * 2 * 8 * 256 * 2


def test_memory_warning_when_it_does_not_fit() -> None:
    spec = load_spec(MODELS / "llama3.1-405b.model")
    r = compile_report(spec, load_hardware("h100"), Workload(Phase.decode, 1, context=2048))
    m = r.totals.memory
    assert not m.fits
    assert m.warning == (
        # 79.6 GiB: 81559 MiB, the total nvidia-smi reports for an H100 80GB
        # (specs/hardware/h100.hw, memory_source)
        f"needs {m.total / 2**30:,.1f} GiB but NVIDIA H100 SXM5 80GB has 79.6 GiB "
        "(driver-reported): "
        # 810 GB of bf16 weights: over 8 devices ~101 GB each, over 16 ~51 GB
        "it does not fit on one device; it fits with, the least step time × devices first: "
        # or 16 pipeline stages, whose decode step reads every stage's weights in turn
        "--tp 16 (step 16.3 ms on 16 devices); --pp 16 (step 264 ms on 16 devices)"
    )


def test_llama3_70b_in_bf16_fits_one_h200_as_engines_serve_it() -> None:
    # issue 21: 141 GB of bf16 weights plus a 4096-token KV cache (~142.4 GB) did "not fit"
    # the datasheet's 141 GB; an H200's driver reports 143771 MiB = 150.76 GB (nvidia-smi,
    # specs/hardware/h200.hw), and engines serve the model there
    spec = load_spec(MODELS / "llama3-70b.model")
    r = compile_report(spec, load_hardware("h200"), Workload(Phase.decode, 1, context=4096))
    m = r.totals.memory
    assert 141e9 < m.total < 143771 * 2**20
    assert (m.fits, m.warning, m.capacity) == (True, None, 143771 * 2**20)
    assert (r.hardware.memory_capacity, r.hardware.memory_basis) == (
        143771 * 2**20,
        "driver-reported",
    )


def test_training_counts_backward_and_optimizer() -> None:
    spec = load_spec(MODELS / "gpt2.model")
    r = compile_report(spec, load_hardware("a100"), Workload(Phase.train, 8, 1024))
    opt = next(o for o in r.ops if o.name == "optimizer")
    assert opt.backward is None and opt.flops == 15 * 124_439_808
    q = next(o for o in r.ops if o.name == "layers.0.attn.qkv_proj")
    assert q.backward.flops == 2 * q.flops - 8192 * 2304  # 4MNK + MN vs 2MNK + MN
    m = r.totals.memory
    assert m.gradients == 124_439_808 * 4  # fp32, as Megatron-LM keeps a bf16 model's
    assert m.optimizer_states == 124_439_808 * (8 + 4)  # m, v and an fp32 master copy
    assert r.totals.flops == sum(
        o.count * (o.flops + (o.backward.flops if o.backward else 0)) for o in r.ops
    )


def test_achievable_peak_falls_back_to_the_datasheet() -> None:
    hw = load_hardware("mi350x")  # nothing measured published
    assert hw.peak("matrix", "bf16", "achievable") == (2306.9e12, "bf16", "datasheet")
    mi300 = load_hardware("mi300x")
    # ml-engineering's MAMF on ROCm 6.2, the best published MI300X bf16 GEMM
    assert mi300.peak("matrix", "bf16", "achievable") == (781.9e12, "bf16", "achievable")
    # no fp4 unit on MI300X: MXFP4 math runs at the next wider precision it has
    assert mi300.peak("matrix", "fp4") == (2614.9e12, "fp8", "datasheet")
    # no fp32 matrix path on A100: fp32 GEMMs run on the vector units
    assert load_hardware("a100").peak("matrix", "fp32") == (19.5e12, "fp32", "datasheet")


def test_training_gemm_flops_are_six_n_d() -> None:
    # Every linear layer costs 2·T·P forward and 4·T·P backward: 6·T·P in all. Llama 3 8B
    # has no biases, so its GEMM parameters are attention + MLP + the LM head:
    # P = 32·(41,943,040 + 176,160,768) + 525,336,576 = 7,504,658,432 (test_params.py).
    spec = load_spec(MODELS / "llama3-8b.model")
    r = compile_report(spec, load_hardware("h100"), Workload(Phase.train, 8, 4096))
    gemm = next(k for k in r.kinds if k.kind == "GEMM")
    assert gemm.flops == 6 * (8 * 4096) * 7_504_658_432
