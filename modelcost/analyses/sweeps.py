"""Sweeps: every combination of specs, targets, phases, workload and layout values,
one row per point, each row the rollup of that point's report.

A point whose layout the spec cannot run (heads that do not split, a batch that does
not divide) is left out and said why; a point that does not fit in memory is kept and
marked. Rows are built from `compile_totals`, the totals `compile_report` puts in its
report, so a row is exactly what `modelcost compile` says of the same point; the points
of one layout and batch at several contexts (or sequence lengths) share one lowering
with the length as a variable (grid.py), which gives the very same totals.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import modelcost.language.spec as ir
from modelcost.base.bulk import in_bulk
from modelcost.base.errors import SpecError
from modelcost.base.frozen import Frozen
from modelcost.base.hooks import shown
from modelcost.base.record import Record
from modelcost.base.settings import (
    DEFAULT_ESTIMATE,
    DEFAULT_PEAK,
    MAX_POINTS,
    MAX_STREAMED,
    EstimateMode,
    PeakMode,
)
from modelcost.base.tabular import Tabular
from modelcost.estimate.costing import Costing, costing
from modelcost.estimate.engines import DEFAULT_ENGINE
from modelcost.ir.graph import DEFAULT_BATCH, OpGraph, Parallel, Phase, Shape, Workload
from modelcost.ir.report import Bound, Report, Totals
from modelcost.language.resolve import load_spec
from modelcost.lowering.validate import check_reads, for_phase
from modelcost.perfmodel import Conventions
from modelcost.roofline.compile import compile_totals
from modelcost.targets.hardware import Hardware, load_hardware

from .executors import Executor, in_order
from .grid import Figures, at_lengths, figures_of

if TYPE_CHECKING:
    from modelcost.estimate.calibration import Calibration

# the layout fields a sweep may vary (sp is a flag: one value for the whole sweep)
LAYOUT_AXES = ("tp", "cp", "dp", "ep", "etp", "zero", "pp", "vpp", "microbatches", "overlap",
               "recompute", "grads", "offload")  # fmt: skip
ENGINE_AXES = ("prefix", "chunk", "prompt")  # what a serving engine does to a step


class SweepRow(Frozen):
    """One point: what it is, and its report's rollup."""

    model: str
    hardware: str
    phase: str
    batch: int
    seq: int
    context: int
    prefix: int
    chunk: int
    prompt: int
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
    # --estimate kernels: the step as the kernels that would serve it run (estimate.py)
    estimate_ms: float | None = None


COLUMNS = tuple(SweepRow.model_fields)  # a row's fields in order: CSV's header
RowValues = tuple  # a row's values in COLUMNS' order (a streamed sweep writes them)


class Sweep(Tabular, Frozen):
    """A sweep's rows, and the points left out with why. In a notebook it shows itself
    as its HTML page (charts and table); `to_records`, `to_csv`, `to_dataframe` give
    the rows."""

    rows: tuple[SweepRow, ...]
    skipped: tuple[str, ...] = ()  # points left out, and why

    def records(self) -> list[dict]:
        return [r.model_dump() for r in self.rows]

    def _repr_html_(self) -> str:
        return shown(self, "html")

    def _repr_markdown_(self) -> str:
        return shown(self, "md")


def row(r: Report) -> SweepRow:
    """A point's row, read off its report."""
    w, lay = r.workload, r.workload.layout
    return _as_row(_values(r.model.name, r.hardware.name, w.phase, w.batch,
                           (w.prefix, w.chunk, w.prompt), lay.label, lay.devices,
                           figures_of(w.seq, w.context, r.totals)))  # fmt: skip


def point_row(graph: OpGraph, hw: Hardware, t: Totals) -> SweepRow:
    """A point's row from its graph and totals (`compile_totals`): what `row` reads off
    the report of the same point, without building the report."""
    return _as_row(point_values(graph, hw, t))


