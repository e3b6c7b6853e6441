"""A sweep's rows as CSV, JSON, a Markdown table, or an HTML page with its charts
(render/sweep_view.py). Formatting only: every value comes from the rows."""

from __future__ import annotations

import csv
import io

from ..sweeps import Sweep, SweepRow
from .escape import md
from .units import duration, fixed, pct, si


def render_sweep(s: Sweep, fmt: str) -> str:
    if fmt == "html":
        from .env import render
        from .sweep_view import build_sweep_view

        return render("sweep.html.j2", view=build_sweep_view(s))
    if fmt == "json":
        return s.model_dump_json(indent=2) + "\n"
    if fmt == "csv":
        return _csv(s)
    return _markdown(s)


def _csv(s: Sweep) -> str:
    """One header line of field names, then one line per row, values as they are."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    fields = list(SweepRow.model_fields)
    writer.writerow(fields)
    for r in s.rows:
        writer.writerow([getattr(r, f) for f in fields])
    return out.getvalue()


HEADERS = ("model", "hardware", "phase", "batch", "seq / context", "layout", "step",
           "per token", "tokens/s", "tokens/s/device", "bound", "MFU bound",
           "memory/device", "fits")  # fmt: skip


def _markdown(s: Sweep) -> str:
    lines = ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    for r in s.rows:
        length = f"context {r.context}" if r.phase == "decode" else f"seq {r.seq}"
        cells = (r.model, r.hardware, r.phase, f"{r.batch:,}", length, r.layout or "-",
                 duration(r.step_ms / 1e3), duration(r.ms_per_token / 1e3),
                 fixed(r.tokens_per_s, 1), fixed(r.tokens_per_s_device, 1), r.bound,
                 pct(r.mfu_bound), f"{si(r.memory, 'B')} of {si(r.capacity, 'B')}",
                 "yes" if r.fits else "NO")  # fmt: skip
        lines.append("| " + " | ".join(md(str(c)) for c in cells) + " |")
    skipped = [f"- skipped: {md(x)}" for x in s.skipped]
    return "\n".join(lines + (["", *skipped] if skipped else [])) + "\n"
