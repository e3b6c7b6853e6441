"""The output formats of reports and diffs: Markdown and HTML through the templates
(view-models first: render/view.py, render/diff_view.py); JSON is render/json_format.py.
The terminal summary is render/text.py. Registered by name in render/__init__.py."""

from __future__ import annotations

from ..diff import DiffReport, Verdict, gate
from ..report import Report
from .diff_view import build_diff_view, build_gate_view
from .env import render
from .json_format import render_diff_json, render_json

__all__ = ["render_diff", "render_html", "render_json", "render_markdown"]
from .view import build_view


def render_markdown(reports: list[Report]) -> str:
    return render("report.md.j2", view=build_view(reports))


def render_html(reports: list[Report]) -> str:
    """One self-contained page (inline CSS, SVG charts and a small sort script)."""
    return render("report.html.j2", view=build_view(reports))


def render_diff(d: DiffReport, fmt: str, verdict: Verdict | None = None) -> str:
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
    template = "diff.html.j2" if fmt == "html" else "diff.md.j2"
    return render(template, view=build_diff_view(d))
