"""Calibration: what one machine measured, on top of the kernel-aware estimate.

A calibration file (JSON) names its hardware and holds `factors` (a time multiplier per
op kind, optionally per precision: 1.2 means the machine runs that kind 20 % slower than
estimated) and `times` (measured times of exact shapes, which replace the estimate of an
op with that kind, precision and shape). `--calibrate FILE` applies it; the roofline is
never touched, and a calibrated estimate is never below it.

`modelcost calibrate` fits one from measured points: the kernel-level format of
tests/data/measured-kernels.json, or TraceLens's per-op performance report CSVs (one
file per op family: GEMM.csv, SDPA_fwd.csv, UnaryElementwise.csv, ...; `Kernel Time
(µs)_median` against the op rebuilt from its `param:` columns, or for the families
without a shape, its `GFLOPS_first` and `Data Moved (MB)_first`). A kind's factor is the
geometric mean of measured / estimated times over its points.

Every value read is checked where it is read, and a bad one is refused at its place (a
CSV row's line and column, a JSON field's line and column): shapes are whole numbers
from 1 to MAX_DIM, times positive and at most MAX_TIME_S, FLOPs and bytes finite, and a
point's factor, like a factor in a calibration file, within MIN_FACTOR to MAX_FACTOR.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, ValidationError

from modelcost.base.errors import SpecError
from modelcost.base.files import read_text
from modelcost.base.frozen import Frozen
from modelcost.base.record import Record
from modelcost.language.expressions import MAX_DIM
from modelcost.perfmodel import GemmOp, OpRecord, SdpaOp, UnaryOp
from modelcost.targets.hardware import Hardware
from modelcost.targets.roofs import roof

from .estimate import Estimate, estimate
from .measured import DTYPE, check

SCHEMA: Literal["modelcost-calibration/1"] = "modelcost-calibration/1"
# A factor (measured / estimated time) beyond these is a unit mistake (ms for µs, MB for
# GB), not a machine: `calibrate` refuses such a point, `--calibrate` such a factor.
MIN_FACTOR, MAX_FACTOR = 1e-3, 1e3
MAX_TIME_S = 1e6  # a measured op time (11.6 days); more is a unit mistake
MAX_SHOWN = 500  # characters of a source line shown under an error; a longer line is not
FILE_HINT = "modelcost calibrate writes this file"
CSV_HINT = (
    "a TraceLens perf-report CSV: `param:` columns, `Compute Spec`, `Kernel Time (µs)_median`"
)
POINTS_HINT = "a measurement file: tests/data/measured-kernels.json is one"

FactorValue = Annotated[float, Field(ge=MIN_FACTOR, le=MAX_FACTOR, allow_inf_nan=False)]
TimeValue = Annotated[float, Field(gt=0, le=MAX_TIME_S, allow_inf_nan=False)]


class Factor(Frozen):
    kind: str  # the perf-model kind: GEMM, SDPA, UnaryElementwise, ...
    precision: str | None = None  # None: every precision of the kind
    factor: FactorValue
    points: Annotated[int, Field(ge=0)] = 0  # measurements it was fitted on


class Timed(Frozen):
    kind: str
    precision: str
    shape: dict[str, int | bool]  # the op's shape parameters it must match
    time_s: TimeValue


class Calibration(Frozen):
    format: Literal["modelcost-calibration/1"] = SCHEMA
    hardware: str
    factors: tuple[Factor, ...] = ()
    times: tuple[Timed, ...] = ()

    def apply(self, op: OpRecord, e: Estimate, roofline_s: float) -> Estimate:
        """The estimate as this machine runs it: a measured time of the same shape, else
        the most specific factor; never below the roofline."""
        shape = op.shape()
        for t in self.times:
            if (t.kind, t.precision) == (op.kind, op.precision) and all(
                shape.get(k) == v for k, v in t.shape.items()
            ):
                time = max(t.time_s, roofline_s)
                return Estimate(time, f"measured {time * 1e6:,.1f} µs (calibration)")
        for f in self.factors:
            if f.kind == op.kind and f.precision in (op.precision, None):
                which = f"{f.kind}" + (f" {f.precision}" if f.precision else "")
                return Estimate(
                    max(e.time_s * f.factor, roofline_s),
                    f"{e.reason}; × {f.factor:.3g} ({which} calibrated on {f.points} points)",
                )
        return e


def load_calibration(path: str | Path, hw: Hardware | None = None) -> Calibration:
    """A calibration file, checked; for `hw`, it must be that hardware's. A bad value is
    a SpecError at its field."""
    name = str(path)
    text = read_text(path)
    data = _load_json(text, name, FILE_HINT)
    try:
        cal = Calibration.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "the file"
        got = f" (it is {_shown(first['input'])})" if first["type"] != "missing" else ""
        raise _at_json(text, name, first["loc"], f"{where}: {first['msg']}{got}",
                       FILE_HINT) from None  # fmt: skip
    if hw is not None and cal.hardware != hw.name:
        raise _at_json(text, name, ("hardware",),
                       f"the calibration is for {cal.hardware}, the target is {hw.name}",
                       "calibrate on the target's own measurements")  # fmt: skip
    return cal


# ---- positions in the user's files


class _Bad(Exception):
    """A value refused at its field: a CSV row's column, or a key path in a JSON file."""

    def __init__(self, field: tuple[str | int, ...], message: str, hint: str | None = None):
        super().__init__(message)
        self.field, self.message, self.hint = field, message, hint


