"""The diff view-model: a DiffReport → display-ready tables (B against A). Everything
shown is computed here; templates only place it."""

from __future__ import annotations

from .. import __version__
from ..diff import DiffReport, PhaseDiff, Verdict
from ..record import Record
from .escape import Markdown, md
from .table import Cell, Table, num
from .units import count, duration, fixed, pct, si, signed

_TOTAL_LABELS = {
    "time_s": ("step time (ms)", lambda v: fixed(v * 1e3, 3)),
    "ms_per_token": ("time per token", lambda v: duration(v / 1e3)),
    "tokens_per_s": ("tokens/s", lambda v: fixed(v, 1)),
    "flops": ("FLOPs", si),
    "bytes": ("bytes", si),
    "mfu_bound": ("MFU bound", pct),
    "estimate_s": ("estimate (ms)", lambda v: fixed(v * 1e3, 3)),
    "memory": ("memory (GB)", lambda v: fixed(v / 1e9)),
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


class DiffView(Record, frozen=True):
    title: str
    subtitle: str
    phases: tuple[DiffPhaseView, ...]
    footer: str


def _rel(c) -> Cell:
    if c.rel is None:
        return Cell("new" if c.a is None else ("gone" if c.b is None else "n/a"), 0.0)
    return Cell(f"{c.rel * 100:+.1f}%", c.rel)


def _time_table(id_: str, label: str, changes, top: int | None = None) -> Table:
    def ms(v: float | None) -> Cell:
        return Cell("—", -1.0) if v is None else num(fixed(v * 1e3, 3), v)

    rows = tuple(
        (
            Cell(c.key),
            ms(c.a),
            ms(c.b),
            Cell("—", 0.0) if c.delta is None else num(f"{c.delta * 1e3:+,.3f}", c.delta),
            _rel(c),
        )
        for c in sorted(changes, key=lambda c: -abs(c.delta or 0))[:top]
    )
    return Table(
        id_,
        (label, "A (ms)", "B (ms)", "change (ms)", "change"),
        rows,
        (False, True, True, True, True),
    )


def build_diff_view(d: DiffReport) -> DiffView:
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
            row = (Cell(label), num(fmt(c.a), c.a), num(fmt(c.b), c.b), Cell(delta, c.delta))
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
    verdict: str  # `✅ …` or `❌ …`
    phases: tuple[GatePhaseView, ...]
    footer: str


def _headline(p: PhaseDiff) -> Markdown:
    t = next(c for c in p.totals if c.key == "time_s")
    rel = "" if t.rel is None else f" (**{t.rel * 100:+.1f}%**)"
    name = p.a.phase if p.a.phase == p.b.phase else f"{p.a.phase} vs {p.b.phase}"
    return Markdown(f"**{md(name)}** step time {duration(t.a or 0)} → {duration(t.b or 0)}{rel}")


def build_gate_view(d: DiffReport, verdict: Verdict) -> GateView:
    first = d.phases[0]
    mark = "✅" if verdict.passed else "❌"
    return GateView(
        title=f"{first.a.title} → {first.b.title}",
        sides=f"A: {first.a.title} on {first.a.hardware} · B: {first.b.title} on "
        f"{first.b.hardware}",
        verdict=f"{mark} {verdict.message}",
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
