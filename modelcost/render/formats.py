"""The output formats of reports and diffs: Markdown and HTML through the templates
(view-models first: render/view.py, render/diff_view.py), JSON as the models are.
The terminal summary is render/text.py. Registered by name in render/__init__.py."""

from __future__ import annotations

from ..diff import DiffReport
from ..report import Report, ReportSet
from .diff_view import build_diff_view
from .env import render
from .view import build_view


def render_markdown(reports: list[Report]) -> str:
    return render("report.md.j2", view=build_view(reports))


def render_html(reports: list[Report]) -> str:
    """One self-contained page (inline CSS, SVG charts and a small sort script)."""
    return render("report.html.j2", view=build_view(reports))


def render_json(reports: list[Report]) -> str:
    """`{"schema_version": 2, "reports": [Report, ...]}` for any number of phases (its
    JSON Schema: `modelcost schema --report`)."""
    return ReportSet(reports=tuple(reports)).model_dump_json(indent=2) + "\n"


def render_diff(d: DiffReport, fmt: str) -> str:
    """A diff as `md` (also for `text`), `html` or `json`."""
    if fmt == "json":
        return d.model_dump_json(indent=2) + "\n"
    template = "diff.html.j2" if fmt == "html" else "diff.md.j2"
    return render(template, view=build_diff_view(d))