def _shown(value: object) -> str:
    """A value as an error message quotes it: short, whatever the user wrote."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def _at(text: str, filename: str, offset: int, message: str, hint: str | None,
        width: int = 1) -> SpecError:  # fmt: skip
    """A SpecError at character `offset` of `text`, with its line under it."""
    start = text.rfind("\n", 0, offset) + 1
    end = text.find("\n", offset)
    line = text[start : end if end >= 0 else len(text)].rstrip("\r")
    return SpecError(message, filename=filename, line=text.count("\n", 0, offset) + 1,
                     column=offset - start + 1, hint=hint, width=width,
                     source_line=line if len(line) <= MAX_SHOWN else None)  # fmt: skip


def _load_json(text: str, filename: str, hint: str) -> object:
    """`text` parsed, or a SpecError: at the mistake, or at a number too long to convert;
    nesting too deep for the parser is refused as the whole file."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise _at(text, filename, err.pos, f"not JSON: {err.msg}", hint) from None
    except RecursionError:
        raise SpecError("not a file modelcost reads: JSON nested too deeply", filename=filename,
                        hint=hint) from None  # fmt: skip
    except ValueError:  # an integer longer than Python converts
        digits = sys.get_int_max_str_digits()
        m = re.search(rf"\d{{{digits + 1},}}", text)
        message = f"a number longer than {digits:,} digits"
        if m is None:
            raise SpecError(message, filename=filename, hint=hint) from None
        raise _at(text, filename, m.start(), message, hint, len(m.group())) from None


_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def _skip(text: str, i: int) -> int:
    """The first offset from `i` that is not JSON whitespace."""
    m = _WS.match(text, i)
    return m.end() if m else i


def _json_offset(text: str, path: Sequence[str | int]) -> tuple[int, int]:
    """(offset, width) of the value at `path` in the JSON `text` (parsed before), or of
    the deepest part of the path that is there (a missing field: its object)."""
    pos = _skip(text, 0)
    for key in path:
        found = _member(text, pos, key)
        if found is None:
            break
        pos = found
    end = _DECODER.raw_decode(text, pos)[1]
    return pos, end - pos


