"""Disaggregated serving answers (one pair of pools, a pool search, the search of both
modes within a device budget) as a terminal table, Markdown, JSON, CSV or an HTML page.
Formatting only."""

from __future__ import annotations

from tabulate import tabulate

from modelcost.analyses.deployment import Deployment, DeploymentPoint, pools_label
from modelcost.analyses.disagg import Disaggregated, DisaggSearch, PoolFigures
from modelcost.analyses.serving_records import Serving
from modelcost.analyses.serving_search import group_reasons

from .data_format import as_data
from .escape import clean, md, terminal
from .serving_format import BASIS, OBJECTIVE_SAID, rows_table
from .sweep_view import TablePage
from .units import duration, fixed, held, si


def _html(head: str, facts: list[tuple[str, str]], columns: tuple[str, ...],
          rows: list[tuple[str, ...]], heading: str) -> str:  # fmt: skip
    from .env import render

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
    devices = f"{p.devices} device{'s' if p.devices > 1 else ''}"
    return (f"{p.count} × {p.layout} ({devices}): {p.batch:,} {what} (at most "
            f"{p.max_batch_said}), {step} {duration(p.step_s)}{bound}; {rate}; "
            f"{held(p.memory)} of {held(p.capacity)} a device")  # fmt: skip


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
        ("TTFT", duration(d.ttft_s) + (f" (bound {duration(b.ttft_s)} one prompt alone, "
                                       f"{duration(b.ttft_worst_s)} the whole step)"
                                       if estimated else "")
                 + ": the prefill step and the transfer"),
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
    data = as_data(d, fmt)
    if data is not None:
        return data
    rows = _facts(d)
    head = clean(f"{d.model_title} on {d.hardware_title}, prefill and decode disaggregated")
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
    data = as_data(found, fmt)
    if data is not None:
        return data
    head = (f"{clean(found.model_title + ' on ' + found.hardware_title)}, "
            f"{found.isl:,} in, {found.osl:,} out: "
            f"prefill and decode pools within {found.devices} devices")  # fmt: skip
    rows = [(*_row(s), "chosen" if s == found.chosen else "") for s in found.tried]
    c = found.chosen
    said = (f"chosen: {c.prefill.count} × {c.prefill.layout} prefill, {c.decode.count} × "
            f"{c.decode.layout} decode: TTFT {duration(c.ttft_s)}, TPOT {duration(c.tpot_s)}, "
            f"{fixed(c.output_tokens_per_s_device, 1)} output tokens/s per device"
            if c is not None else f"none chosen: {found.why}")  # fmt: skip
    notes = [("not tried", why) for why in found.refused]
    if fmt == "html":
        return _html(f"{head}; {said}", notes, (*_COLUMNS, "choice"), rows, "Pool layouts")
    table = rows_table(rows, (*_COLUMNS, "choice"), fmt)
    out = [f"# {md(head)}\n\n" if fmt == "md" else head + "\n\n", table]
    for _, why in notes:
        out.append(f"\n- not tried: {md(why) if fmt == 'md' else why}")
    out.append(("\n" if notes else "") + f"\n{said}\n")
    text = "".join(out)
    return text if fmt == "md" else terminal(text)


_BOTH = ("mode", "layout", "devices", "concurrency", "TTFT", "TPOT", "tok/s per user",
         "tok/s per device", "bound per device", "targets", "choice")  # fmt: skip
_POINTS = ("mode", "layout", "devices", "concurrency", "TTFT", "TPOT", "tok/s per user",
           "tok/s per device", "targets", "choice")  # fmt: skip


def _best_row(mode: str, layout: str, batch: int, s: Serving | Disaggregated,
              chosen: bool) -> tuple[str, ...]:  # fmt: skip
    return (mode, layout, f"{s.devices:,}", f"{batch:,}", duration(s.ttft_s),
            duration(s.tpot_s), fixed(1 / s.tpot_s, 1), fixed(s.output_tokens_per_s_device, 1),
            fixed(s.bound.output_tokens_per_s_device, 1), "met" if s.meets_targets else s.why,
            "chosen" if chosen else "")  # fmt: skip


def _best_rows(found: Deployment) -> list[tuple[str, ...]]:
    """Each mode's best by the objective, side by side."""
    rows: list[tuple[str, ...]] = []
    if (a := found.best_aggregated) is not None:
        rows.append(_best_row("aggregated", a.layout or "one device", a.concurrency, a,
                              found.chosen == "aggregated"))  # fmt: skip
    if (d := found.best_disaggregated) is not None:
        rows.append(_best_row("disaggregated", pools_label(d), d.decode.batch, d,
                              found.chosen == "disaggregated"))  # fmt: skip
    return rows


