"""The diff view-model: a DiffReport → display-ready tables (B against A). Everything
shown is computed here; templates only place it."""

from __future__ import annotations

from modelcost.analyses.diff import DiffReport, PhaseDiff, Verdict
from modelcost.base.record import Record
from modelcost.base.version import __version__
from modelcost.ir.report import PER_TOKEN, Report

from .bars import paired_bars_svg, waterfall_svg
from .escape import Markdown, md
from .palette import kind_color
from .table import Cell, Table, num
from .units import GIB, count, duration, fixed, pct, si, signed
from .view import Chart, roofline_axes, roofline_for

_TOTAL_LABELS = {
    "time_s": ("step time (ms)", lambda v: fixed(v * 1e3, 3)),
    "ms_per_token": (PER_TOKEN, lambda v: duration(v / 1e3)),
    "tokens_per_s": ("tokens/s", lambda v: fixed(v, 1)),
    "flops": ("FLOPs", si),
    "bytes": ("bytes", si),
    "mfu_bound": ("MFU bound", pct),
    "estimate_s": ("estimate (ms)", lambda v: fixed(v * 1e3, 3)),
    "memory": ("memory (GiB)", lambda v: fixed(v / GIB)),
    "params_total": ("parameters", count),
}


class DiffPhaseView(Record, frozen=True):
    heading: str
    a_label: str
    b_label: str
    totals: Table
    kinds: Table
    layers: Table
    ops: Table
    charts: tuple[Chart, ...]  # time by kind for A and B, and the waterfall of the change


class DiffView(Record, frozen=True):
    title: str
    subtitle: str
    phases: tuple[DiffPhaseView, ...]
    footer: str

    @property
    def charts(self) -> tuple[Chart, ...]:
        return tuple(c for p in self.phases for c in p.charts)


def _diff_charts(p: PhaseDiff, slug: str) -> tuple[Chart, ...]:
    """Time by op kind, A against B (the largest first), and the waterfall from A's step
    time to B's through each kind's change (the largest changes first)."""
    kinds = sorted(p.kinds, key=lambda c: -max(c.a or 0, c.b or 0))
    pairs = paired_bars_svg(
        [(c.key, c.a or 0.0, c.b or 0.0, kind_color(c.key)) for c in kinds],
        "time by op kind, A and B", f"A: {p.a.title}", f"B: {p.b.title}",
    )  # fmt: skip
    t = next(c for c in p.totals if c.key == "time_s")
    moved = [(c.key, (c.b or 0.0) - (c.a or 0.0)) for c in p.kinds]  # new or gone: from 0
    steps = [(k, d, kind_color(k)) for k, d in sorted(moved, key=lambda kd: -abs(kd[1])) if d]
    # a step's time is the sum of its kinds' unless collectives overlap or a pipeline
    # bubble adds to it: that remainder is a step of its own
    rest = (t.b or 0.0) - (t.a or 0.0) - sum(d for _, d, _ in steps)
    if abs(rest) > 1e-9 * max(t.a or 0.0, t.b or 0.0, 1e-30):
        steps.append(("overlap and bubble", rest, "#8a94a6"))
    fall = waterfall_svg(t.a or 0.0, steps, t.b or 0.0, "from A's step time to B's")
    return (
        Chart(f"{slug}-kinds", f"Time by op kind, A and B ({slug})", pairs),
        Chart(f"{slug}-waterfall", f"From A to B ({slug})", fall),
    )


def _fit(cell: Cell, side) -> Cell:
    """A memory cell, marked where it exceeds the side's device."""
    if side.fits:
        return cell
    return Cell(f"{cell.text} (does not fit in {side.capacity / GIB:,.0f})", cell.sort)


def _rel(c) -> Cell:
    if c.rel is None:
        return Cell("new" if c.a is None else ("gone" if c.b is None else "n/a"), 0.0)
    return Cell(f"{c.rel * 100:+.1f}%", c.rel)


def _time_table(id_: str, label: str, changes, top: int | None = None) -> Table:
    shown = sorted(changes, key=lambda c: -abs(c.delta or 0))[:top]
    # ms to three places, or µs for the whole table where some time would read 0.000 ms
    values = [abs(v) for c in shown for v in (c.a, c.b, c.delta) if v]
    unit, scale = ("µs", 1e6) if values and min(values) < 0.5e-6 else ("ms", 1e3)

    def at(v: float | None) -> Cell:
        return Cell("—", -1.0) if v is None else num(fixed(v * scale, 3), v)

    rows = tuple(
        (
            Cell(c.key),
            at(c.a),
            at(c.b),
            Cell("—", 0.0) if c.delta is None else num(f"{c.delta * scale:+,.3f}", c.delta),
            _rel(c),
        )
        for c in shown
    )
    return Table(
        id_,
        (label, f"A ({unit})", f"B ({unit})", f"change ({unit})", "change"),
        rows,
        (False, True, True, True, True),
    )