def _member(text: str, pos: int, key: str | int) -> int | None:
    """Where the value of `key` (the last of duplicate keys, as json.loads reads them) of
    the object or array at `pos` starts."""
    opener = text[pos : pos + 1]
    if isinstance(key, str) != (opener == "{") or opener not in "{[" or not opener:
        return None
    close, found, index = "}" if opener == "{" else "]", None, 0
    i = _skip(text, pos + 1)
    while text[i] != close:
        if opener == "{":
            name, i = json.decoder.scanstring(text, i + 1)  # type: ignore[attr-defined]
            i = _skip(text, _skip(text, i) + 1)  # past the colon
            found = i if name == key else found
        elif index == key:
            return i
        i = _skip(text, _DECODER.raw_decode(text, i)[1])
        if text[i] == ",":
            i = _skip(text, i + 1)
        index += 1
    return found


def _at_json(text: str, filename: str, path: Sequence[str | int], message: str,
             hint: str | None) -> SpecError:  # fmt: skip
    offset, width = _json_offset(text, path)
    return _at(text, filename, offset, message, hint, width)


# ---- checked values of a measured point


def _value(row: Mapping[str, object], key: str) -> object:
    value = row.get(key)
    if value is None or value == "":
        raise _Bad((key,), f"`{key}` has no value")
    return value


def _number(row: Mapping[str, object], key: str) -> float:
    value = _value(row, key)
    try:
        if isinstance(value, bool):
            raise TypeError
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise _Bad((key,), f"`{key}` must be a number; it is {_shown(value)}") from None


def _count(row: Mapping[str, object], key: str) -> int:
    """A shape parameter: a whole number from 1 to MAX_DIM (TraceLens may write `8.0`)."""
    x = _number(row, key)
    if not (math.isfinite(x) and x == int(x) and 1 <= x <= MAX_DIM):
        raise _Bad((key,), f"`{key}` must be a whole number from 1 to {MAX_DIM:,}; "
                   f"it is {_shown(row[key])}")  # fmt: skip
    return int(x)


def _amount(row: Mapping[str, object], key: str, scale: float, unit: str,
            positive: bool = True, most: float = math.inf) -> float:  # fmt: skip
    """A number times `scale`: finite, positive (or not negative), at most `most`."""
    x = _number(row, key) * scale
    low = x > 0 if positive else x >= 0
    if not (low and x <= most and math.isfinite(x)):  # NaN fails all
        sign = "positive" if positive else "non-negative"
        bound = f" of at most {most / scale:g}" if most < math.inf else ""
        raise _Bad((key,), f"`{key}` must be a {sign} finite number{bound}{unit}; "
                   f"it is {_shown(row[key])}")  # fmt: skip
    return x


def _flag(row: Mapping[str, object], key: str, words: tuple[object, object]) -> bool:
    value = _value(row, key)
    if not any(type(value) is type(w) and value == w for w in words):  # 1 is not True
        false, true = (json.dumps(w) if isinstance(w, bool) else w for w in words)
        raise _Bad((key,), f"`{key}` must be {true} or {false}; it is {_shown(value)}")
    return value == words[1]


def _choice(row: Mapping[str, object], key: str, choices: Sequence[str]) -> str:
    value = _value(row, key)
    if value not in choices:
        raise _Bad((key,), f"`{key}` must be one of {', '.join(choices)}; "
                   f"it is {_shown(value)}")  # fmt: skip
    return str(value)


def _factor_checked(obs: Observation, time_key: str) -> Observation:
    """`obs` if its factor (measured / estimated time) is one `--calibrate` accepts."""
    ratio = obs.measured_s / obs.estimate_s
    if not MIN_FACTOR <= ratio <= MAX_FACTOR:
        raise _Bad((time_key,), f"the measured {obs.measured_s * 1e6:.3g} µs is {ratio:.3g} × "
                   f"the estimate ({obs.estimate_s * 1e6:.3g} µs); a factor lies within "
                   f"{MIN_FACTOR:g} to {MAX_FACTOR:g}", "check the time's unit")  # fmt: skip
    return obs


# ---- fitting


