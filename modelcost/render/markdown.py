"""Markdown: the report view through templates/report.md.j2 (tables by tabulate, pipe)."""

from __future__ import annotations

from ..report import Report
from ..view import build_view
from .env import render


def render_markdown(reports: list[Report]) -> str:
    return render("report.md.j2", view=build_view(reports))
