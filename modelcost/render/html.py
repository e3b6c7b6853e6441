"""HTML: one self-contained page (inline CSS, SVG charts and a small sort script)."""

from __future__ import annotations

from ..report import Report
from ..view import build_view
from .env import render


def render_html(reports: list[Report]) -> str:
    return render("report.html.j2", view=build_view(reports))