class Observation(Record, frozen=True):
    """One measured op: what it is, its roofline and estimate, and the measured time."""

    kind: str
    precision: str
    shape: dict
    roofline_s: float
    estimate_s: float
    measured_s: float


def _observe(op: OpRecord, flops: float, nbytes: float, measured: float, hw) -> Observation:
    r = roof(op.unit, op.precision, hw, "datasheet", "datasheet")
    roofline = max(flops / r.peak_flops, nbytes / r.bytes_per_s)
    e = estimate(op, flops, nbytes, roofline, hw)
    shape = {k: v for k, v in op.shape().items() if isinstance(v, int | bool)}
    return Observation(op.kind, op.precision, shape, roofline, e.time_s, measured)


def read_points(path: str | Path, hw: Hardware) -> list[Observation]:
    """Observations of a measurement file's points measured on `hw`; a bad point is a
    SpecError at its field."""
    name = str(path)
    text = read_text(path)
    data = _load_json(text, name, POINTS_HINT)
    points = data.get("points") if isinstance(data, dict) else None
    if not isinstance(points, list) or not all(isinstance(p, dict) for p in points):
        raise SpecError("not a measurement file: it holds no list of `points` objects",
                        filename=name, hint=POINTS_HINT)  # fmt: skip
    try:
        return _from_points(points, hw)
    except _Bad as bad:
        field = ("points", *bad.field)
        raise _at_json(text, name, field, f"{'.'.join(map(str, field))}: {bad.message}",
                       bad.hint or POINTS_HINT) from None  # fmt: skip


def from_points(points: list[dict], hw: Hardware) -> list[Observation]:
    """Observations of the kernel-level points measured on `hw` (bandwidth points have
    no op to calibrate and are left out); a bad point is a SpecError naming its field."""
    try:
        return _from_points(points, hw)
    except _Bad as bad:
        where = ".".join(map(str, ("points", *bad.field)))
        raise SpecError(f"{where}: {bad.message}", filename="<points>", hint=bad.hint) from None


def _from_points(points: list[dict], hw: Hardware) -> list[Observation]:
    """from_points; a bad point raises _Bad at (its index, its key)."""
    out = []
    for i, p in enumerate(points):
        if p.get("hardware") != hw.name or p.get("kind") not in ("gemm", "attention"):
            continue
        try:
            out.append(_point(p))
        except _Bad as bad:
            raise _Bad((i, *bad.field), bad.message, bad.hint) from None
    return out


def _point(p: dict) -> Observation:
    precision = _choice(p, "precision", tuple(DTYPE))
    if p["kind"] == "gemm":
        shape = {k: _count(p, k) for k in ("M", "N", "K")}
        time_key = "tflops" if "tflops" in p else "unique_bytes_per_s"
        _amount(p, time_key, 1.0, "")
        kind = "GEMM"
    else:
        shape = {k: _count(p, k) for k in ("B", "S_q", "H_q", "S_kv", "H_kv", "d")}
        _flag(p, "causal", (False, True))
        _choice(p, "pass_", ("fwd", "bwd"))
        time_key, kind = "time_ms", "SDPA"
        _amount(p, time_key, 1e-3, " ms", most=MAX_TIME_S)
    # the id only names the point; a catalog's in-sample mark (`built`) means nothing to a
    # user's measurements, so it is not read
    point = {k: v for k, v in p.items() if k != "built"}
    c = check({"id": 0, **point, **shape})
    if p["kind"] == "attention":
        shape = {"B": shape["B"], "N_Q": shape["S_q"], "H_Q": shape["H_q"],
                 "N_KV": shape["S_kv"], "H_KV": shape["H_kv"], "causal": p["causal"]}  # fmt: skip
    obs = Observation(kind, precision, shape, c.roofline_s, c.estimate_s, c.measured_s)
    if not 0 < c.measured_s <= MAX_TIME_S:  # a rate so high or low the time is out of range
        raise _Bad((time_key,), f"`{time_key}` gives a time of {c.measured_s:.3g} s; a "
                   f"measured op takes more than 0 and at most {MAX_TIME_S:g} s")  # fmt: skip
    return _factor_checked(obs, time_key)


