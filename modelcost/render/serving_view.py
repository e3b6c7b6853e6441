"""The serving pages' view-models: the latency-throughput charts from each layout's
curve and the tables' cells (the template only formats)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from modelcost.analyses.serving_mix import MixServing
from modelcost.analyses.serving_records import Serving
from modelcost.analyses.serving_search import Search

from .charts import Series, line_svg
from .sweep_view import TablePage


def _meets(s: Serving, tpot: float, ttft: float) -> bool:
    return (s.tpot_target_s is None or tpot <= s.tpot_target_s) and (
        s.ttft_target_s is None or ttft <= s.ttft_target_s
    )


def charts(labelled: list[tuple[str, Serving]]) -> tuple[tuple[str, str], ...]:
    """TPOT and TTFT against output tokens/s per device along each curve (concurrency
    doubling), filled where the targets are met, with the targets as lines."""
    first = labelled[0][1]
    out = []
    for name, figure, target in (("tpot", "tpot_s", first.tpot_target_s),
                                 ("ttft", "ttft_s", first.ttft_target_s)):  # fmt: skip
        series = [
            Series(
                label=label,
                points=tuple((p.output_tokens_per_s_device, getattr(p, figure) * 1e3)
                             for p in s.curve),
                marked=tuple(_meets(s, p.tpot_s, p.ttft_s) for p in s.curve),
            )
            for label, s in labelled
        ]  # fmt: skip
        lines = ((f"{name.upper()} target {target * 1e3:g} ms", target * 1e3),) if target else ()
        svg = line_svg(series, "output tokens/s per device", f"{name.upper()} ms", name, lines)
        out.append((f"{name.upper()} against throughput as concurrency doubles"
                    + (" (filled: meets the targets)" if first.tpot_target_s or
                       first.ttft_target_s else ""), svg))  # fmt: skip
    return tuple(out)


class _Laid(Protocol):
    @property
    def devices(self) -> int: ...
    @property
    def layout(self) -> str: ...


def layout_label(s: _Laid) -> str:
    """`4 devices (tp 4)`."""
    devices = f"{s.devices:,} device{'s' if s.devices != 1 else ''}"
    return devices + (f" ({s.layout})" if s.layout else "")


def serving_page(s: Serving, facts: list[tuple[str, str]]) -> TablePage:
    return TablePage(
        title=f"{s.model_title} on {s.hardware_title}: {s.isl:,} in, {s.osl:,} out",
        headers=("", "value"),
        rows=tuple(facts),
        charts=charts([(layout_label(s), s)]),
        skipped=(),
        table_heading="Figures",
    )


class _Point(Protocol):
    @property
    def devices(self) -> int: ...
    @property
    def layout(self) -> str: ...
    @property
    def concurrency(self) -> int: ...
    @property
    def output_tokens_per_s_device(self) -> float: ...
    @property
    def output_tokens_per_s_user(self) -> float: ...
    @property
    def meets_targets(self) -> bool: ...
    @property
    def front(self) -> bool: ...
    @property
    def chosen(self) -> bool: ...


P = TypeVar("P", bound=_Point)


def _others(_: object) -> str:
    return "other points"


def front_chart(points: Sequence[P], tpot_target: float | None,
                group: Callable[[P], str] = _others) -> str:  # fmt: skip
    """Output tokens/s per user (1/TPOT) against output tokens/s per device at every
    point tried: the Pareto front joined, the other points hollow (a series per
    `group`: "other points", or each mode's), the chosen point a series of its own."""
    front = sorted(
        (p for p in points if p.front),
        key=lambda p: (p.output_tokens_per_s_device, -p.output_tokens_per_s_user),
    )
    chosen = [p for p in points if p.chosen]

    def xy(ps) -> tuple[tuple[float, float], ...]:
        return tuple((p.output_tokens_per_s_device, p.output_tokens_per_s_user) for p in ps)

    series = [Series(label="Pareto front", points=xy(front),
                     marked=tuple(p.meets_targets for p in front))]  # fmt: skip
    groups: dict[str, list[P]] = {}
    for p in points:
        if not p.front:
            groups.setdefault(group(p), []).append(p)
    for label, rest in groups.items():
        series.append(Series(label=label, points=xy(rest),
                             marked=tuple(False for _ in rest), joined=False))  # fmt: skip
    for p in chosen:
        series.append(Series(label=f"chosen: {layout_label(p)} at {p.concurrency:,}",
                             points=xy([p]), marked=(True,), joined=False))  # fmt: skip
    lines = ((f"TPOT target {tpot_target * 1e3:g} ms", 1 / tpot_target),) if tpot_target else ()
    return line_svg(series, "output tokens/s per device", "output tokens/s per user", "front",
                    lines)  # fmt: skip


def front_heading(objective: str) -> str:
    return ("Pareto front: output tokens/s per user against per device (filled: meets the "
            f"targets; {objective})")  # fmt: skip


def search_page(found: Search, title: str, headers, rows, objective: str = "") -> TablePage:
    front = (
        (
            (
                front_heading(objective),
                front_chart(found.points, found.tried[0].tpot_target_s if found.tried else None),
            ),
        )
        if found.points
        else ()
    )
    return TablePage(
        title=title,
        headers=tuple(headers),
        rows=tuple(rows),
        charts=front + (charts([(layout_label(s), s) for s in found.tried]) if found.tried else ()),
        skipped=found.refused,
        table_heading="Layouts tried",
        skipped_heading="Not tried",
    )


def mix_page(mix: MixServing, title: str, headers, rows) -> TablePage:
    labelled = [(f"{s.isl:,} / {s.osl:,}", s) for s in mix.classes]
    return TablePage(title=title, headers=tuple(headers), rows=tuple(rows),
                     charts=charts(labelled), skipped=(),
                     table_heading="Request classes")  # fmt: skip
