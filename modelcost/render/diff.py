"""Diffs in Markdown, HTML and JSON."""

from __future__ import annotations

from ..diff import DiffReport
from ..view import build_diff_view
from .env import render


def render_diff(d: DiffReport, fmt: str) -> str:
    if fmt == "json":
        return d.model_dump_json(indent=2) + "\n"
    template = "diff.html.j2" if fmt == "html" else "diff.md.j2"
    return render(template, view=build_diff_view(d))
