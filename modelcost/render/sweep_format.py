"""A sweep's rows as CSV, JSON, a Markdown table, or an HTML page with its charts
(render/sweep_view.py). Formatting only: every value comes from the rows."""

from __future__ import annotations

from modelcost.analyses.sweeps import Sweep

from .data_format import as_data
from .escape import md
from .sweep_view import estimated, headers, row_cells


def render_sweep(s: Sweep, fmt: str) -> str:
    if fmt == "html":
        from .env import render
        from .sweep_view import build_sweep_view

        return render("table_page.html.j2", view=build_sweep_view(s))
    data = as_data(s, fmt)
    if data is not None:
        return data
    return _markdown(s)


def _markdown(s: Sweep) -> str:
    names = headers(with_estimate := estimated(s))
    lines = ["| " + " | ".join(names) + " |", "|" + "---|" * len(names)]
    lines += ["| " + " | ".join(md(c) for c in row_cells(r, with_estimate)) + " |"
              for r in s.rows]  # fmt: skip
    skipped = [f"- skipped: {md(x)}" for x in s.skipped]
    return "\n".join(lines + (["", *skipped] if skipped else [])) + "\n"
