"""Calibration: fitting factors from TraceLens perf reports (tests/data/tracelens-h100,
rows of TraceLens's own H100 reference report) and measured points, and applying them."""

import csv
import io
import json
import math
from pathlib import Path

import pytest
from conftest import MODELS, run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from modelcost import SpecError
from modelcost.estimate.calibration import (
    MAX_FACTOR,
    MIN_FACTOR,
    Calibration,
    fit,
    from_points,
    from_tracelens,
    load_calibration,
    read_points,
)
from modelcost.estimate.estimate import estimate
from modelcost.ir.graph import Phase, Workload
from modelcost.perfmodel import GemmOp
from modelcost.roofline.compile import compile_report
from modelcost.targets.hardware import load_hardware

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
    # the factor centres the log-errors (their mean is 0 after it), not the median: with
    # the estimate already within ~1 % here, the fit keeps every point within ±25 % and
    # its median error within a few percent
    assert row.within_after >= row.within_before == 4
    assert abs(row.median_error_after) < 0.05


def test_a_calibration_scales_the_estimate_and_never_the_roofline() -> None:
    cal = Calibration.model_validate({"hardware": "h100", "factors": [
        {"kind": "GEMM", "precision": "bf16", "factor": 1.5, "points": 4}]})  # fmt: skip
    w = Workload(Phase.prefill, 1, 2048)
    raw = compile_report(MODELS / "llama3-8b.model", H100, w, estimate="kernels")
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


# ---- bad rows and fields: refused at their line and column, never a traceback (issue 20)

BIG = "9" * (128 * 1024 + 1)  # a field of 128 KiB and a byte: over csv's limit (131,072)
BAD_NUMBERS = ["nan", "inf", "-inf", "1e400", "0", "-1", "x", ""]
REPORTS = {  # a family's report (tests/data/tracelens-h100) and its columns checked
    "GEMM.csv": ["param: M", "param: N", "param: K", "param: B", "Kernel Time (µs)_median"],
    "SDPA_fwd.csv": ["param: B", "param: N_Q", "param: H_Q", "param: N_KV", "param: H_KV",
                     "param: d_h_qk", "param: d_h_v", "Kernel Time (µs)_median"],
    "UnaryElementwise.csv": ["GFLOPS_first", "Data Moved (MB)_first",
                             "Kernel Time (µs)_median"],
}  # fmt: skip


def _csv_line(fields: list[str]) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="").writerow(fields)
    return out.getvalue()


def _report(tmp_path: Path, report: str, column: str | None, value: str) -> tuple[Path, int]:
    """The report's header and first row with `column` set to `value`, written to
    tmp_path; and the 1-based column the field starts at."""
    header, row = list(csv.reader((DATA / "tracelens-h100" / report).open(encoding="utf-8")))[:2]
    i = header.index(column) if column else 0
    row[i] = value
    path = tmp_path / report
    path.write_text(_csv_line(header) + "\n" + _csv_line(row) + "\n", encoding="utf-8")
    # the written fields before it and a comma
    return path, len(_csv_line(row[:i])) + 2 if i else 1


def _message(column: str, value: str) -> str:
    """What a bad value of `column` is told: the one rule of its kind in calibration.py."""
    if not value:
        return f"`{column}` has no value"
    if column.startswith("param:"):  # a shape: 1 ≤ n ≤ MAX_DIM (2**40)
        try:
            float(value)
        except ValueError:
            return f"`{column}` must be a number; it is {value!r}"
        return f"`{column}` must be a whole number from 1 to 1,099,511,627,776; it is {value!r}"
    try:
        float(value)
    except ValueError:
        return f"`{column}` must be a number; it is {value!r}"
    if column.startswith("Kernel Time"):  # MAX_TIME_S = 1e6 s, in µs
        return f"`{column}` must be a positive finite number of at most 1e+12 µs; it is {value!r}"
    unit = " GFLOPs" if column == "GFLOPS_first" else " MB"  # counts may be 0
    return f"`{column}` must be a non-negative finite number{unit}; it is {value!r}"