def point_values(graph: OpGraph, hw: Hardware, t: Totals) -> RowValues:
    """`point_row`'s values, in COLUMNS' order."""
    shape = graph.shape
    return _values(*shape_head(graph.facts.name, hw, shape),
                   figures_of(shape.seq, shape.n_kv, t))  # fmt: skip


def shape_head(
    model: str, hw: Hardware, shape: Shape
) -> tuple[str, str, str, int, tuple[int, int, int], str, int]:
    """What a row says of its point besides its figures: `_values`' leading arguments."""
    engine = (shape.prefix, shape.chunk, shape.prompt)
    return (
        model,
        hw.name,
        shape.phase.value,
        shape.batch,
        engine,
        shape.par.label,
        shape.par.devices,
    )


def _values(model, hardware, phase, batch, engine, layout, devices, f: Figures) -> RowValues:
    """A row's values in COLUMNS' order (a Figures' fields are the last ten's, in order)."""
    return (model, hardware, phase, batch, f.seq, f.context, *engine, layout, devices, *f[2:])


def _as_row(values: RowValues) -> SweepRow:
    """The row of values in COLUMNS' order."""
    return SweepRow.trusted(**named(values))


def named(values: RowValues) -> dict[str, Any]:
    """A row's values (COLUMNS' order) by their columns' names."""
    return dict(zip(COLUMNS, values, strict=True))


def _many(value, limit: int = MAX_POINTS) -> list:
    """One value, or a list, tuple or range of them, as a list: a list no longer than
    a sweep may be (SpecError), its length checked before it is made."""
    if not isinstance(value, list | tuple | range):
        return [value]
    try:
        length = len(value)
    except OverflowError:  # a range longer than an index can count
        length = limit + 1
    if length > limit:
        raise SpecError(f"{value!r:.60} has over {limit:,} values, the most a sweep takes",
                        filename="modelcost")  # fmt: skip
    return list(value)


def grid_size(
    specs: int,
    targets: int,
    phases: Sequence[Phase],
    axes: dict[str, Sequence],
) -> int:
    """The number of points of a sweep, from its axes' lengths, without making them:
    `axes` holds batch, seq, context, the engine axes (a prompt length only where a
    chunk is: ENGINE_AXES) and the layout axes."""
    chunks = set(axes["chunk"])
    engines = len(set(axes["prefix"])) * (len(chunks - {0}) * len(set(axes["prompt"]))
                                          + (0 in chunks))  # fmt: skip
    rest = math.prod(len(v) for k, v in axes.items() if k not in ("seq", "context", *ENGINE_AXES))
    lengths = sum(len(axes["context" if p is Phase.decode else "seq"]) for p in phases)
    return specs * targets * lengths * engines * rest


def _check_size(specs: int, targets: int, phases: Sequence[Phase], axes: dict,
                limit: int = MAX_POINTS) -> int:  # fmt: skip
    """The sweep's number of points; refused over `limit` before any is made, naming
    its axes."""
    size = grid_size(specs, targets, phases, axes)
    if size <= limit:
        return size
    named = {"specs": specs, "hw": targets, "phase": len(phases)}
    named |= {k: len(v) for k, v in axes.items()}
    varied = ", ".join(f"{k} {n:,}" for k, n in named.items() if n > 1)
    streamed = (" (streamed: --format csv, jsonl or parquet, up to "
                f"{MAX_STREAMED:,})" if limit < MAX_STREAMED else "")  # fmt: skip
    raise SpecError(f"the sweep has {size:,} points, over the {limit:,} a sweep takes"
                    f"{streamed} (values per axis: {varied})", filename="modelcost",
                    hint="sweep fewer values, or split it into several sweeps")  # fmt: skip


