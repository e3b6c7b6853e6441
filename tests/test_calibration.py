"""Calibration: fitting factors from TraceLens perf reports (tests/data/tracelens-h100,
rows of TraceLens's own H100 reference report) and measured points, and applying them."""

import json
import math
from pathlib import Path

import pytest
from conftest import MODELS, run_cli

from modelcost import SpecError
from modelcost.calibration import Calibration, fit, from_tracelens, load_calibration
from modelcost.compile import compile_report
from modelcost.estimate import estimate
from modelcost.graph import Phase, Workload
from modelcost.hardware import load_hardware
from modelcost.perfmodel import GemmOp

DATA = Path(__file__).parent / "data"
H100 = load_hardware("h100")


def test_a_tracelens_gemm_report_becomes_observations_and_a_factor() -> None:
    obs = from_tracelens(DATA / "tracelens-h100" / "GEMM.csv", H100)
    bf16 = [o for o in obs if o.precision == "bf16"]
    assert len(bf16) == 4
    # the first row: aten::mm 8944×2816×1024 bf16, Kernel Time (µs)_median 84.4635…
    first = bf16[0]
    assert first.shape == {"M": 8944, "N": 2816, "K": 1024, "bias": False, "B": 1}
    assert first.measured_s == pytest.approx(84.4635009765625e-6, rel=1e-12)
    op = GemmOp(8944, 2816, 1024)
    assert first.estimate_s == estimate(op, op.flops(), op.bytes(), first.roofline_s, H100).time_s
    cal, rows = fit(obs, H100)
    assert {(f.kind, f.precision) for f in cal.factors} == {("GEMM", "bf16"), ("GEMM", "fp32")}
    (row,) = [r for r in rows if (r.kind, r.precision) == ("GEMM", "bf16")]
    # the factor is the geometric mean of measured / estimated time
    expected = math.exp(sum(math.log(o.measured_s / o.estimate_s) for o in bf16) / 4)
    assert row.factor == pytest.approx(expected, rel=1e-12)
    assert abs(row.median_error_after) < abs(row.median_error_before)


def test_a_calibration_scales_the_estimate_and_never_the_roofline(tmp_path) -> None:
    cal = Calibration.model_validate({"hardware": "h100", "factors": [
        {"kind": "GEMM", "precision": "bf16", "factor": 1.5, "points": 4}]})  # fmt: skip
    w = Workload(Phase.prefill, 1, 2048)
    raw = compile_report(MODELS / "llama3-8b.model", H100, w, kernels=True)
    scaled = compile_report(MODELS / "llama3-8b.model", H100, w, calibration=cal)
    assert scaled.totals.time_s == raw.totals.time_s  # the roofline is untouched
    for a, b in zip(raw.ops, scaled.ops, strict=True):
        if a.kind == "GEMM":
            assert b.estimate_s == max(a.estimate_s * 1.5, a.time_s)
            assert "× 1.5 (GEMM bf16 calibrated on 4 points)" in b.estimate_reason
        else:
            assert b.estimate_s == a.estimate_s


def test_a_measured_shape_replaces_the_estimate() -> None:
    op = {"M": 2048, "N": 4096, "K": 4096}  # llama3-8b's q_proj at seq 2048
    cal = Calibration.model_validate({"hardware": "h100", "times": [
        {"kind": "GEMM", "precision": "bf16", "shape": op, "time_s": 1e-3}]})  # fmt: skip
    r = compile_report(MODELS / "llama3-8b.model", H100, Workload(Phase.prefill, 1, 2048),
                       calibration=cal)  # fmt: skip
    q = next(o for o in r.ops if o.name == "layers.0.attn.q_proj")
    assert q.estimate_s == 1e-3 and q.estimate_reason == "measured 1,000.0 µs (calibration)"


def test_the_calibrate_command_fits_writes_and_is_used(tmp_path) -> None:
    out = tmp_path / "h100.json"
    reports = sorted(str(p) for p in (DATA / "tracelens-h100").glob("*.csv"))
    r = run_cli("calibrate", *reports, "--hw", "h100", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "GEMM               bf16" in r.stdout and "within ±25 %" in r.stdout
    assert json.loads(out.read_text())["hardware"] == "h100"
    spec = str(MODELS / "llama3-8b.model")
    ok = run_cli("compile", spec, "--hw", "h100", "--calibrate", str(out), "--format", "json")
    assert ok.returncode == 0 and json.loads(ok.stdout)["reports"][0]["totals"]["estimate_s"]
    wrong = run_cli("compile", spec, "--hw", "mi355x", "--calibrate", str(out))
    assert wrong.returncode == 2
    assert "the calibration is for h100, the target is mi355x" in wrong.stderr


def test_bad_calibration_files_are_positioned_errors(tmp_path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"hardware": "h100",\n "factors": [}\n')
    with pytest.raises(SpecError) as err:
        load_calibration(bad)
    assert (err.value.line, err.value.message.startswith("not JSON")) == (2, True)
    bad.write_text('{"hardware": "h100", "factors": [{"kind": "GEMM"}]}')
    with pytest.raises(SpecError, match=r"factors\.0\.factor: Field required"):
        load_calibration(bad)
    r = run_cli("calibrate", str(tmp_path / "missing.json"), "--hw", "h100")
    assert r.returncode == 2 and "Traceback" not in r.stderr
