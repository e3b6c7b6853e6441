"""Serving curves (curve.Curves) as a terminal table, Markdown, an HTML page with an
interactive chart (throughput per device against tokens/s per user, a line a layout,
the Pareto front), JSON or CSV. Formatting only: every figure is the answer's."""

from __future__ import annotations

from tabulate import tabulate

from modelcost.analyses.arrivals import Stats
from modelcost.analyses.curve import Curve, Curves, LoadPoint

from .charts import Series, line_svg
from .data_format import as_data
from .escape import clean, md, terminal
from .serving_format import BASIS, rows_table
from .units import duration, fixed

CURVE_FORMATS = ("text", "md", "json", "csv", "html")
_FIGURES = ("TTFT", "TPOT", "latency")
_STATS = ("mean", "p50", "p90", "p99")


def _per_user(value: float | None) -> str:
    return fixed(value, 1) if value is not None else "-"


def _stat(s: Stats | None, k: str) -> str:
    return duration(getattr(s, k)) if s is not None else "-"


def _stats(p: LoadPoint) -> tuple[Stats | None, ...]:
    return (p.figures.ttft, p.figures.tpot, p.figures.latency)


def _rows(c: Curve, every: bool) -> list[tuple[str, ...]]:
    """A row a concurrency: throughput per device and per user with their bounds, then
    each figure's mean and p99 (`every`: mean, p50, p90, p99)."""
    keys = _STATS if every else ("mean", "p99")
    out = []
    for p in c.points:
        head = (f"{p.concurrency:,}", f"{p.running:,}",
                fixed(p.output_tokens_per_s_device, 1),
                fixed(p.bound_output_tokens_per_s_device, 1),
                _per_user(p.output_tokens_per_s_user),
                _per_user(p.bound_output_tokens_per_s_user))  # fmt: skip
        figs = tuple(_stat(s, k) for s in _stats(p) for k in keys)
        out.append((*head, *figs, "yes" if p.front else ""))
    return out


def _columns(every: bool) -> tuple[str, ...]:
    keys = _STATS if every else ("mean", "p99")
    return ("concurrency", "running", "tok/s/device", "bound", "tok/s/user", "bound",
            *(f"{f} {k}" for f in _FIGURES for k in keys), "front")  # fmt: skip


def _facts(c: Curves) -> list[tuple[str, str]]:
    cached = f" ({c.cached:,} of the longest input cached)" if c.cached else ""
    return [
        ("load", f"{c.load.said(c.isl, c.osl)}{cached}"),
        ("clients", c.clients),
        ("engine", f"{c.engine}; in-flight batching"),
        ("times", BASIS[c.estimate]),
        ("concurrency", "requests in flight per replica; `running` is what the replica "
                        "runs at once, the rest wait in its queue"),
        ("tok/s/user", "1 / mean TPOT"),
        ("front", "on the Pareto front of every point: no other has more tok/s/device "
                  "and more tok/s/user"),
    ]  # fmt: skip


def _heading(c: Curve) -> str:
    devices = f"{c.devices:,} device{'s' if c.devices != 1 else ''}"
    return f"{c.layout}, {devices}: {c.room}"


def _notes(c: Curve) -> list[str]:
    return [f"concurrency {p.concurrency:,}: {p.note}" for p in c.points if p.note]


def _tip(c: Curve, p: LoadPoint) -> str:
    f = p.figures
    lines = [f"{c.layout} at concurrency {p.concurrency:,} ({p.running:,} running)",
             f"{fixed(p.output_tokens_per_s_device, 1)} tok/s per device "
             f"(bound {fixed(p.bound_output_tokens_per_s_device, 1)})",
             f"{_per_user(p.output_tokens_per_s_user)} tok/s per user "
             f"(bound {_per_user(p.bound_output_tokens_per_s_user)})"]  # fmt: skip
    for name, s in zip(_FIGURES, (f.ttft, f.tpot, f.latency), strict=True):
        if s is not None:
            lines.append(f"{name} mean {duration(s.mean)}, p50 {duration(s.p50)}, "
                         f"p90 {duration(s.p90)}, p99 {duration(s.p99)}")  # fmt: skip
    return "\n".join(lines)