def _check_used(phases: Sequence[Phase], seq: list, context: list, axes: dict) -> None:
    """An option no chosen phase reads is refused, naming the phase that would (a
    --context of prefill points was silently ignored): validate.check_reads, the rule
    every command shares, over the sweep's values."""
    given: dict[str, object] = {}
    if seq != [None]:
        given["seq"] = _flag(seq)
    if context != [None]:
        given["context"] = _flag(context)
    if any(r != "none" for r in axes["recompute"]):
        given["recompute"] = _flag(axes["recompute"])
    if any(g != "fp32" for g in axes["grads"]):
        given["grads"] = _flag(axes["grads"])
    if any(axes["offload"]):
        given["offload"] = _flag(axes["offload"])
    if any(axes["zero"]):
        given["zero"] = _flag(axes["zero"])
    if any(m > 1 for m in axes["microbatches"]) and axes["pp"] == [1]:
        given["microbatches"] = _flag(axes["microbatches"])
    check_reads(phases, given, max(axes["dp"]) * max(axes["cp"]))


def _flag(values: list) -> str:
    """`128,256`: a swept option's values as typed, its first values where there are many."""
    return ",".join(map(str, values[:3])) + (",…" if len(values) > 3 else "")


def check_calibration(calibration: Calibration | None, targets: Sequence[Hardware]) -> None:
    """A calibration is one machine's: it applies to its own target's points or pages
    (the others get the estimate alone), and one for none of the targets is refused."""
    if calibration is None or any(h.name == calibration.hardware for h in targets):
        return
    raise SpecError(
        f"the calibration is {calibration.hardware}'s, and the targets are "
        f"{', '.join(h.name for h in targets)}",
        filename="modelcost",
        hint=f"add {calibration.hardware} to --hw, or calibrate on one of the targets",
    )


class _Point(Record, frozen=True):
    """One point of a sweep, as a worker process receives it."""

    spec: int  # index into the sweep's specs
    hw: int  # and targets
    phase: Phase
    batch: int
    seq: int | None
    context: int | None
    layout: tuple[Any, ...]  # each of LAYOUT_AXES's values
    engine: tuple[int, int, int]  # prefix, chunk, prompt

    @property
    def layout_fields(self) -> dict[str, Any]:
        """The layout by LAYOUT_AXES's names."""
        return dict(zip(LAYOUT_AXES, self.layout, strict=True))


class Skip(Record, frozen=True):
    """A point left out: which, and why."""

    point: str
    why: str

    @property
    def said(self) -> str:
        return f"{self.point}: {self.why}"


class SkipSummary:
    """Skipped points summed up by reason (the message with its numbers set aside, so
    `--tp 3` and `--tp 5` of one rule count together): its count and a first example."""

    def __init__(self) -> None:
        self.reasons: dict[str, tuple[int, Skip]] = {}

    def add(self, s: Skip) -> None:
        key = _NUMBER.sub("#", s.why)
        count, first = self.reasons.get(key, (0, s))
        self.reasons[key] = (count + 1, first)

    @property
    def total(self) -> int:
        return sum(count for count, _ in self.reasons.values())

    def lines(self) -> list[str]:
        """One line per reason: `N points: the first's reason (e.g. the first point)`."""
        return [f"{count:,} point{'s' if count > 1 else ''}: {first.why} (e.g. {first.point})"
                for count, first in self.reasons.values()]  # fmt: skip


_NUMBER = re.compile(r"\d[\d,]*(\.\d+)?")
_DEFAULT_LAYOUT = Parallel()


def _varied(layout: dict[str, Any], swept: frozenset[str]) -> str:
    """The layout values worth naming when a point is skipped: those the sweep varies
    or sets away from the default."""
    return ", ".join(f"{k} {v}" for k, v in layout.items()
                     if k in swept or v != getattr(_DEFAULT_LAYOUT, k))  # fmt: skip


