"""Disaggregated serving answers (one pair of pools, a pool search) as a terminal table,
Markdown, JSON, CSV or an HTML page. Formatting only."""

from __future__ import annotations

from tabulate import tabulate

from ..disagg import Disaggregated, DisaggSearch, PoolFigures
from .escape import md, terminal
from .serving_format import BASIS
from .units import duration, fixed, si


def _html(head: str, facts: list[tuple[str, str]], columns: tuple[str, ...],
          rows: list[tuple[str, ...]], heading: str) -> str:  # fmt: skip
    from .env import render
    from .sweep_view import TablePage

    page = TablePage(title=head, headers=columns, rows=tuple(rows), charts=(),
                     skipped=tuple(f"{k}: {v}" for k, v in facts), table_heading=heading,
                     skipped_heading="The answer")  # fmt: skip
    return render("table_page.html.j2", view=page)


def _pool(p: PoolFigures, estimated: bool) -> str:
    what = "prompts a step" if p.role == "prefill" else "sequences a replica"
    step = "step" if p.role == "prefill" else "TPOT"
    bound = f" (bound {duration(p.bound_step_s)})" if estimated else ""
    rate = f"{fixed(p.requests_per_s, 2)} requests/s" + (
        f" (bound {fixed(p.bound_requests_per_s, 2)})" if estimated else ""
    )
    return (f"{p.count} × {p.layout} ({p.devices} devices): {p.batch:,} {what} (at most "
            f"{p.max_batch:,} fit), {step} {duration(p.step_s)}{bound}; {rate}; "
            f"{si(p.memory, 'B')} of {si(p.capacity, 'B')} a device")  # fmt: skip


def _facts(d: Disaggregated) -> list[tuple[str, str]]:
    b, t = d.bound, d.transfer
    estimated = d.estimate == "kernels"

    def both(value: str, bound: str) -> str:
        return f"{value} (bound {bound})" if estimated else value

    rows = [
        ("requests", f"{d.isl:,} in, {d.osl:,} out"),
        ("engine", d.engine),
        ("times", BASIS[d.estimate]),
        ("prefill pool", _pool(d.prefill, estimated)),
        ("decode pool", _pool(d.decode, estimated)),
        ("KV transfer", f"{si(t.bytes, 'B')} a request over the {t.link} link ({t.rule}); "
                        f"the larger shard {si(max(t.sent_per_device, t.received_per_device), 'B')}"
                        f" a device at {si(t.bandwidth, 'B/s')} ({t.bandwidth_source}): "
                        + both(duration(t.time_s), f"{duration(t.bound_s)} at the link's "
                               f"{si(t.link_bandwidth, 'B/s')}")),
        ("TTFT", both(duration(d.ttft_s), duration(b.ttft_s)) + ": the prefill and the transfer"),
        ("TPOT", both(duration(d.tpot_s), duration(b.tpot_s))),
        ("request latency", both(duration(d.latency_s), duration(b.latency_s))),
        ("output tokens/s", f"{fixed(d.output_tokens_per_s, 1)} "
                            f"({fixed(d.output_tokens_per_s_device, 1)} per device over "
                            f"{d.devices} devices; the {d.limited_by} pool limits it)"
                            + (f"; bound {fixed(b.output_tokens_per_s, 1)} "
                               f"({fixed(b.output_tokens_per_s_device, 1)} per device)"
                               if estimated else "")),
        ("total tokens/s", both(fixed(d.total_tokens_per_s, 1), fixed(b.total_tokens_per_s, 1))),
    ]  # fmt: skip
    if d.why:
        rows.append(("targets", f"not met: {d.why}"))
    return rows


def render_disagg(d: Disaggregated, fmt: str) -> str:
    if fmt == "json":
        return d.model_dump_json(indent=2) + "\n"
    if fmt == "csv":
        return d.to_csv()
    rows = _facts(d)
    head = f"{d.model} on {d.hardware}, prefill and decode disaggregated"
    if fmt == "html":
        return _html(head, [], ("", "value"), [tuple(r) for r in rows], "Figures")
    if fmt == "md":
        body = "\n".join(f"| {md(k)} | {md(v)} |" for k, v in rows)
        return f"# {md(head)}\n\n|  | value |\n|---|---|\n{body}\n"
    return terminal(head + "\n\n" + tabulate(rows, tablefmt="plain") + "\n")


_COLUMNS = ("prefill", "decode", "devices", "TTFT", "TPOT", "output tok/s", "per device",
            "bound per device", "limited by", "targets")  # fmt: skip


def _row(d: Disaggregated) -> tuple[str, ...]:
    return (
        f"{d.prefill.count} × {d.prefill.layout}",
        f"{d.decode.count} × {d.decode.layout}",
        f"{d.devices}",
        duration(d.ttft_s),
        duration(d.tpot_s),
        fixed(d.output_tokens_per_s, 1),
        fixed(d.output_tokens_per_s_device, 1),
        fixed(d.bound.output_tokens_per_s_device, 1),
        d.limited_by,
        "met" if d.meets_targets else d.why,
    )


def render_disagg_search(found: DisaggSearch, fmt: str) -> str:
    if fmt == "json":
        return found.model_dump_json(indent=2) + "\n"
    if fmt == "csv":
        return found.to_csv()
    head = (f"{found.model} on {found.hardware}, {found.isl:,} in, {found.osl:,} out: "
            f"prefill and decode pools within {found.devices} devices")  # fmt: skip
    rows = [(*_row(s), "chosen" if s == found.chosen else "") for s in found.tried]
    c = found.chosen
    said = (f"chosen: {c.prefill.count} × {c.prefill.layout} prefill, {c.decode.count} × "
            f"{c.decode.layout} decode: TTFT {duration(c.ttft_s)}, TPOT {duration(c.tpot_s)}, "
            f"{fixed(c.output_tokens_per_s_device, 1)} output tokens/s per device"
            if c is not None else f"none chosen: {found.why}")  # fmt: skip
    notes = [("not tried", why) for why in found.refused]
    if fmt == "html":
        return _html(f"{head}; {said}", notes, (*_COLUMNS, ""), rows, "Pool layouts")
    table = (
        "| " + " | ".join(_COLUMNS) + " |  |\n|" + "---|" * (len(_COLUMNS) + 1) + "\n"
        + "".join("| " + " | ".join(md(x) for x in r) + " |\n" for r in rows)
        if fmt == "md"
        else tabulate(rows, headers=(*_COLUMNS, ""), tablefmt="simple", disable_numparse=True)
        + "\n"
    )  # fmt: skip
    out = [f"# {md(head)}\n\n" if fmt == "md" else head + "\n\n", table]
    for _, why in notes:
        out.append(f"\n- not tried: {md(why) if fmt == 'md' else why}")
    out.append(("\n" if notes else "") + f"\n{said}\n")
    text = "".join(out)
    return text if fmt == "md" else terminal(text)
