"""A diff for the terminal: per phase, the sides, the totals and the op kinds whose
time changed most, as plain tables."""

from __future__ import annotations

from tabulate import tabulate

from modelcost.analyses.diff import DiffReport, Verdict

from .diff_view import build_diff_view
from .escape import clean, terminal

TOP = 8  # op kinds and layer groups shown per phase


def render_diff_text(d: DiffReport, verdict: Verdict) -> str:
    view = build_diff_view(d)
    # every user string on its own line or cell, on one line (render/escape.clean)
    out = [clean(view.title)]
    for phase in view.phases:
        out.append(
            f"{clean(phase.heading)}\n  A: {clean(phase.a_label)}\n  B: {clean(phase.b_label)}"
        )
        for table in (phase.totals, phase.kinds, phase.layers):
            rows = [[clean(c.text) for c in row] for row in table.rows[:TOP]]
            align = ["right" if n else "left" for n in table.numeric]
            out.append(tabulate(rows, headers=list(table.headers), colalign=align,
                                disable_numparse=True))  # fmt: skip
    out.append(f"verdict: {verdict.message}" if verdict.threshold is not None else "")
    return terminal("\n\n".join(s for s in out if s) + "\n")