class Plan(Record, frozen=True):
    """A sweep checked and ready to run: what each point is made of, and how many
    points there are (`grid_size`), before any is computed."""

    specs: tuple[ir.Spec, ...]
    targets: tuple[Hardware, ...]
    phases: tuple[Phase, ...]
    batch: tuple[int, ...]
    seq: tuple[int | None, ...]
    context: tuple[int | None, ...]
    engines: tuple[tuple[int, int, int], ...]  # (prefix, chunk, prompt)
    axes: tuple[tuple[Any, ...], ...]  # each of LAYOUT_AXES's values
    sp: bool
    how: Costing
    swept: frozenset[str]
    size: int

    def points(self) -> Iterator[_Point]:
        """Every point, in the order the values were given (specs outermost), one at a
        time: a sweep of millions holds none of them all."""
        for (i, _), (j, _), phase in itertools.product(
            enumerate(self.specs), enumerate(self.targets), self.phases
        ):
            lengths = (
                [(None, c) for c in self.context]
                if phase is Phase.decode
                else [(s, None) for s in self.seq]
            )
            for b, (s, c), e, *values in itertools.product(
                self.batch, lengths, self.engines, *self.axes
            ):
                yield _Point(i, j, phase, b, s, c, tuple(values), e)


def plan(
    specs,
    targets,
    phases=Phase.decode,
    batch=DEFAULT_BATCH,
    seq=None,
    context=None,
    layout: dict[str, Sequence] | None = None,
    sp: bool = False,
    engine: dict[str, Sequence] | None = None,
    conventions: Conventions = Conventions.modelcost,
    peak: PeakMode = DEFAULT_PEAK,
    bandwidth: PeakMode = DEFAULT_PEAK,
    estimate: EstimateMode = DEFAULT_ESTIMATE,
    calibration: Calibration | None = None,
    serving_engine: str = DEFAULT_ENGINE,
    limit: int = MAX_POINTS,
) -> Plan:
    """Check a sweep's values (`sweep`'s arguments) and count its points, refusing one
    of over `limit` points (MAX_POINTS for a sweep held in memory, MAX_STREAMED for
    one written as it runs) before any is made."""
    specs = [s if isinstance(s, ir.Spec) else load_spec(s) for s in _many(specs, limit)]
    targets = [h if isinstance(h, Hardware) else load_hardware(h)
               for h in _many(targets, limit)]  # fmt: skip
    phases = [Phase(p) for p in _many(phases, limit)]
    how = costing(conventions, peak, bandwidth, estimate, calibration, serving_engine)
    check_calibration(calibration, targets)
    batch, seq, context = _many(batch, limit), _many(seq, limit), _many(context, limit)
    unknown = sorted(set(layout or {}) - set(LAYOUT_AXES))
    if unknown:
        raise ValueError(f"layout has no {', '.join(unknown)}; it takes {', '.join(LAYOUT_AXES)}")
    axes = {name: _many((layout or {}).get(name, getattr(_DEFAULT_LAYOUT, name)), limit)
            for name in LAYOUT_AXES}  # fmt: skip
    swept = frozenset(k for k, values in axes.items() if len(values) > 1)
    unknown = sorted(set(engine or {}) - set(ENGINE_AXES))
    if unknown:
        raise ValueError(f"engine has no {', '.join(unknown)}; it takes {', '.join(ENGINE_AXES)}")
    engine_axes = {k: _many((engine or {}).get(k, 0), limit) for k in ENGINE_AXES}
    _check_used(phases, seq, context, axes)
    size = _check_size(len(specs), len(targets), phases,
                       {"batch": batch, "seq": seq, "context": context} | engine_axes | axes,
                       limit)  # fmt: skip
    # a prompt length belongs to a chunk: the points without one take none
    engines = list(dict.fromkeys(
        (prefix, chunk, prompt if chunk else 0) for prefix, chunk, prompt
        in itertools.product(*engine_axes.values())
    ))  # fmt: skip
    return Plan(tuple(specs), tuple(targets), tuple(phases), tuple(batch), tuple(seq),
                tuple(context), tuple(engines), tuple(tuple(v) for v in axes.values()), sp,
                how, swept, size)  # fmt: skip