def curve_chart(c: Curves) -> str:
    """Output tokens/s per device against tokens/s per user (the dashboards' axes): a
    line a layout through its concurrencies (filled: on the front), and the front."""
    series = []
    front: list[tuple[float, float, str]] = []
    for curve in c.curves:
        shown = [p for p in curve.points if p.output_tokens_per_s_user]
        series.append(Series(
            label=f"{curve.layout} ({curve.devices:,} devices)" if curve.devices > 1
            else curve.layout,
            points=tuple((p.output_tokens_per_s_user or 0.0, p.output_tokens_per_s_device)
                         for p in shown),
            marked=tuple(p.front for p in shown),
            tips=tuple(_tip(curve, p) for p in shown),
        ))  # fmt: skip
        front += [(p.output_tokens_per_s_user or 0.0, p.output_tokens_per_s_device,
                   _tip(curve, p)) for p in shown if p.front]  # fmt: skip
    if len(c.curves) > 1:
        front.sort()
        series.append(Series(label="Pareto front", points=tuple((x, y) for x, y, _ in front),
                             marked=tuple(True for _ in front),
                             tips=tuple(t for _, _, t in front)))  # fmt: skip
    return line_svg(series, "output tokens/s per user", "output tokens/s per device", "curve",
                    interactive=True)  # fmt: skip


def render_curves(c: Curves, fmt: str) -> str:
    """Curves as `fmt`: the load and the engine, then a table a layout."""
    data = as_data(c, fmt)
    if data is not None:
        return data
    head = clean(f"{c.model_title} on {c.hardware_title}: serving curves, "
                 f"{c.isl:,} in, {c.osl:,} out")  # fmt: skip
    facts = _facts(c)
    if fmt == "html":
        from .env import render
        from .sweep_view import TablePage

        rows = tuple((curve.layout, *row) for curve in c.curves for row in _rows(curve, True))
        notes = tuple(n for curve in c.curves for n in _notes(curve))
        page = TablePage(
            title=head,
            headers=("layout", *_columns(True)),
            rows=rows,
            charts=(("Output tokens/s per device against tokens/s per user, a point a "
                     "concurrency (hover a point for its figures; click a legend entry to "
                     "hide its line)", curve_chart(c)),),
            skipped=(*(f"{k}: {v}" for k, v in facts),
                     *(f"{curve.layout}: {curve.room}" for curve in c.curves), *notes,
                     *(f"not run: {why}" for why in c.refused)),
            table_heading="Points",
            skipped_heading="The load and the layouts",
            interactive=True,
        )  # fmt: skip
        return render("table_page.html.j2", view=page)
    if fmt == "md":
        body = "\n".join(f"| {md(k)} | {md(v)} |" for k, v in facts)
        out = [f"# {md(head)}\n\n|  | value |\n|---|---|\n{body}\n"]
        for curve in c.curves:
            table = rows_table(_rows(curve, True), _columns(True), "md")
            said = "".join(f"\n{md(n)}\n" for n in _notes(curve))
            out.append(f"## {md(_heading(curve))}\n\n{table}{said}")
        if c.refused:
            out.append("## Not run\n\n" + "".join(f"- {md(w)}\n" for w in c.refused))
        return "\n".join(out)
    parts = [head, "", tabulate(facts, tablefmt="plain"), ""]
    for curve in c.curves:
        table = tabulate(_rows(curve, False), headers=_columns(False), tablefmt="simple",
                         disable_numparse=True)  # fmt: skip
        parts += [_heading(curve), "", table, *_notes(curve), ""]
    if c.refused:
        parts += ["not run:", *(f"  {w}" for w in c.refused), ""]
    parts.append("p50 and p90 of each figure: --format md, html, json or csv")
    return terminal("\n".join(parts) + "\n")
