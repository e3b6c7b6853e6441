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
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from .errors import SpecError
from .estimate import Estimate, estimate
from .files import read_text
from .frozen import Frozen
from .hardware import Hardware
from .measured import DTYPE, check
from .perfmodel import GemmOp, OpRecord, SdpaOp, UnaryOp
from .record import Record
from .roofline import roof

SCHEMA: Literal["modelcost-calibration/1"] = "modelcost-calibration/1"


class Factor(Frozen):
    kind: str  # the perf-model kind: GEMM, SDPA, UnaryElementwise, ...
    precision: str | None = None  # None: every precision of the kind
    factor: float
    points: int = 0  # measurements it was fitted on


class Timed(Frozen):
    kind: str
    precision: str
    shape: dict[str, int | bool]  # the op's shape parameters it must match
    time_s: float


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
    """A calibration file, checked; for `hw`, it must be that hardware's."""
    name = str(path)
    text = read_text(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        line = text.splitlines()[err.lineno - 1] if text.splitlines() else ""
        raise SpecError(f"not JSON: {err.msg}", filename=name, line=err.lineno,
                        column=err.colno, source_line=line) from None  # fmt: skip
    try:
        cal = Calibration.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise SpecError(f"{where}: {first['msg']}", filename=name,
                        hint="modelcost calibrate writes this file") from None  # fmt: skip
    if hw is not None and cal.hardware != hw.name:
        raise SpecError(
            f"the calibration is for {cal.hardware}, the target is {hw.name}",
            filename=name,
            hint="calibrate on the target's own measurements",
        )
    return cal


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


def from_points(points: list[dict], hw: Hardware) -> list[Observation]:
    """Observations of the kernel-level points measured on `hw` (bandwidth points have
    no op to calibrate and are left out)."""
    out = []
    for p in points:
        if p["hardware"] != hw.name or p["kind"] not in ("gemm", "attention"):
            continue
        c = check(p)
        kind = "GEMM" if p["kind"] == "gemm" else "SDPA"
        prec = {"fp16": "fp16", "bf16": "bf16"}.get(p["precision"], p["precision"])
        shape = _point_shape(p)
        out.append(Observation(kind, prec, shape, c.roofline_s, c.estimate_s, c.measured_s))
    return out


def _point_shape(p: dict) -> dict:
    if p["kind"] == "gemm":
        return {"M": p["M"], "N": p["N"], "K": p["K"]}
    return {"B": p["B"], "N_Q": p["S_q"], "H_Q": p["H_q"], "N_KV": p["S_kv"],
            "H_KV": p["H_kv"], "causal": p["causal"]}  # fmt: skip


def from_tracelens(path: str | Path, hw: Hardware) -> list[Observation]:
    """Observations of one TraceLens perf-report CSV (its family from the file name)."""
    name = str(path)
    family = Path(path).stem.removesuffix("_fwd").removesuffix("_bwd")
    rows = list(csv.DictReader(read_text(path).splitlines()))
    out = []
    for number, row in enumerate(rows, 2):
        try:
            out.append(_tracelens_row(family, row, hw))
        except (KeyError, ValueError, IndexError) as err:
            raise SpecError(
                f"row {number - 1} of a TraceLens {family} report: {err}",
                filename=name,
                line=number,
                hint="a TraceLens perf-report CSV: `param:` columns, `Compute Spec`, "
                "`Kernel Time (µs)_median`",
            ) from None
    return out


def _tracelens_row(family: str, row: dict, hw: Hardware) -> Observation:
    time_us = row.get("Kernel Time (µs)_median") or row.get("Kernel Time (µs)_mean")
    time_us = time_us or row["Kernel Time (µs)"]
    measured = float(time_us) * 1e-6
    precision = row["Compute Spec"].split("_", 1)[1]
    dt = DTYPE.get(precision)
    if dt is None:
        raise ValueError(f"precision {precision!r} is not one modelcost costs")

    def p(key: str) -> int:
        return int(float(row[f"param: {key}"]))

    op: OpRecord
    if family == "GEMM":
        bias = row.get("param: bias", "False") == "True"
        op = GemmOp(p("M"), p("N"), p("K"), bias, p("B") if row.get("param: B") else 1,
                    a=dt, b=dt, out=dt, bias_dtype=dt)  # fmt: skip
        return _observe(op, op.flops(), op.bytes(), measured, hw)
    if family == "SDPA":
        op = SdpaOp(p("B"), p("N_Q"), p("H_Q"), p("N_KV"), p("H_KV"), p("d_h_qk"),
                    p("d_h_v"), causal=row["param: causal"] == "True", act=dt, kv=dt)  # fmt: skip
        return _observe(op, op.flops(), op.bytes(), measured, hw)
    # a family without a shape we rebuild: its FLOPs and bytes as TraceLens counted them
    flops = float(row["GFLOPS_first"]) * 1e9
    nbytes = float(row["Data Moved (MB)_first"]) * 1024 * 1024  # TraceLens's MB are MiB
    op = UnaryOp((1,), "copy", dt, dt)  # stands for the family's memory-bound kernel
    obs = _observe(op, flops, nbytes, measured, hw)
    return Observation(family, precision, {}, obs.roofline_s, obs.estimate_s, measured)


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