@pytest.mark.parametrize(
    ("report", "column", "value"),
    [(r, c, v) for r, cs in REPORTS.items() for c in cs for v in BAD_NUMBERS
     if not (v == "0" and c in ("GFLOPS_first", "Data Moved (MB)_first"))
     and not (v == "" and c in ("param: B", "Kernel Time (µs)_median"))],
    # counts of 0 are fine; an empty B is 1; an empty median falls back to the mean
)  # fmt: skip
def test_every_bad_number_in_a_tracelens_row_is_refused_at_its_field(
    tmp_path, report, column, value
) -> None:
    path, col = _report(tmp_path, report, column, value)
    with pytest.raises(SpecError) as err:
        from_tracelens(path, H100)
    family = report.removesuffix(".csv").removesuffix("_fwd")
    assert (err.value.filename, err.value.line, err.value.column) == (str(path), 2, col)
    assert err.value.message == f"row 1 of a TraceLens {family} report: {_message(column, value)}"


def test_malformed_tracelens_reports_are_refused_at_their_line(tmp_path) -> None:
    def refused(text: str) -> SpecError:
        path = tmp_path / "GEMM.csv"
        path.write_text(text, encoding="utf-8")
        with pytest.raises(SpecError) as err:
            from_tracelens(path, H100)
        return err.value

    header, row = (DATA / "tracelens-h100" / "GEMM.csv").read_text().splitlines()[:2]
    err = refused("")
    assert (err.line, err.message) == (0, "an empty TraceLens GEMM report: no header row")
    # a field over csv's limit (csv.field_size_limit(): 131,072 characters)
    err = refused(f"{header}\n{row}\n{BIG},{row}\n")
    assert (err.line, err.column) == (3, 1)
    assert err.message == "not a CSV file modelcost reads: field larger than field limit (131072)"
    assert err.source_line is None  # a line too long to show is not printed
    err = refused(header.replace("param: K,", "param: k,") + f"\n{row}\n")
    assert (err.line, err.column, err.message) == (1, 1, "the GEMM report has no `param: K` column")
    err = refused(header.replace("Kernel Time (µs)", "Time") + f"\n{row}\n")
    assert err.message == "the GEMM report has no `Kernel Time (µs)_median` column"
    err = refused(f"{header}\n{row}\n\n{row.rsplit(',', 1)[0]}\n")  # a blank line is skipped
    assert (err.line, err.message) == (4, "row 2 of a TraceLens GEMM report: it has 14 fields,"
                                          " the header 15")  # fmt: skip
    err = refused(f"{header}\n{row},7\n")
    assert (err.line, err.column) == (2, len(row) + 2)  # at the extra field
    err = refused(f"{header}\n{row.replace('matrix_bf16', 'matrix_int3')}\n")
    assert err.message.endswith("precision 'int3' is not one modelcost costs "
                                "(fp32, bf16, fp16, fp8, fp6, fp4)")  # fmt: skip
    err = refused(f"{header}\n{row.replace(',False,', ',maybe,')}\n")
    assert err.message.endswith("`param: bias` must be True or False; it is 'maybe'")
    # 84.46 µs read as 84.46 s: 1e6 × the estimate, beyond MAX_FACTOR (1e3)
    err = refused(f"{header}\n{row.replace(',84.4635009765625,', ',84463500.9765625,')}\n")
    assert "× the estimate" in err.message and err.hint == "check the time's unit"


@settings(max_examples=150, deadline=None)
@given(
    report=st.sampled_from(sorted(REPORTS)),
    index=st.integers(0, 20),
    value=st.one_of(st.floats().map(repr), st.integers().map(str), st.text(max_size=30)),
)
def test_any_value_in_any_tracelens_field_is_read_or_refused_at_its_row(
    tmp_path_factory, report, index, value
) -> None:
    # the property behind the table above: any text in any field is an observation or a
    # SpecError on its row, never another exception
    tmp = tmp_path_factory.mktemp("any")
    header = next(csv.reader((DATA / "tracelens-h100" / report).open(encoding="utf-8")))
    path, _ = _report(tmp, report, header[index % len(header)], value)
    try:
        obs = from_tracelens(path, H100)
    except SpecError as err:
        assert err.line >= 2, err  # the row's (a quoted newline may carry it to line 3)
    else:
        o = obs[0]
        assert MIN_FACTOR <= o.measured_s / o.estimate_s <= MAX_FACTOR