TIME_COLUMNS = ("Kernel Time (µs)_median", "Kernel Time (µs)_mean", "Kernel Time (µs)")
SHAPE_COLUMNS = {  # a family's `param:` columns modelcost rebuilds the op from
    "GEMM": ("M", "N", "K"),
    "SDPA": ("B", "N_Q", "H_Q", "N_KV", "H_KV", "d_h_qk", "d_h_v", "causal"),
}
COUNTED_COLUMNS = ("GFLOPS_first", "Data Moved (MB)_first")  # the other families'


def from_tracelens(path: str | Path, hw: Hardware) -> list[Observation]:
    """Observations of one TraceLens perf-report CSV (its family from the file name). A
    malformed file, a missing column or a bad value is a SpecError at its line and
    column."""
    name = str(path)
    family = Path(path).stem.removesuffix("_fwd").removesuffix("_bwd")
    text = read_text(path)
    lines = io.StringIO(text, newline="").readlines()  # the lines csv counts
    records = _csv_records(text, lines, name)
    if not records:
        raise SpecError(f"an empty TraceLens {family} report: no header row", filename=name,
                        hint=CSV_HINT)  # fmt: skip
    (_, header), rows = records[0], records[1:]
    needed = [f"param: {k}" for k in SHAPE_COLUMNS.get(family, ())] or list(COUNTED_COLUMNS)
    missing = [c for c in ["Compute Spec", *needed] if c not in header]
    if not any(c in header for c in TIME_COLUMNS):
        missing.append(TIME_COLUMNS[0])
    if missing:
        start = _field_offset(text, lines, records[0][0], 0)
        raise _at(text, name, start, f"the {family} report has no `{missing[0]}` column",
                  CSV_HINT, len(lines[0].rstrip("\r\n")))  # fmt: skip
    column = {c: i for i, c in enumerate(header)}  # the last of duplicates, as DictReader
    out = []
    for number, (first, fields) in enumerate(rows, 1):
        where = f"row {number} of a TraceLens {family} report"
        try:
            if len(fields) != len(header):
                raise _Bad((), f"it has {len(fields)} fields, the header {len(header)}")
            out.append(_tracelens_row(family, {c: fields[i] for c, i in column.items()}, hw))
        except _Bad as bad:
            # the field at fault; a row too short or too long: its end or first extra field
            index = column[str(bad.field[0])] if bad.field else min(len(fields) - 1, len(header))
            raise _at(text, name, _field_offset(text, lines, first, index),
                      f"{where}: {bad.message}", bad.hint or CSV_HINT,
                      len(fields[index])) from None  # fmt: skip
    return out


def _csv_records(text: str, lines: list[str], name: str) -> list[tuple[int, list[str]]]:
    """Each record that is not blank, with the line it starts on; a malformed CSV (a
    field over csv's size limit) is a SpecError at its line."""
    reader = csv.reader(lines)
    records, first = [], 1
    try:
        for fields in reader:
            if fields:
                records.append((first, fields))
            first = reader.line_num + 1
    except csv.Error as err:
        offset = sum(len(line) for line in lines[: reader.line_num - 1])
        raise _at(text, name, offset, f"not a CSV file modelcost reads: {err}",
                  CSV_HINT) from None  # fmt: skip
    return records


def _field_offset(text: str, lines: list[str], first: int, index: int) -> int:
    """Where field `index` of the record starting on line `first` starts in `text`."""
    start = sum(len(line) for line in lines[: first - 1])
    quoted, field = False, 0
    for i in range(start, len(text)):
        if field == index:
            return i
        if text[i] == '"':
            quoted = not quoted
        elif text[i] == "," and not quoted:
            field += 1
    return start


