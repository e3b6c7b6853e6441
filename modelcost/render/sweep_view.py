"""The sweep page's view-model: the table's cells and the three charts' series,
computed from the rows (the template only formats)."""

from __future__ import annotations

from collections import defaultdict

from ..record import Record
from ..report import PER_TOKEN
from ..sweeps import Sweep, SweepRow
from .charts import Series, line_svg
from .units import duration, fixed, pct, si


class TablePage(Record, frozen=True):
    """A page of charts above a table (templates/table_page.html.j2)."""

    title: str
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    charts: tuple[tuple[str, str], ...]  # (heading, svg)
    skipped: tuple[str, ...]
    table_heading: str = "Points"
    skipped_heading: str = "Skipped"


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
    shown = duration(r.estimate_ms / 1e3) if r.estimate_ms is not None else "-"
    return (*out[:at], shown, *out[at:])


def cells(r: SweepRow) -> tuple[str, ...]:
    length = f"context {r.context:,}" if r.phase == "decode" else f"seq {r.seq:,}"
    if r.prefix and not r.chunk:
        length += f" after {r.prefix:,}"
    if r.chunk:
        length += f", chunk {r.chunk:,} of {r.prompt:,}" + (
            f" after {r.prefix:,}" if r.prefix else ""
        )
    return (r.model, r.hardware, r.phase, f"{r.batch:,}", length, r.layout or "-",
            duration(r.step_ms / 1e3), duration(r.ms_per_token / 1e3),
            fixed(r.tokens_per_s, 1), fixed(r.tokens_per_s_device, 1), r.bound,
            pct(r.mfu_bound), f"{si(r.memory, 'B')} of {si(r.capacity, 'B')}",
            "yes" if r.fits else "NO")  # fmt: skip


def _where(r: SweepRow) -> str:
    return " ".join(x for x in (r.model, r.hardware, r.layout) if x)


def _grouped(rows, key) -> dict[str, list[SweepRow]]:
    groups: dict[str, list[SweepRow]] = defaultdict(list)
    for r in rows:
        groups[key(r)].append(r)
    return groups


def pareto(rows: list[SweepRow]) -> set[int]:
    """Indices of the rows no other row beats on both throughput and latency (the step:
    a decode sequence waits one step for each output token)."""
    front = set()
    for i, r in enumerate(rows):
        if not any(o.tokens_per_s >= r.tokens_per_s and o.step_ms <= r.step_ms
                   and (o.tokens_per_s, o.step_ms) != (r.tokens_per_s, r.step_ms)
                   for o in rows):  # fmt: skip
            front.add(i)
    return front


def build_sweep_view(s: Sweep) -> TablePage:
    decode = [r for r in s.rows if r.phase == "decode"]
    charts = []
    if decode:
        by_context = _grouped(decode, lambda r: f"{_where(r)}, context {r.context:,}")
        series = [Series(label=k, points=tuple((r.batch, r.tokens_per_s) for r in v),
                         marked=tuple(r.fits for r in v))
                  for k, v in by_context.items()]  # fmt: skip
        charts.append(("Tokens/s against batch (filled: fits in memory)",
                       line_svg(series, "batch", "tokens/s", "throughput")))  # fmt: skip
        fitting = [r for r in decode if r.fits]  # a point that does not fit is not served
        front = pareto(fitting)
        series = [
            Series(label=k, points=tuple((r.tokens_per_s, r.step_ms) for r in v),
                   marked=tuple(False for _ in v), joined=False)
            for k, v in _grouped(decode, _where).items()
        ]  # fmt: skip
        best = sorted((fitting[i] for i in front), key=lambda r: r.tokens_per_s)
        series.append(Series(label="Pareto front",
                             points=tuple((r.tokens_per_s, r.step_ms) for r in best),
                             marked=tuple(True for _ in best)))  # fmt: skip
        heading = "Latency against throughput (the line: the Pareto front of what fits)"
        latency = "ms per step (per output token)"
        charts.append((heading, line_svg(series, "tokens/s", latency, "pareto")))
        by_batch = _grouped(sorted(decode, key=lambda r: r.context),
                            lambda r: f"{_where(r)}, batch {r.batch:,}")  # fmt: skip
        series = [Series(label=k, points=tuple((r.context, r.memory) for r in v),
                         marked=tuple(r.fits for r in v))
                  for k, v in by_batch.items()]  # fmt: skip
        capacities = tuple(sorted({(f"{r.hardware} {si(r.capacity, 'B')}", r.capacity)
                                   for r in decode}))  # fmt: skip
        chart = line_svg(series, "context", "bytes per device", "memory", capacities)
        charts.append(("Memory per device against context (filled: fits)", chart))
    return TablePage(
        title=f"Sweep: {len(s.rows):,} points",
        headers=headers(with_estimate := estimated(s)),
        rows=tuple(row_cells(r, with_estimate) for r in s.rows),
        charts=tuple(charts),
        skipped=s.skipped,
    )