FACTORS = '{"hardware": "h100",\n "factors": [\n  {"kind": "GEMM", "factor": 1.2, "points": 4}\n ],'
TIMES = (
    '\n "times": [\n  {"kind": "GEMM", "precision": "bf16", "shape": {"M": 8}, "time_s": 1e-3}\n ]}'
)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [pytest.param(f, v, m, id=f"{f}-{v[:12]}") for f in ("factor", "time_s") for v, m in [
        ("NaN", "Input should be a finite number (it is nan)"),
        ("Infinity", "Input should be a finite number (it is inf)"),
        ("1e400", "Input should be a finite number (it is inf)"),  # json reads it as inf
        ("0", None), ("-1", None),
        ('"x"', "Input should be a valid number, unable to parse string as a number "
                "(it is 'x')"),
        # a string of digits is read as a number (pydantic's lax mode), this one as inf
        (f'"{BIG}"', "Input should be a finite number "
                     "(it is '999999999999999999999999999999999999...)"),
    ]] + [("points", "-1", "Input should be greater than or equal to 0 (it is -1)"),
          ("points", "1.5", "Input should be a valid integer, got a number with a fractional "
                            "part (it is 1.5)")],
)  # fmt: skip
def test_every_bad_calibration_value_is_refused_at_its_field(
    tmp_path, field, value, message
) -> None:
    # bounds: a factor within MIN_FACTOR..MAX_FACTOR (1e-3..1e3), a time above 0
    message = (
        message
        or {
            "factor": f"Input should be greater than or equal to 0.001 (it is {value})",
            "time_s": f"Input should be greater than 0 (it is {value})",
        }[field]
    )
    old = {"factor": "1.2", "time_s": "1e-3", "points": "4"}[field]
    text = (FACTORS + TIMES).replace(f'"{field}": {old}', f'"{field}": {value}')
    path = tmp_path / "cal.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError) as err:
        load_calibration(path, H100)
    line = 3 if field != "time_s" else 6  # FACTORS above: the factor's line; TIMES: the time's
    at = f"{'factors' if field != 'time_s' else 'times'}.0.{field}"
    assert (err.value.line, err.value.message) == (line, f"{at}: {message}")
    assert err.value.source_line is None or err.value.source_line[err.value.column - 1 :
                                                                   ].startswith(value)  # fmt: skip


def test_malformed_calibration_files_are_refused_at_their_place(tmp_path) -> None:
    def refused(text: str) -> SpecError:
        path = tmp_path / "cal.json"
        path.write_text(text, encoding="utf-8")
        with pytest.raises(SpecError) as err:
            load_calibration(path, H100)
        return err.value

    err = refused("")
    assert (err.line, err.column, err.message) == (1, 1, "not JSON: Expecting value")
    err = refused(FACTORS.replace('"factor": 1.2, ', "") + TIMES)
    assert (err.line, err.column) == (3, 3)  # at the object that lacks it
    assert err.message == "factors.0.factor: Field required"
    err = refused("[" * 100_000)  # json's C parser recurses
    assert err.message == "not a file modelcost reads: JSON nested too deeply"
    err = refused('{"hardware": "h100", "factors": [' + "9" * 5000 + "]}")
    # Python converts integers of at most sys.get_int_max_str_digits() (4,300) digits
    assert (err.line, err.column, err.message) == (1, 34, "a number longer than 4,300 digits")
    err = refused(FACTORS.replace("h100", "mi355x") + TIMES)
    assert (err.line, err.column) == (1, 14)  # at the hardware's name
    assert err.message == "the calibration is for mi355x, the target is h100"


POINT = {"id": 1, "kind": "gemm", "hardware": "h100", "M": 1024, "N": 1024, "K": 1024,
         "precision": "bf16", "tflops": 600}  # fmt: skip
ATTENTION = {"id": 2, "kind": "attention", "hardware": "h100", "B": 1, "S_q": 1024, "H_q": 8,
             "S_kv": 1024, "H_kv": 8, "d": 128, "causal": True, "pass_": "fwd",
             "precision": "bf16", "time_ms": 0.5}  # fmt: skip


