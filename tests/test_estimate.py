"""The kernel-aware estimate: tile and wave quantization by hand, and published kernel
measurements (tests/data/measured-kernels.json) against it and against the roofline."""

import json
from pathlib import Path

import pytest
from conftest import MODELS

from modelcost.compile import compile_report
from modelcost.dtypes import DType
from modelcost.estimate import K_FILL, LAUNCH_S, estimate, tile_waves
from modelcost.graph import Phase, Workload
from modelcost.hardware import load_hardware
from modelcost.measured import check, load_points
from modelcost.perfmodel import GemmOp

DATA = Path(__file__).parent / "data" / "measured-kernels.json"
MI355X = load_hardware("mi355x")  # 256 CUs; Gluon a8w8 sustains 3,527 TFLOPS (library.json)


def test_tiles_and_waves_by_hand() -> None:
    # M = N = 4352 with 256×256 tiles: ⌈4352/256⌉² = 17² = 289 tiles; on 256 CUs that is
    # 2 waves, the second 33/256 = 13 % full
    assert tile_waves(4352, 4352, (256, 256), 256) == (289, 2)
    # 4096² fills exactly one wave; a batch of 3 of them, three
    assert tile_waves(4096, 4096, (256, 256), 256) == (256, 1)
    assert tile_waves(4096, 4096, (256, 256), 256, batch=3) == (768, 3)
    op = GemmOp(4352, 4352, 8192, a=DType.fp8_e4m3, b=DType.fp8_e4m3)
    e = estimate(op, op.flops(), op.bytes(), 0.0, MI355X)
    assert "289 tiles in 2 waves on 256 CUs; the last is 13% full" in e.reason
    # each wave is one tile per CU at 3,527/256 TFLOPS a CU, its K loop 128 longer for
    # the pipeline's fill and drain; then the launch
    per_wave = 2 * 256 * 256 * (8192 + K_FILL) * 256 / 3527e12
    assert e.time_s == pytest.approx(2 * per_wave + LAUNCH_S, rel=1e-12)


def test_published_kernels_against_the_estimate_and_the_roofline() -> None:
    # 114 GEMM, attention and bandwidth points with their shapes stated: the estimate is
    # within ±25 % of the measured time for at least 80 % of them, and no measurement
    # beats its roofline
    checks = [check(p) for p in load_points(DATA)]
    assert len(checks) == 114
    assert not [c.id for c in checks if c.beaten]
    within = [c for c in checks if abs(c.error) <= 0.25]
    assert len(within) / len(checks) >= 0.80
    assert all(c.estimate_s >= c.roofline_s for c in checks)
    excluded = json.loads(DATA.read_text())["excluded"]
    assert len(excluded) == 15 and all(x["why"] for x in excluded)


def test_a_report_with_estimates_keeps_the_roofline_and_adds_the_kernels() -> None:
    w = Workload(Phase.prefill, 1, 2048)
    plain = compile_report(MODELS / "llama3-70b-fp8.model", "mi355x", w)
    r = compile_report(MODELS / "llama3-70b-fp8.model", "mi355x", w, kernels=True)
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


def test_the_diff_of_two_estimated_reports_has_the_estimate_row(tmp_path) -> None:
    from conftest import run_cli

    r = run_cli("diff", str(MODELS / "llama3-70b.model"), str(MODELS / "llama3-70b-fp8.model"),
                "--hw", "mi355x", "--estimate", "kernels", "--format", "json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    (phase,) = json.loads(r.stdout)["phases"]
    keys = [c["key"] for c in phase["totals"]]
    assert keys[-1] == "estimate_s"
