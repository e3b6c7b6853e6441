"""The sweep page's view-model: the table's cells and the three charts' series,
computed from the rows (the template only formats)."""

from __future__ import annotations

import math
from collections import defaultdict

from modelcost.analyses.sweeps import Sweep, SweepRow
from modelcost.base.record import Record
from modelcost.ir.report import PER_TOKEN

from .charts import PALETTE, Series, domain, line_svg
from .units import duration, fixed, held, pct


class TablePage(Record, frozen=True):
    """A page of charts above a table (templates/table_page.html.j2)."""

    title: str
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    charts: tuple[tuple[str, str], ...]  # (heading, svg)
    skipped: tuple[str, ...]
    table_heading: str = "Points"
    skipped_heading: str = "Skipped"
    # small multiples: (heading, ((caption, svg), ...)), drawn as a grid after `charts`
    facets: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()
    note: str = ""  # under the table heading (what of the rows the table shows)
    interactive: bool = False  # its charts' tooltips and legend buttons (templates/_chart.js.j2)


HEADERS = ("model", "hardware", "phase", "batch", "seq / context", "layout", "step",
           PER_TOKEN, "tokens/s", "tokens/s/device", "bound", "MFU bound",
           "memory/device", "fits")  # fmt: skip
ESTIMATE = "estimate"  # the column after `step` when the rows carry the kernels' estimate


def estimated(s: Sweep) -> bool:
    """Whether the sweep's rows carry the kernel-aware estimate (--estimate kernels)."""
    return any(r.estimate_ms is not None for r in s.rows)


def headers(with_estimate: bool) -> tuple[str, ...]:
    if not with_estimate:
        return HEADERS
    at = HEADERS.index("step") + 1
    return (*HEADERS[:at], ESTIMATE, *HEADERS[at:])


def row_cells(r: SweepRow, with_estimate: bool) -> tuple[str, ...]:
    """A row's cells under `headers(with_estimate)`."""
    out = cells(r)
    if not with_estimate:
        return out
    at = HEADERS.index("step") + 1
    shown = duration(r.estimate_ms / 1e3) if r.estimate_ms is not None else "—"
    return (*out[:at], shown, *out[at:])


def cells(r: SweepRow) -> tuple[str, ...]:
    length = f"context {r.context:,}" if r.phase == "decode" else f"seq {r.seq:,}"
    if r.prefix and not r.chunk:
        length += f" after {r.prefix:,}"
    if r.chunk:
        length += f", chunk {r.chunk:,} of {r.prompt:,}" + (
            f" after {r.prefix:,}" if r.prefix else ""
        )
    return (r.model, r.hardware, r.phase, f"{r.batch:,}", length, r.layout or "—",
            duration(r.step_ms / 1e3), duration(r.ms_per_token / 1e3),
            fixed(r.tokens_per_s, 1), fixed(r.tokens_per_s_device, 1), r.bound,
            pct(r.mfu_bound), f"{held(r.memory)} of {held(r.capacity)}",
            "yes" if r.fits else "NO")  # fmt: skip


MAX_SERIES = len(PALETTE)  # a chart's series: each its own colour, none repeated
MAX_TABLE_ROWS = 2_000  # rows the page's table lists (the CSV, JSON Lines: all)
MAX_LINE_POINTS = 64  # points a line draws, evenly spaced along it, the ends kept
FACET_SIZE = (520, 330)  # a small multiple's width and height


def _where(r: SweepRow) -> str:
    return " ".join(x for x in (r.model, r.hardware, r.layout) if x)


def _grouped(rows, key) -> dict[str, list[SweepRow]]:
    groups: dict[str, list[SweepRow]] = defaultdict(list)
    for r in rows:
        groups[key(r)].append(r)
    return groups


def pareto(rows: list[SweepRow]) -> set[int]:
    """Indices of the rows no other row beats on both throughput and latency (the step:
    a decode sequence waits one step for each output token): none other is at least as
    fast and at most as slow a step, and better in one. Sorted by throughput, falling,
    a row is beaten by a faster one whose step is no longer, or by one as fast whose
    step is shorter: n log n."""
    order = sorted(range(len(rows)), key=lambda i: (-rows[i].tokens_per_s, rows[i].step_ms))
    front: set[int] = set()
    faster = math.inf  # the shortest step of every row strictly faster
    k = 0
    while k < len(order):
        tps = rows[order[k]].tokens_per_s
        same = []
        while k < len(order) and rows[order[k]].tokens_per_s == tps:
            same.append(order[k])
            k += 1
        shortest = rows[same[0]].step_ms  # sorted: the group's shortest step first
        for i in same:
            step = rows[i].step_ms
            if step < faster and step == shortest:
                front.add(i)
        faster = min(faster, shortest)
    return front


def _spread(values: list, n: int) -> list:
    """At most `n` of the sorted distinct `values`, evenly spaced, the ends kept."""
    values = sorted(set(values))
    if len(values) <= n:
        return values
    return [values[round(i * (len(values) - 1) / (n - 1))] for i in range(n)]


def _thin(rows: list[SweepRow]) -> list[SweepRow]:
    """At most MAX_LINE_POINTS of a line's rows (in order), evenly spaced, the ends kept."""
    if len(rows) <= MAX_LINE_POINTS:
        return rows
    n = MAX_LINE_POINTS
    return [rows[round(i * (len(rows) - 1) / (n - 1))] for i in range(n)]


