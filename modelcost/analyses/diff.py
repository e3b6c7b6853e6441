"""Diff: two reports (two models, or one model on two targets, dtypes or workloads) →
the change in totals, per op kind, per layer group and per matched op."""

from __future__ import annotations

from collections.abc import Callable

from modelcost.base.frozen import Frozen
from modelcost.ir.report import REPORT_SCHEMA_VERSION, Report


class Change(Frozen):
    """One quantity on both sides. `rel` is (b − a) / a; None where a side lacks it."""

    key: str
    a: float | None
    b: float | None
    delta: float | None
    rel: float | None


class Side(Frozen):
    model: str
    title: str
    hardware: str
    phase: str
    batch: int
    seq: int
    context: int
    shape: str
    conventions: str
    peak: str
    fits: bool  # its memory fits the device
    capacity: float  # the device's memory, bytes

    @property
    def label(self) -> str:
        return f"{self.title} on {self.hardware} ({self.phase}, batch {self.batch}, {self.shape})"


class PhaseDiff(Frozen):
    a: Side
    b: Side
    totals: tuple[Change, ...]
    kinds: tuple[Change, ...]
    layers: tuple[Change, ...]
    ops: tuple[Change, ...]

    @property
    def time_change(self) -> float:
        return next(c.rel for c in self.totals if c.key == "time_s") or 0.0


class DiffReport(Frozen):
    schema_version: int = REPORT_SCHEMA_VERSION
    phases: tuple[PhaseDiff, ...]


def change(key: str, a: float | None, b: float | None) -> Change:
    delta = None if a is None or b is None else b - a
    rel = None if delta is None or not a else delta / a
    return Change(key=key, a=a, b=b, delta=delta, rel=rel)


def _side(r: Report) -> Side:
    w = r.workload
    return Side(
        model=r.model.name, title=r.model.title, hardware=r.hardware.title, phase=w.phase,
        batch=w.batch, seq=w.seq, context=w.context, shape=w.label, conventions=w.conventions,
        peak=r.hardware.peak, fits=r.totals.memory.fits, capacity=r.totals.memory.capacity,
    )  # fmt: skip


def _matched(a: dict[str, float], b: dict[str, float]) -> tuple[Change, ...]:
    keys = list(a) + [k for k in b if k not in a]
    return tuple(change(k, a.get(k), b.get(k)) for k in keys)


def _layers(a: Report, b: Report) -> tuple[Change, ...]:
    """Layer groups matched by where they sit in the stack (`layers.0`, `layers.3`), not
    by their block's name: two stacks that differ only in what their blocks are called
    match, and the label names both blocks where they differ."""
    blocks_b = {g.group: g.block for g in b.layers}
    out = []
    for g in a.layers:
        other = blocks_b.get(g.group)
        label = g.block if other in (None, g.block) else f"{g.block} → {other}"
        out.append((g.group, f"{g.group} ({label})"))
    names = dict(out)
    a_times = {names[g.group]: g.time_s for g in a.layers}
    b_times = {names.get(g.group, f"{g.group} ({g.block})"): g.time_s for g in b.layers}
    return _matched(a_times, b_times)


TOTALS: tuple[tuple[str, Callable[[Report], float]], ...] = (
    ("time_s", lambda r: r.totals.time_s),
    ("ms_per_token", lambda r: r.totals.per_token.ms_per_token),
    ("tokens_per_s", lambda r: r.totals.per_token.tokens_per_s),
    ("flops", lambda r: r.totals.flops),
    ("bytes", lambda r: r.totals.bytes),
    ("mfu_bound", lambda r: r.totals.mfu_bound),
    ("memory", lambda r: r.totals.memory.total),
    ("params_total", lambda r: float(r.model.params_total)),
)


# with --estimate kernels: the step as the kernels run it
ESTIMATED: tuple[tuple[str, Callable[[Report], float | None]], ...] = (
    ("estimate_s", lambda r: r.totals.estimate_s),
)


def diff_reports(a: Report, b: Report) -> PhaseDiff:
    """Layer groups are matched by their place in the stack; ops by name."""
    return PhaseDiff(
        a=_side(a),
        b=_side(b),
        totals=tuple(change(k, f(a), f(b)) for k, f in TOTALS)
        + tuple(
            change(k, f(a), f(b)) for k, f in ESTIMATED if f(a) is not None or f(b) is not None
        ),
        kinds=_matched({k.kind: k.time_s for k in a.kinds}, {k.kind: k.time_s for k in b.kinds}),
        layers=_layers(a, b),
        ops=_matched(
            {o.name: o.total_time_s for o in a.ops}, {o.name: o.total_time_s for o in b.ops}
        ),
    )


def diff(a_reports: list[Report], b_reports: list[Report]) -> DiffReport:
    return DiffReport(
        phases=tuple(diff_reports(a, b) for a, b in zip(a_reports, b_reports, strict=True))
    )


class Verdict(Frozen):
    """A diff against a threshold (`--fail-above`): the phase whose total time grew the
    most, by how much, and whether that passes. The CLI's exit code and every rendered
    verdict come from here."""

    threshold: float | None  # percent; None: no gate
    phase: str
    growth: float  # relative change of the worst phase's step time (0.12 = +12%)
    passed: bool

    @property
    def message(self) -> str:
        grew = f"{self.phase} time {self.growth * 100:+.1f}%"
        if self.threshold is None:
            return f"{grew} (no gate: --fail-above PCT sets one)"
        relation = "within" if self.passed else "more than"
        return f"{grew}: {relation} --fail-above {self.threshold:g}%"


def gate(d: DiffReport, threshold: float | None) -> Verdict:
    """The verdict of `--fail-above threshold` (percent) on diff `d`."""
    worst = max(d.phases, key=lambda p: p.time_change)
    growth = worst.time_change
    passed = threshold is None or growth * 100 <= threshold
    return Verdict(threshold=threshold, phase=worst.a.phase, growth=growth, passed=passed)