def _tracelens_row(family: str, row: dict[str, str], hw: Hardware) -> Observation:
    # the first time column with a value (the header has one at least)
    time_key = next(
        (k for k in TIME_COLUMNS if row.get(k)), next(k for k in TIME_COLUMNS if k in row)
    )
    measured = _amount(row, time_key, 1e-6, " µs", most=MAX_TIME_S)
    spec = str(_value(row, "Compute Spec"))
    precision = spec.split("_", 1)[1] if "_" in spec else spec
    dt = DTYPE.get(precision)
    if dt is None:
        raise _Bad(("Compute Spec",), f"precision {_shown(precision)} is not one modelcost "
                   f"costs ({', '.join(DTYPE)})")  # fmt: skip

    def p(key: str) -> int:
        return _count(row, f"param: {key}")

    op: OpRecord
    if family in SHAPE_COLUMNS:
        if family == "GEMM":
            bias = _flag(row, "param: bias", ("False", "True")) if row.get("param: bias") else False
            op = GemmOp(p("M"), p("N"), p("K"), bias, p("B") if row.get("param: B") else 1,
                        a=dt, b=dt, out=dt, bias_dtype=dt)  # fmt: skip
        else:
            causal = _flag(row, "param: causal", ("False", "True"))
            op = SdpaOp(p("B"), p("N_Q"), p("H_Q"), p("N_KV"), p("H_KV"), p("d_h_qk"),
                        p("d_h_v"), causal=causal, act=dt, kv=dt)  # fmt: skip
        return _factor_checked(_observe(op, op.flops(), op.bytes(), measured, hw), time_key)
    # a family without a shape we rebuild: its FLOPs and bytes as TraceLens counted them
    flops = _amount(row, "GFLOPS_first", 1e9, " GFLOPs", positive=False)
    # TraceLens's MB are MiB
    nbytes = _amount(row, "Data Moved (MB)_first", 1024 * 1024, " MB", positive=False)
    op = UnaryOp((1,), "copy", dt, dt)  # stands for the family's memory-bound kernel
    obs = _observe(op, flops, nbytes, measured, hw)
    obs = Observation(family, precision, {}, obs.roofline_s, obs.estimate_s, measured)
    return _factor_checked(obs, time_key)


class FitRow(Record, frozen=True):
    kind: str
    precision: str
    points: int
    factor: float
    median_error_before: float
    median_error_after: float
    within_before: int  # within ±25 %
    within_after: int


def fit(observations: list[Observation], hw: Hardware, times: bool = False):
    """(the calibration, one fit row per kind and precision)."""
    groups: dict[tuple[str, str], list[Observation]] = {}
    for o in observations:
        groups.setdefault((o.kind, o.precision), []).append(o)
    factors, rows = [], []
    for (kind, precision), obs in sorted(groups.items()):
        ratios = [o.measured_s / o.estimate_s for o in obs]
        factor = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        before = [o.estimate_s / o.measured_s - 1 for o in obs]
        after = [max(o.estimate_s * factor, o.roofline_s) / o.measured_s - 1 for o in obs]
        factors.append(Factor.trusted(kind=kind, precision=precision, factor=factor,
                                      points=len(obs)))  # fmt: skip
        rows.append(FitRow(kind, precision, len(obs), factor, _median(before), _median(after),
                           sum(abs(e) <= 0.25 for e in before),
                           sum(abs(e) <= 0.25 for e in after)))  # fmt: skip
    timed: tuple[Timed, ...] = ()
    if times:
        timed = tuple(Timed.trusted(kind=o.kind, precision=o.precision, shape=o.shape,
                                    time_s=o.measured_s)
                      for o in observations if o.shape)  # fmt: skip
    cal = Calibration.trusted(format=SCHEMA, hardware=hw.name, factors=tuple(factors),
                              times=timed)  # fmt: skip
    return cal, rows


def _median(values: list[float]) -> float:
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