def _of(shown: int, whole: int, what: str) -> str:
    return f"{whole:,} {what}" if shown == whole else f"{shown} of {whole:,} {what}, evenly spaced"


def _facets(decode: list[SweepRow], key, label, x, y, marked, name: str, what: str,
            x_label: str, y_label: str, lines=None) -> tuple[tuple[str, str], ...]:  # fmt: skip
    """One chart per (model, hardware, layout), a series per value of `key` (`what`: at
    most MAX_SERIES of them, evenly spaced), every chart over one domain (shared
    axes)."""
    facets = _grouped(decode, _where)
    kept = {f: _spread([key(r) for r in rows], MAX_SERIES) for f, rows in facets.items()}
    series = {
        f: [Series(label=label(v), points=tuple((x(r), y(r)) for r in rs),
                   marked=tuple(marked(r) for r in rs))
            for v in kept[f] if (rs := _thin(sorted((r for r in rows if key(r) == v), key=x)))]
        for f, rows in facets.items()
    }  # fmt: skip
    longest = max(len([r for r in rows if key(r) == v]) for f, rows in facets.items()
                  for v in kept[f])  # fmt: skip
    every = [s for ss in series.values() for s in ss]
    caps = lines(decode) if lines else ()
    over = domain(every, caps)
    out = []
    for f, ss in series.items():
        whole = len({key(r) for r in facets[f]})
        caption = f"{f or 'one device'} ({_of(len(ss), whole, what)})"
        if longest > MAX_LINE_POINTS:
            caption += f"; {MAX_LINE_POINTS} points a line drawn, evenly spaced"
        svg = line_svg(ss, x_label, y_label, name, caps, *FACET_SIZE, over=over)
        out.append((caption, svg))
    return tuple(out)


def _capacities(rows: list[SweepRow]) -> tuple[tuple[str, float], ...]:
    return tuple(sorted({(f"{r.hardware} {held(r.capacity)}", r.capacity) for r in rows}))


def _fronts(decode: list[SweepRow]) -> tuple[str, str] | None:
    """Latency against throughput: each (model, hardware, layout)'s Pareto front of what
    fits, the MAX_SERIES − 1 with the most tokens/s, and the front of all of them."""
    fitting = [r for r in decode if r.fits]  # a point that does not fit is not served
    if not fitting:
        return None
    fronts = {}
    for f, rows in _grouped(fitting, _where).items():
        best = sorted((rows[i] for i in pareto(rows)), key=lambda r: r.tokens_per_s)
        fronts[f] = best
    shown = sorted(fronts, key=lambda f: -fronts[f][-1].tokens_per_s)[: MAX_SERIES - 1]
    series = [Series(label=f or "one device",
                     points=tuple((r.tokens_per_s, r.step_ms) for r in _thin(fronts[f])),
                     marked=tuple(False for _ in _thin(fronts[f]))) for f in shown]  # fmt: skip
    overall = _thin(sorted((fitting[i] for i in pareto(fitting)), key=lambda r: r.tokens_per_s))
    series.append(Series(label="front of all", points=tuple((r.tokens_per_s, r.step_ms)
                                                            for r in overall),
                         marked=tuple(True for _ in overall)))  # fmt: skip
    whole = len(fronts)
    which = (
        "each layout and target"
        if len(shown) == whole
        else f"the {len(shown)} of {whole:,} layouts and targets with the most tokens/s"
    )
    heading = (f"Latency against throughput: the Pareto front of what fits, {which} "
               "(filled: the front of all)")  # fmt: skip
    latency = "ms per step (per output token)"
    return heading, line_svg(series, "tokens/s", latency, "pareto")


def build_sweep_view(s: Sweep) -> TablePage:
    decode = [r for r in s.rows if r.phase == "decode"]
    charts: list[tuple[str, str]] = []
    facets: list[tuple[str, tuple[tuple[str, str], ...]]] = []
    if decode:
        if (front := _fronts(decode)) is not None:
            charts.append(front)
        facets.append(("Tokens/s against batch, a line per context (filled: fits in memory)",
                       _facets(decode, lambda r: r.context, lambda c: f"context {c:,}",
                               lambda r: r.batch, lambda r: r.tokens_per_s,
                               lambda r: r.fits, "throughput", "contexts", "batch",
                               "tokens/s")))  # fmt: skip
        facets.append(("Memory per device against context, a line per batch (filled: fits)",
                       _facets(decode, lambda r: r.batch, lambda b: f"batch {b:,}",
                               lambda r: r.context, lambda r: r.memory, lambda r: r.fits,
                               "memory", "batches", "context", "bytes per device",
                               _capacities)))  # fmt: skip
    with_estimate = estimated(s)
    shown = s.rows[:MAX_TABLE_ROWS]
    note = ("" if len(shown) == len(s.rows) else
            f"The first {len(shown):,} of {len(s.rows):,} rows: --format csv, jsonl or "
            "parquet write them all.")  # fmt: skip
    return TablePage(
        title=f"Sweep: {len(s.rows):,} points",
        headers=headers(with_estimate),
        rows=tuple(row_cells(r, with_estimate) for r in shown),
        charts=tuple(charts),
        skipped=s.skipped,
        facets=tuple(facets),
        note=note,
    )
