"""The training search (modelcost train) as text, Markdown, HTML, JSON or CSV: the best
layouts that fit as a table, the one chosen, and what was not kept and why."""

from __future__ import annotations

from modelcost.analyses.training import TrainingLayout, TrainingSearch

from .data_format import as_data
from .escape import clean, md, terminal
from .serving_format import rows_table
from .units import duration, fixed, held, pct, plural

COLUMNS = ("layout", "micro-batch", "step", "tokens/s/device", "MFU", "memory/device",
           "bubble", "exposed comm")  # fmt: skip
ESTIMATED = ("layout", "micro-batch", "step", "tokens/s/device", "MFU", "bound tokens/s/device",
             "memory/device", "bubble", "exposed comm")  # fmt: skip


def _time(seconds: float) -> str:
    return duration(seconds) if seconds else "0"  # no pipeline, no collective: none


def _row(r: TrainingLayout, estimated: bool) -> tuple[str, ...]:
    memory = held(r.memory_bytes)
    bubble, comm = _time(r.bubble_s), _time(r.comm_exposed_s)
    if estimated and r.estimate_s is not None and r.estimate_tokens_per_s_device is not None:
        return (r.layout or "one device", str(r.micro_batch), duration(r.estimate_s),
                fixed(r.estimate_tokens_per_s_device, 1), pct(r.mfu_estimate or 0.0),
                fixed(r.tokens_per_s_device, 1), memory, bubble, comm)  # fmt: skip
    return (r.layout or "one device", str(r.micro_batch), duration(r.step_s),
            fixed(r.tokens_per_s_device, 1), pct(r.mfu), memory, bubble, comm)  # fmt: skip


def _chosen(found: TrainingSearch) -> str:
    c = found.chosen
    if c is None:
        return "none fits: " + _not_kept(found)
    if found.estimated and c.estimate_s is not None and c.estimate_tokens_per_s_device:
        rate, bound = fixed(c.estimate_tokens_per_s_device, 1), fixed(c.tokens_per_s_device, 1)
        figures = (f"step {duration(c.estimate_s)}, {rate} tokens/s per device, MFU "
                   f"{pct(c.mfu_estimate or 0.0)} (the kernel-aware estimate; the roofline's "
                   f"bound {bound})")  # fmt: skip
    else:
        figures = (f"step {duration(c.step_s)}, {fixed(c.tokens_per_s_device, 1)} tokens/s "
                   f"per device, MFU {pct(c.mfu)} (the roofline's bound)")  # fmt: skip
    return (f"chosen: {c.layout or 'one device'}, micro-batch {c.micro_batch}: {figures}; "
            f"{held(c.memory_bytes)} of {held(c.capacity_bytes)} per device")  # fmt: skip


def _not_kept(found: TrainingSearch) -> str:
    parts = []
    if found.too_big:
        parts.append(f"{plural(found.too_big, 'layout')} fit no device, even with full "
                     "recomputation or ZeRO 3")  # fmt: skip
    refused = sum(n for _, n in found.refused)
    if refused:
        parts.append(f"{plural(refused, 'layout')} cannot run the model")
    return "; ".join(parts) if parts else "every layout tried fits"


def render_training(found: TrainingSearch, fmt: str, top: int) -> str:
    data = as_data(found, fmt)
    if data is not None:
        return data
    head = clean(
        f"{found.model_title} on {found.hardware_title}: training on {found.devices:,} "
        f"devices, global batch {found.global_batch:,}, seq {found.seq:,}"
    )
    tried = (f"{plural(found.tried, 'layout')} tried, {len(found.layouts):,} fit; the best "
             f"{min(top, len(found.layouts)):,} by tokens/s per device")  # fmt: skip
    columns = ESTIMATED if found.estimated else COLUMNS
    rows = [_row(r, found.estimated) for r in found.layouts[:top]]
    why = [f"{n:,} × {reason}" for reason, n in found.refused]
    if fmt == "html":
        from .env import render
        from .sweep_view import TablePage

        page = TablePage(title=f"{head}: {tried}", headers=columns, rows=tuple(rows), charts=(),
                         skipped=tuple(why), table_heading="Layouts that fit, best first",
                         skipped_heading="Cannot run the model", note=_chosen(found))  # fmt: skip
        return render("table_page.html.j2", view=page)
    out = [f"# {md(head)}\n\n{md(tried)}\n\n" if fmt == "md" else f"{head}\n{tried}\n\n"]
    if rows:
        out.append(rows_table(rows, columns, fmt))
    out.append(f"\n{md(_chosen(found)) if fmt == 'md' else _chosen(found)}\n")
    if found.layouts:
        out.append(f"not kept: {_not_kept(found)}\n")
    for line in why:
        out.append(f"- {md(line) if fmt == 'md' else line}\n")
    text = "".join(out)
    return text if fmt == "md" else terminal(text)
