"""Sweeps: every combination of specs, targets, phases, workload and layout values,
one row per point, each row the rollup of that point's report.

A point whose layout the spec cannot run (heads that do not split, a batch that does
not divide) is left out and said why; a point that does not fit in memory is kept and
marked. Rows are built from `compile_report` and nothing else, so a row is exactly what
`modelcost compile` says of the same point.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from . import spec as ir
from .bulk import in_bulk
from .compile import compile_report
from .errors import SpecError
from .frozen import Frozen
from .graph import DEFAULT_BATCH, Parallel, Phase, Workload
from .hardware import Hardware, load_hardware
from .options import DEFAULT_PEAK, PeakMode
from .perfmodel import Conventions
from .report import Bound, Report
from .resolve import load_spec

# the layout fields a sweep may vary (sp is a flag: one value for the whole sweep)
LAYOUT_AXES = ("tp", "cp", "dp", "ep", "zero", "pp", "microbatches", "overlap", "recompute")


class SweepRow(Frozen):
    """One point: what it is, and its report's rollup."""

    model: str
    hardware: str
    phase: str
    batch: int
    seq: int
    context: int
    layout: str
    devices: int
    step_ms: float
    ms_per_token: float
    tokens_per_s: float
    tokens_per_s_device: float
    bound: Bound
    mfu_bound: float
    memory: float  # bytes per device
    capacity: float
    fits: bool


class Sweep(Frozen):
    """A sweep's rows, and the points left out with why. In a notebook it shows itself
    as its HTML page (charts and table)."""

    rows: tuple[SweepRow, ...]
    skipped: tuple[str, ...] = ()  # points left out, and why

    def to_records(self) -> list[dict]:
        """One plain dict per row, fields in order."""
        return [r.model_dump() for r in self.rows]

    def to_csv(self) -> str:
        from .render.sweep_format import render_sweep

        return render_sweep(self, "csv")

    def to_dataframe(self):  # -> pandas.DataFrame; pandas is optional
        """The rows as a pandas DataFrame (needs pandas, which modelcost does not)."""
        try:
            import pandas as pd  # type: ignore[import-untyped,import-not-found,unused-ignore]
        except ImportError:
            raise ImportError("to_dataframe needs pandas: pip install pandas") from None
        return pd.DataFrame.from_records(self.to_records(), columns=list(SweepRow.model_fields))

    def _repr_html_(self) -> str:
        from .render.sweep_format import render_sweep

        return render_sweep(self, "html")

    def _repr_markdown_(self) -> str:
        from .render.sweep_format import render_sweep

        return render_sweep(self, "md")


def row(r: Report) -> SweepRow:
    """A point's row, read off its report."""
    w, t = r.workload, r.totals
    return SweepRow.trusted(
        model=r.model.name,
        hardware=r.hardware.name,
        phase=w.phase,
        batch=w.batch,
        seq=w.seq,
        context=w.context,
        layout=w.layout.label,
        devices=w.layout.devices,
        step_ms=t.per_token.ms_per_step,
        ms_per_token=t.per_token.ms_per_token,
        tokens_per_s=t.per_token.tokens_per_s,
        tokens_per_s_device=t.per_token.tokens_per_s_device,
        bound=t.bound,
        mfu_bound=t.mfu_bound,
        memory=t.memory.total,
        capacity=t.memory.capacity,
        fits=t.memory.fits,
    )


def _many(value) -> list:
    return list(value) if isinstance(value, list | tuple | range) else [value]


class _Point(Frozen):
    """One point of a sweep, as a worker process receives it."""

    spec: int  # index into the sweep's specs
    hw: int  # and targets
    phase: Phase
    batch: int
    seq: int | None
    context: int | None
    layout: dict[str, Any]
    varied: str  # the layout values worth naming when the point is skipped


def sweep(
    specs,
    targets,
    phases=Phase.decode,
    batch=DEFAULT_BATCH,
    seq=None,
    context=None,
    layout: dict[str, Sequence] | None = None,
    sp: bool = False,
    conventions: Conventions = Conventions.modelcost,
    peak: PeakMode = DEFAULT_PEAK,
    bandwidth: PeakMode = DEFAULT_PEAK,
    jobs: int = 1,
) -> Sweep:
    """Every combination, in the order the values were given (specs outermost). Each of
    specs (Spec objects or `.model` paths), targets (Hardware or names), phases, batch,
    seq and context is one value or a list; `layout` maps tp, cp, dp, ep, zero, pp,
    microbatches, overlap and recompute to values; `jobs` worker processes share the
    points (the rows come back in the same order). `modelcost.sweep([...], "h200",
    batch=range(1, 65))` from Python; `modelcost sweep` from the shell."""
    specs = [s if isinstance(s, ir.Spec) else load_spec(s) for s in _many(specs)]
    targets = [h if isinstance(h, Hardware) else load_hardware(h) for h in _many(targets)]
    phases = [Phase(p) for p in _many(phases)]
    batch, seq, context = _many(batch), _many(seq), _many(context)
    unknown = sorted(set(layout or {}) - set(LAYOUT_AXES))
    if unknown:
        raise ValueError(f"layout has no {', '.join(unknown)}; it takes {', '.join(LAYOUT_AXES)}")
    axes = {name: _many((layout or {}).get(name, getattr(Parallel(), name)))
            for name in LAYOUT_AXES}  # fmt: skip
    points: list[_Point] = []
    for (i, _), (j, _), phase in itertools.product(enumerate(specs), enumerate(targets), phases):
        lengths = (
            [(None, c) for c in context] if phase is Phase.decode else [(s, None) for s in seq]
        )
        for b, (s, c), *values in itertools.product(batch, lengths, *axes.values()):
            point = dict(zip(LAYOUT_AXES, values, strict=True))
            varied = ", ".join(f"{k} {v}" for k, v in point.items() if len(axes[k]) > 1
                               or v != getattr(Parallel(), k))  # fmt: skip
            points.append(_Point.trusted(spec=i, hw=j, phase=phase, batch=b, seq=s, context=c,
                                         layout=point, varied=varied))  # fmt: skip
    work = (specs, targets, sp, conventions, peak, bandwidth)
    if jobs <= 1 or len(points) < 2 * jobs:
        results = _run(work, points)
    else:
        from concurrent.futures import ProcessPoolExecutor

        size = -(-len(points) // jobs)
        chunks = [points[k : k + size] for k in range(0, len(points), size)]
        with ProcessPoolExecutor(jobs) as pool:
            results = [r for part in pool.map(_run, [work] * len(chunks), chunks) for r in part]
    rows = tuple(r for r in results if isinstance(r, SweepRow))
    skipped = tuple(r for r in results if isinstance(r, str))
    return Sweep.trusted(rows=rows, skipped=skipped)


@in_bulk
def _run(work, points: list[_Point]) -> list[SweepRow | str]:
    """Each point's row, or why it was skipped."""
    specs, targets, sp, conventions, peak, bandwidth = work
    out: list[SweepRow | str] = []
    for p in points:
        spec, hw = specs[p.spec], targets[p.hw]
        try:
            w = Workload(p.phase, p.batch, p.seq, p.context, parallel=Parallel(**p.layout, sp=sp))
            out.append(row(compile_report(spec, hw, w, conventions, peak, bandwidth, advise=False)))
        except (SpecError, ValueError) as err:
            message = err.message if isinstance(err, SpecError) else str(err)
            out.append(f"{spec.name} on {hw.name}, {p.phase.value} batch {p.batch}"
                       f"{', ' + p.varied if p.varied else ''}: {message}")  # fmt: skip
    return out