def _side_rooflines(a: Report, b: Report, slug: str) -> tuple[Chart, ...]:
    """Each side's roofline on the same axes."""
    axes = roofline_axes([a, b])
    return tuple(
        Chart(
            f"{slug}-roofline-{side.lower()}",
            f"Roofline, {side}: {r.model.title} ({slug})",
            roofline_for(r, axes),
        )
        for side, r in (("A", a), ("B", b))
    )


def build_diff_view(
    d: DiffReport, sides: tuple[list[Report], list[Report]] | None = None
) -> DiffView:
    """The diff's tables and charts; with the two sides' reports, also each phase's two
    rooflines on one set of axes."""
    phases = []
    for i, p in enumerate(d.phases):
        rows = []
        for c in p.totals:
            label, fmt = _TOTAL_LABELS[c.key]
            if c.delta is None:
                delta = ""
            elif c.key == "mfu_bound":  # the change of a percentage, in points
                delta = f"{c.delta * 100:+.1f} pt"
            else:
                delta = signed(fmt(abs(c.delta)), c.delta < 0)
            a, b = num(fmt(c.a), c.a), num(fmt(c.b), c.b)
            if c.key == "memory":  # a side that does not fit says so beside its figure
                a, b = _fit(a, p.a), _fit(b, p.b)
            row = (Cell(label), a, b, Cell(delta, c.delta))
            rows.append((*row, _rel(c)))
        totals = Table(
            f"diff-totals-{i}",
            ("", "A", "B", "change", "change (%)"),
            tuple(rows),
            (False, True, True, True, True),
        )
        phases.append(
            DiffPhaseView(
                heading=f"{p.a.phase}" if p.a.phase == p.b.phase else f"{p.a.phase} vs {p.b.phase}",
                a_label=p.a.label,
                b_label=p.b.label,
                totals=totals,
                kinds=_time_table(f"diff-kinds-{i}", "op kind", p.kinds),
                layers=_time_table(f"diff-layers-{i}", "layer group", p.layers),
                ops=_time_table(f"diff-ops-{i}", "op (all copies)", p.ops),
                charts=_diff_charts(
                    p, slug := p.a.phase if p.a.phase == p.b.phase else f"phase-{i}"
                )
                + (_side_rooflines(sides[0][i], sides[1][i], slug) if sides else ()),
            )
        )
    first = d.phases[0]
    return DiffView(
        title=f"{first.a.title} vs {first.b.title}",
        subtitle="B relative to A; positive changes are increases. Times are roofline times "
        "for one step on one device.",
        phases=tuple(phases),
        footer=f"modelcost {__version__}",
    )


GATE_TOP = 5  # rows of each table in a pull-request summary


class GatePhaseView(Record, frozen=True):
    headline: Markdown  # `**prefill** step time 12.345 ms → 70.123 ms (**+468.0%**)`
    kinds: Table
    layers: Table


class GateView(Record, frozen=True):
    """A diff as a pull-request comment: the headline change per phase, the top
    changed kinds and layers, and the gate's verdict."""

    title: str
    sides: str
    verdict: str  # `✅ …` or `❌ …`; without a gate, the change alone
    phases: tuple[GatePhaseView, ...]
    footer: str


def _headline(p: PhaseDiff) -> Markdown:
    t = next(c for c in p.totals if c.key == "time_s")
    rel = "" if t.rel is None else f" (**{t.rel * 100:+.1f}%**)"
    name = p.a.phase if p.a.phase == p.b.phase else f"{p.a.phase} vs {p.b.phase}"
    return Markdown(f"**{md(name)}** step time {duration(t.a or 0)} → {duration(t.b or 0)}{rel}")


def build_gate_view(d: DiffReport, verdict: Verdict) -> GateView:
    first = d.phases[0]
    mark = "" if verdict.threshold is None else ("✅ " if verdict.passed else "❌ ")
    return GateView(
        title=f"{first.a.title} → {first.b.title}",
        sides=f"A: {first.a.title} on {first.a.hardware} · B: {first.b.title} on "
        f"{first.b.hardware}",
        verdict=f"{mark}{verdict.message}",
        phases=tuple(
            GatePhaseView(
                headline=_headline(p),
                kinds=_time_table(f"gate-kinds-{i}", "op kind", p.kinds, GATE_TOP),
                layers=_time_table(f"gate-layers-{i}", "layer group", p.layers, GATE_TOP),
            )
            for i, p in enumerate(d.phases)
        ),
        footer=f"roofline times, one device · modelcost {__version__}",
    )