CHUNK = 4096  # points a worker computes at a time (and, with --jobs, a task)
# the fewest points of one layout and batch that share a lowering (grid.py): measured on
# Llama 3 8B/70B, against each point on its own, at 8/16/32/64 lengths: decode 1.8×,
# 2.8×, 3.8×, 4.9× (its attention alone changes); prefill and training 0.7–0.9×, 1.0×,
# 1.4×, 1.1× (every GEMM changes with the sequence: only the lowering is shared)
MIN_LENGTHS = {Phase.decode: 8, Phase.prefill: 32, Phase.train: 32}


def run(
    p: Plan,
    jobs: int = 1,
    points: Iterable[_Point] | None = None,
    executor: Executor = "local",
    address: str | None = None,
) -> Iterator[SweepRow | Skip]:
    """Each point's row, or why it was skipped, in the plan's order (or `points`' own,
    some of the plan's), as they are computed (`row_values`)."""
    for r in row_values(p, jobs, points, executor, address):
        yield _as_row(r) if isinstance(r, tuple) else r


def row_values(
    p: Plan,
    jobs: int = 1,
    points: Iterable[_Point] | None = None,
    executor: Executor = "local",
    address: str | None = None,
) -> Iterator[RowValues | Skip]:
    """Each point's row's values (COLUMNS' order), or why it was skipped, in the plan's
    order (or `points`' own, some of the plan's), as they are computed, CHUNK points a
    task: in this process, `jobs` worker processes, or Ray tasks on the cluster at
    `address` (executors.py; a bounded number of chunks in flight, so the memory stays
    flat)."""
    work = (p.specs, p.targets, p.sp, p.how, p.swept)
    chunks = _chunks(iter(p.points() if points is None else points), CHUNK)
    if executor == "local" and p.size < 2 * jobs:  # too few points to share
        jobs = 1
    yield from in_order(_run, work, chunks, jobs, executor, address)


def _chunks(points: Iterator[_Point], size: int) -> Iterator[list[_Point]]:
    while chunk := list(itertools.islice(points, size)):
        yield chunk


def sweep(
    specs,
    targets,
    phases=Phase.decode,
    batch=DEFAULT_BATCH,
    seq=None,
    context=None,
    layout: dict[str, Sequence] | None = None,
    sp: bool = False,
    engine: dict[str, Sequence] | None = None,
    conventions: Conventions = Conventions.modelcost,
    peak: PeakMode = DEFAULT_PEAK,
    bandwidth: PeakMode = DEFAULT_PEAK,
    jobs: int = 1,
    estimate: EstimateMode = DEFAULT_ESTIMATE,
    calibration: Calibration | None = None,
    serving_engine: str = DEFAULT_ENGINE,
    executor: Executor = "local",
    address: str | None = None,
) -> Sweep:
    """Every combination, in the order the values were given (specs outermost). Each of
    specs (Spec objects or `.model` paths), targets (Hardware or names), phases, batch,
    seq and context is one value or a list; `layout` maps tp, cp, dp, ep, zero, pp, vpp,
    microbatches, overlap, recompute, grads and offload to values, `engine` prefix, chunk and prompt
    (what a serving engine does to a step: graph.Workload); `jobs` worker processes share the
    points (the rows come back in the same order); `estimate="kernels"` adds each row's
    kernel-aware estimate (`estimate_ms`), with a `calibration` on top of its own
    target's rows (check_calibration), an inference step's collectives as
    `serving_engine`'s custom all-reduce runs them. `modelcost.sweep([...], "h200",
    batch=range(1, 65))` from Python; `modelcost sweep` from the shell. At most
    MAX_POINTS points, held in memory: `plan` and `run` stream a larger one.
    `executor="ray"` computes the points as Ray tasks on the cluster at `address` (or a
    local one): executors.py."""
    found = plan(specs, targets, phases, batch, seq, context, layout, sp, engine, conventions,
                 peak, bandwidth, estimate, calibration, serving_engine)  # fmt: skip
    results = list(run(found, jobs, executor=executor, address=address))
    rows = tuple(r for r in results if isinstance(r, SweepRow))
    skipped = tuple(r.said for r in results if isinstance(r, Skip))
    return Sweep.trusted(rows=rows, skipped=skipped)