def _point_row(p: DeploymentPoint) -> tuple[str, ...]:
    return (p.mode, p.layout or "one device", f"{p.devices:,}", f"{p.concurrency:,}",
            duration(p.ttft_s), duration(p.tpot_s), fixed(p.output_tokens_per_s_user, 1),
            fixed(p.output_tokens_per_s_device, 1), "met" if p.meets_targets else "missed",
            "chosen" if p.chosen else "")  # fmt: skip


def _name(s: Serving | Disaggregated) -> str:
    return pools_label(s) if isinstance(s, Disaggregated) else s.layout or "one device"


def _said(found: Deployment) -> str:
    """The chosen mode, with the other mode's best beside it."""
    if found.chosen is None:
        return f"none chosen: {found.why}"
    a, d = found.best_aggregated, found.best_disaggregated
    won, lost = (a, d) if found.chosen == "aggregated" else (d, a)
    assert won is not None  # the chosen mode has its best

    def on(s: Serving | Disaggregated) -> str:
        return f"{_name(s)} on {s.devices:,} device{'s' if s.devices != 1 else ''}"

    out = (f"chosen: {found.chosen}, {on(won)}: TTFT {duration(won.ttft_s)}, TPOT "
           f"{duration(won.tpot_s)}, {fixed(won.output_tokens_per_s_device, 1)} output "
           f"tokens/s per device")  # fmt: skip
    if lost is not None and lost.meets_targets:
        other = "disaggregated" if found.chosen == "aggregated" else "aggregated"
        out += (f"; the best {other}, {on(lost)}: TPOT {duration(lost.tpot_s)}, "
                f"{fixed(lost.output_tokens_per_s_device, 1)} per device")  # fmt: skip
        if found.objective == "throughput-per-device":
            ratio = won.output_tokens_per_s_device / lost.output_tokens_per_s_device
            out += f" (the chosen gives {fixed(ratio, 2)}×)"
    return out


def render_deployment(found: Deployment, fmt: str) -> str:
    data = as_data(found, fmt)
    if data is not None:
        return data
    head = (f"{clean(found.model_title + ' on ' + found.hardware_title)}, "
            f"{found.isl:,} in, {found.osl:,} out: "
            f"aggregated and disaggregated serving within {found.devices:,} devices")  # fmt: skip
    objective = f"objective: {found.objective}, {OBJECTIVE_SAID[found.objective]}"
    said = _said(found)
    notes = [*found.refused] + [
        f"{mode}: {group_reasons(search.refused)}"
        for mode, search in (("aggregated", found.aggregated),
                             ("disaggregated", found.disaggregated))
        if search is not None and search.refused
    ]  # fmt: skip
    front = sorted(
        (p for p in found.points if p.front),
        key=lambda p: (-p.output_tokens_per_s_user, -p.output_tokens_per_s_device),
    )
    if fmt == "html":
        from .env import render
        from .serving_view import front_chart, front_heading

        target = next((s.tpot_target_s for s in (found.best_aggregated,
                       found.best_disaggregated) if s is not None), None)  # fmt: skip
        chart = front_chart(found.points, target, lambda p: f"other {p.mode} points")
        page = TablePage(title=f"{head}; {said}", headers=_POINTS,
                         rows=tuple(_point_row(p) for p in found.points),
                         charts=((front_heading(objective), chart),), skipped=tuple(notes),
                         table_heading="Points tried", skipped_heading="Not tried")  # fmt: skip
        return render("table_page.html.j2", view=page)
    sections = [
        ("each mode's best", _best_rows(found), _BOTH),
        ("the Pareto front of output tokens/s per user (1/TPOT) against per device, both "
         "modes", [_point_row(p) for p in front], _POINTS),
    ]  # fmt: skip
    out = [f"# {md(head)}\n" if fmt == "md" else head + "\n"]
    for title, rows, columns in sections:
        out.append(f"\n## {md(title)}\n\n" if fmt == "md" else f"\n{title}:\n\n")
        out.append(rows_table(rows, columns, fmt))
    for why in notes:
        out.append(f"\n- not tried: {md(why) if fmt == 'md' else why}")
    out.append(("\n" if notes else "") + f"\n{objective}\n{said}\n")
    text = "".join(out)
    return text if fmt == "md" else terminal(text)