@pytest.mark.parametrize(
    ("point", "key", "value", "message"),
    [(POINT, k, v, m) for k in ("M", "N", "K") for v, m in [
        (0, "must be a whole number from 1 to 1,099,511,627,776; it is 0"),
        (-1, "must be a whole number from 1 to 1,099,511,627,776; it is -1"),
        (1.5, "must be a whole number from 1 to 1,099,511,627,776; it is 1.5"),
        (True, "must be a number; it is True"),
        ("8", None),  # a string of digits is a number, as in a CSV
    ]] + [(POINT, "tflops", v, f"must be a positive finite number; it is {v!r}")
          for v in (0, -1.0, math.nan, math.inf)]
    + [(ATTENTION, "time_ms", v, f"must be a positive finite number of at most 1e+09 ms; "
        f"it is {v!r}") for v in (0, -1.0, math.nan, math.inf, 1e10)]
    + [(ATTENTION, "causal", 1, "must be true or false; it is 1"),
       (ATTENTION, "pass_", "both", "must be one of fwd, bwd; it is 'both'"),
       (ATTENTION, "precision", "int3", "must be one of fp32, bf16, fp16, fp8, fp6, fp4; "
        "it is 'int3'"),
       (ATTENTION, "d", None, "has no value")],
)  # fmt: skip
def test_every_bad_measured_point_is_refused_at_its_field(
    tmp_path, point, key, value, message
) -> None:
    path = tmp_path / "points.json"
    # json writes NaN and Infinity as Python reads them
    path.write_text(json.dumps({"points": [POINT, ATTENTION, {**point, key: value}]}, indent=1))
    if message is None:
        assert len(read_points(path, H100)) == 3
        return
    with pytest.raises(SpecError) as err:
        read_points(path, H100)
    assert err.value.message == f"points.2.{key}: `{key}` {message}"
    assert err.value.source_line is not None and err.value.source_line.lstrip().startswith(
        f'"{key}"'
    )


def test_calibrate_and_calibrated_commands_refuse_bad_values_with_exit_2(tmp_path) -> None:
    # the reports of issue 20: a NaN time wrote `"factor": null`, a 128 KB field raised
    # _csv.Error, a NaN factor gave "estimate nan µs" with exit 0
    out = tmp_path / "cal.json"
    # (the tables above cover every value; here, what the command makes of a refusal)
    for column, value in [("Kernel Time (µs)_median", "nan"), ("name", BIG)]:
        path, col = _report(tmp_path, "GEMM.csv", column, value)
        r = run_cli("calibrate", str(path), "--hw", "h100", "-o", str(out))
        assert (r.returncode, r.stdout, out.exists()) == (2, "", False), r.stderr
        assert r.stderr.startswith(f"{path}:2:{col}: error: ") and "Traceback" not in r.stderr
    out.write_text(FACTORS.replace("1.2", "NaN") + TIMES)
    spec = str(MODELS / "llama3-8b.model")
    r = run_cli("compile", spec, "--hw", "h100", "--calibrate", str(out))
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith(f"{out}:3:30: error: factors.0.factor: Input should be a finite")


def test_from_points_refuses_a_bad_point_as_the_file_does() -> None:
    # the Python API: the same SpecError as `calibrate`, naming the field without a file
    with pytest.raises(SpecError) as err:
        from_points([POINT, {**POINT, "M": 0}], H100)
    assert (err.value.filename, err.value.message) == (
        "<points>",
        "points.1.M: `M` must be a whole number from 1 to 1,099,511,627,776; it is 0",
    )


def test_a_measured_points_catalog_mark_is_not_read() -> None:
    # `built` marks a catalog point the model was taken from (tests/data/measured-kernels
    # .json); in a user's measurements it means nothing, whatever its value: no traceback
    from modelcost.estimate.calibration import _point

    p = {"kind": "gemm", "hardware": "h100", "precision": "bf16", "M": 1024, "N": 1024,
         "K": 1024, "tflops": 500}  # fmt: skip
    assert _point({**p, "built": 5}) == _point(p)