@in_bulk
def _run(work, points: list[_Point]) -> list[RowValues | Skip]:
    """Each point's row, or why it was skipped: the points of one layout and batch at
    several lengths all at once (grid.py), the others one by one."""
    groups: dict[tuple, list[int]] = {}
    for i, p in enumerate(points):
        n = p.context if p.phase is Phase.decode else p.seq
        key = ((p.spec, p.hw, p.phase, p.batch, p.engine, p.layout)
               if n is not None else (i,))  # fmt: skip
        groups.setdefault(key, []).append(i)
    out: list[RowValues | Skip | None] = [None] * len(points)
    for members in groups.values():
        found = _at_lengths(work, [points[i] for i in members])
        for i, result in zip(members, found, strict=True):
            out[i] = result
    return out  # type: ignore[return-value]


def _at_lengths(work, points: list[_Point]) -> list[RowValues | Skip]:
    """The rows of points that differ only in their length, lowered once when there are
    enough of them (grid.at_lengths), else each on its own (`_one`)."""
    specs, targets, sp, how, swept = work
    p = points[0]
    spec, hw = specs[p.spec], targets[p.hw]
    found = None
    if len(points) >= MIN_LENGTHS[p.phase]:
        try:
            base = _workload(p, sp)
        except (SpecError, ValueError):
            base = None
        if base is not None:
            lengths = [q.context if q.phase is Phase.decode else q.seq for q in points]
            found = at_lengths(spec, hw, base, lengths, how.on(hw.name),  # type: ignore[arg-type]
                               share=len(targets) > 1)  # fmt: skip
    if found is None:
        return [_one(work, q) for q in points]
    out: list[RowValues | Skip] = []
    shown: Shape | None = None  # the points one lowering serves share its shape: its head
    for q, r in zip(points, found, strict=True):
        if not isinstance(r, tuple):
            out.append(_skip(spec, hw, q, r, swept))
            continue
        shape, f = r
        if shape is not shown:
            shown, head = shape, shape_head(spec.name, hw, shape)
        out.append(_values(*head, f))
    return out


def _workload(p: _Point, sp: bool) -> Workload:
    """The point's workload, with what its phase reads of the layout (for_phase)."""
    par = Parallel(**p.layout_fields, sp=sp)
    w = Workload(p.phase, p.batch, p.seq, p.context, parallel=par, prefix=p.engine[0],
                 chunk=p.engine[1], prompt=p.engine[2])  # fmt: skip
    return for_phase(w)


def _one(work, p: _Point) -> RowValues | Skip:
    """A point's row's values, or why it was skipped, computed on its own."""
    specs, targets, sp, how, swept = work
    spec, hw = specs[p.spec], targets[p.hw]
    try:
        graph, t = compile_totals(spec, hw, _workload(p, sp), how.on(hw.name))
        return point_values(graph, hw, t)
    except (SpecError, ValueError) as err:
        return _skip(spec, hw, p, err, swept)


def _skip(spec: ir.Spec, hw: Hardware, p: _Point, err: SpecError | ValueError,
          swept: frozenset[str]) -> Skip:  # fmt: skip
    message = err.message if isinstance(err, SpecError) else str(err)
    varied = _varied(p.layout_fields, swept)
    extra = ", ".join(f"{k} {v}" for k, v in zip(ENGINE_AXES, p.engine, strict=True) if v)
    varied = ", ".join(x for x in (extra, varied) if x)
    return Skip(f"{spec.name} on {hw.name}, {p.phase.value} batch {p.batch}"
                f"{', ' + varied if varied else ''}", message)  # fmt: skip
