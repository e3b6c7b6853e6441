"""The output formats of reports and diffs: Markdown and HTML through the templates
(view-models first: render/view.py, render/diff_view.py); JSON is render/json_format.py.
The terminal summary is render/text.py. Registered by name in render/__init__.py."""

from __future__ import annotations

from modelcost.analyses.diff import DiffReport, Verdict, gate
from modelcost.ir.report import Report

from .diff_view import build_diff_view, build_gate_view
from .env import render
from .json_format import render_diff_json, render_json

__all__ = ["render_diff", "render_html", "render_json", "render_markdown"]
from .chart_modes import ChartMode
from .escape import Markdown, md, safe_href
from .view import Chart, ReportView, build_view


def chart_folder(page: str) -> str:
    """Where a Markdown page's charts go, beside it: `report.md` → `report-charts`."""
    name = page.rsplit("/", 1)[-1]
    return (name[:-3] if name.endswith(".md") else name) + "-charts"


def chart_embeds(charts: tuple[Chart, ...], mode: ChartMode, folder: str) -> dict[str, Markdown]:
    """How a Markdown page shows each chart: `files`, an image of the SVG file written
    in `folder` beside the page (GitHub and MkDocs both show it); `inline`, the SVG
    itself in a `<div>` (MkDocs passes raw HTML through; GitHub does not render it);
    `note`, one line saying how to get them (Markdown to stdout); `none`, nothing."""
    if mode == "files":
        return {c.slug: Markdown(f"![{md(c.title)}]({safe_href(f'{folder}/{c.slug}.svg')})")
                for c in charts}  # fmt: skip
    if mode == "inline":
        return {c.slug: Markdown(f'<div class="modelcost-chart">\n{c.svg}\n</div>')
                for c in charts}  # fmt: skip
    if mode == "note" and charts:
        names = ", ".join(c.title for c in charts)
        note = Markdown(f"_Charts ({md(names)}): written as SVG files beside the page with "
                        "`-o PAGE.md`, or inline with `--charts inline`._")  # fmt: skip
        return {c.slug: note if i == 0 else Markdown("") for i, c in enumerate(charts)}
    return {c.slug: Markdown("") for c in charts}


def render_markdown(
    reports: list[Report], charts: ChartMode = "note", folder: str = "charts"
) -> str:
    return _markdown(build_view(reports), charts, folder)


def _markdown(view: ReportView, charts: ChartMode, folder: str) -> str:
    embeds: dict[str, Markdown] = {}
    for phase in view.phases:
        embeds |= chart_embeds(phase.charts, charts, folder)
    return render("report.md.j2", view=view, embeds=embeds)


def markdown_files(reports: list[Report], page: str, charts: ChartMode = "files") -> dict[str, str]:
    """A Markdown page named `page` and, with `files`, its charts' SVG files beside it
    (paths relative to the page's folder)."""
    folder, view = chart_folder(page), build_view(reports)
    files = {page.rsplit("/", 1)[-1]: _markdown(view, charts, folder)}
    if charts == "files":
        for c in view.charts:
            files[f"{folder}/{c.slug}.svg"] = c.svg + "\n"
    return files


def render_html(reports: list[Report]) -> str:
    """One self-contained page (inline CSS, SVG charts and a small sort script)."""
    return render("report.html.j2", view=build_view(reports))


def render_diff(
    d: DiffReport,
    fmt: str,
    verdict: Verdict | None = None,
    charts: ChartMode = "note",
    folder: str = "charts",
    sides: tuple[list[Report], list[Report]] | None = None,
) -> str:
    """A diff as `text`, `md`, `gfm` (a pull-request summary with the gate's verdict),
    `html` or `json`."""
    verdict = verdict or gate(d, None)
    if fmt == "json":
        return render_diff_json(d)
    if fmt == "text":
        from .diff_text import render_diff_text

        return render_diff_text(d, verdict)
    if fmt == "gfm":
        return render("diff_gate.md.j2", view=build_gate_view(d, verdict))
    view = build_diff_view(d, sides)
    if fmt == "html":
        return render("diff.html.j2", view=view)
    embeds = chart_embeds(view.charts, charts, folder)
    return render("diff.md.j2", view=view, embeds=embeds)


def diff_markdown_files(
    d: DiffReport,
    page: str,
    charts: ChartMode = "files",
    sides: tuple[list[Report], list[Report]] | None = None,
) -> dict[str, str]:
    """A diff's Markdown page and, with `files`, its charts beside it."""
    folder, view = chart_folder(page), build_diff_view(d, sides)
    files = {
        page.rsplit("/", 1)[-1]: render(
            "diff.md.j2", view=view, embeds=chart_embeds(view.charts, charts, folder)
        )
    }
    if charts == "files":
        for c in view.charts:
            files[f"{folder}/{c.slug}.svg"] = c.svg + "\n"
    return files
