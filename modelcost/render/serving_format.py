"""Serving answers (one request class, a layout search, a request mix) as a terminal
table, Markdown or JSON. Formatting only."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tabulate import tabulate

from modelcost.analyses.serving_mix import MixServing
from modelcost.analyses.serving_records import Serving
from modelcost.analyses.serving_search import Search

if TYPE_CHECKING:
    from modelcost.analyses.arrivals import Arrivals, Latencies
from .data_format import as_data
from .escape import clean, md, terminal
from .serving_view import layout_label
from .units import duration, fixed, held


def _html(page) -> str:
    from .env import render

    return render("table_page.html.j2", view=page)


def render_serving(s: Serving, fmt: str) -> str:
    data = as_data(s, fmt)
    if data is not None:
        return data
    rows = _facts(s)
    if fmt == "html":
        from .serving_view import serving_page

        return _html(serving_page(s, rows))
    head = clean(f"{s.model_title} on {s.hardware_title}")  # the user's titles, one line
    if fmt == "md":
        body = "\n".join(f"| {md(k)} | {md(v)} |" for k, v in rows)
        return f"# {md(head)}\n\n|  | value |\n|---|---|\n{body}\n"
    return terminal(head + "\n\n" + tabulate(rows, tablefmt="plain") + "\n")


BASIS = {"kernels": "the kernel-aware estimate (the roofline: its bound)",
         "roofline": "the roofline: a bound no engine beats"}  # fmt: skip


def _facts(s: Serving) -> list[tuple[str, str]]:
    b = s.bound
    estimated = s.estimate == "kernels"

    def both(value: str, bound: str) -> str:  # the headline, and its bound beside it
        return f"{value} (bound {bound})" if estimated else value

    rows = [
        ("requests", f"{s.isl:,} in, {s.osl:,} out"
                     + (f" ({s.cached:,} of the input cached)" if s.cached else "")),
        ("layout", layout_label(s)),
        ("engine", s.engine + (f": {s.chunk:,} prompt tokens a step" if s.chunk else "")),
        ("times", BASIS[s.estimate]),
        ("engine model", s.engine_reason),
        ("concurrency", f"{s.concurrency:,} per replica"),
        ("most that run", s.concurrency_said),
        ("engine cap", s.engine_cap_said),
        ("TTFT", _ttft(s, estimated)),
        ("TPOT", both(duration(s.tpot_s), duration(b.tpot_s))),
        ("request latency", both(duration(s.latency_s), duration(b.latency_s))),
        ("output tokens/s", f"{fixed(s.output_tokens_per_s, 1)} "
                            f"({fixed(s.output_tokens_per_s_device, 1)} per device)"
                            + (f"; bound {fixed(b.output_tokens_per_s, 1)}" if estimated
                               else "")),
        ("total tokens/s", both(fixed(s.total_tokens_per_s, 1), fixed(b.total_tokens_per_s, 1))),
        ("memory/device", f"{held(s.memory)} of {held(s.capacity)}"
                          + ("" if s.fits else " (does NOT fit)")),
        ("KV per sequence", f"{held(s.kv_per_sequence)} per device"),
    ]  # fmt: skip
    if (sp := s.speculative) is not None:
        rows.insert(
            6,
            (
                "speculative",
                f"{sp.draft} proposes {sp.tokens} token"
                f"{'s' if sp.tokens > 1 else ''} a step, each accepted with "
                f"{fixed(sp.acceptance, 3)}: {fixed(sp.accepted_per_step, 2)} tokens a "
                f"step of {both(duration(sp.step_s), duration(sp.bound_step_s))}; the "
                f"draft holds {held(sp.draft_weights)} per device and "
                f"{held(sp.draft_kv_per_sequence)} a sequence; {sp.source}",
            ),
        )
    if s.why:
        rows.append(("targets", f"not met: {s.why}"))
    return rows


def _ttft(s: Serving, estimated: bool) -> str:
    """A static batch's mean TTFT with its worst beside it (the last request's, the whole
    prefill), each with its own bound; under chunked prefill, every request's."""
    b = s.bound
    if s.chunk:
        return duration(s.ttft_s) + (f" (bound {duration(b.ttft_s)})" if estimated else "")
    if not estimated:  # the headline is the bound
        return f"{duration(s.ttft_s)} one prompt alone, {duration(s.ttft_worst_s)} the whole batch"
    said = f"{duration(s.ttft_s)} mean, {duration(s.ttft_worst_s)} worst"
    return (
        f"{said} (bound {duration(b.ttft_s)} one prompt alone, "
        f"{duration(b.ttft_worst_s)} the whole batch)"
    )


_COLUMNS = ("layout", "concurrency", "TTFT", "TPOT", "output tok/s", "per device",
            "bound per device", "targets")  # fmt: skip


def _row(s: Serving) -> tuple[str, ...]:
    return (
        layout_label(s),
        f"{s.concurrency:,}",
        duration(s.ttft_s),
        duration(s.tpot_s),
        fixed(s.output_tokens_per_s, 1),
        fixed(s.output_tokens_per_s_device, 1),
        fixed(s.bound.output_tokens_per_s_device, 1),
        "met" if s.meets_targets else s.why,
    )


def rows_table(rows: list[tuple[str, ...]], columns, fmt: str) -> str:
    if fmt == "md":
        head = "| " + " | ".join(columns) + " |\n|" + "---|" * len(columns) + "\n"
        return head + "".join("| " + " | ".join(md(c) for c in r) + " |\n" for r in rows)
    return tabulate(rows, headers=columns, tablefmt="simple", disable_numparse=True) + "\n"


OBJECTIVE_SAID = {
    "throughput-per-device": "the most output tokens/s per device meeting the targets",
    "devices": "the fewest devices meeting the targets",
    "latency": "the lowest TPOT meeting the targets",
}
_FRONT = ("layout", "concurrency", "TPOT", "tok/s per user", "tok/s per device", "targets",
          "choice")  # fmt: skip


def _front_rows(found: Search) -> list[tuple[str, ...]]:
    """The Pareto front's points, the most output tokens/s per user first."""
    on = sorted(
        (p for p in found.points if p.front),
        key=lambda p: (-p.output_tokens_per_s_user, -p.output_tokens_per_s_device),
    )
    return [(layout_label(p), f"{p.concurrency:,}", duration(p.tpot_s),
             fixed(p.output_tokens_per_s_user, 1), fixed(p.output_tokens_per_s_device, 1),
             "met" if p.meets_targets else "missed", "chosen" if p.chosen else "")
            for p in on]  # fmt: skip


def render_search(found: Search, fmt: str) -> str:
    data = as_data(found, fmt)
    if data is not None:
        return data
    request = f"{found.isl:,} in, {found.osl:,} out"
    head = clean(f"{found.model_title} on {found.hardware_title}, {request}: the layouts tried")
    objective = f"objective: {found.objective}, {OBJECTIVE_SAID[found.objective]}"
    if fmt == "html":
        from .serving_view import search_page

        rows = [(*_row(s), "chosen" if _is_chosen(found, s) else "") for s in found.tried]
        title = head + (f"; chosen: {layout_label(found.chosen)}" if found.chosen else "")
        return _html(search_page(found, title, (*_COLUMNS, "choice"), rows, objective))
    out = [f"# {md(head)}\n\n" if fmt == "md" else head + "\n\n"]
    out.append(rows_table([_row(s) for s in found.tried], _COLUMNS, fmt))
    for why in found.refused:
        out.append(f"\n- not tried: {md(why) if fmt == 'md' else why}")
    if found.refused:
        out.append("\n")
    front = "the Pareto front of output tokens/s per user (1/TPOT) against per device"
    out.append(f"\n{'## ' + front if fmt == 'md' else front + ':'}\n\n")
    out.append(rows_table(_front_rows(found), _FRONT, fmt))
    out.append(f"\n{objective}\n")
    if found.chosen is not None:
        c = found.chosen
        out.append(f"chosen: {layout_label(c)}, concurrency {c.concurrency:,}: TTFT "
                   f"{duration(c.ttft_s)}, TPOT {duration(c.tpot_s)}, "
                   f"{fixed(c.output_tokens_per_s, 1)} output tokens/s "
                   f"({fixed(c.output_tokens_per_s_device, 1)} per device)\n")  # fmt: skip
    else:
        out.append(f"none chosen: {found.why}\n")
    text = "".join(out)
    return text if fmt == "md" else terminal(text)


def _is_chosen(found: Search, s: Serving) -> bool:
    """The layout chosen (at the concurrency serve chose, or, for the latency
    objective, at another on its curve)."""
    return found.chosen is not None and found.chosen.layout == s.layout


def render_mix(mix: MixServing, fmt: str) -> str:
    data = as_data(mix, fmt)
    if data is not None:
        return data
    first = mix.classes[0]
    head = clean(
        f"{first.model_title} on {first.hardware_title}, {layout_label(first)}: a request mix"
    )
    columns = ("requests", "share", *_COLUMNS[1:])
    rows = [(f"{s.isl:,} / {s.osl:,}", f"{w:.0%}", *_row(s)[1:])
            for s, w in zip(mix.classes, mix.shares, strict=True)]  # fmt: skip
    rate, device = fixed(mix.output_tokens_per_s, 1), fixed(mix.output_tokens_per_s_device, 1)
    bound = fixed(mix.bound_output_tokens_per_s, 1)
    total = (f"\nthe mix, classes taking turns by share: {rate} output tokens/s "
             f"({device} per device; the roofline's bound {bound})\n")  # fmt: skip
    if fmt == "html":
        from .serving_view import mix_page

        return _html(mix_page(mix, f"{head}: {total.strip()}", columns, rows))
    body = rows_table(rows, columns, fmt)
    if fmt == "md":
        return f"# {md(head)}\n\n{body}{total}"
    return terminal(f"{head}\n\n{body}{total}")


ARRIVAL_FORMATS = ("text", "md", "json", "csv", "html")  # what `serve --rate` writes


def render_arrivals(a: Arrivals, fmt: str) -> str:
    """A run of arriving requests: the facts, then TTFT, TPOT and latency by percentile,
    each with the bound's row under it."""
    data = as_data(a, fmt)
    if data is not None:
        return data
    estimated = a.estimate == "kernels"
    running = f"at most {a.max_running:,} sequences per replica"
    facts = [
        ("requests", f"{a.requests:,} arriving at {a.rate:g}/s (Poisson, seed {a.seed}), "
                     f"{a.isl:,} in, {a.osl:,} out"
                     + (f" ({a.cached:,} of the input cached)" if a.cached else "")),
        ("layout", layout_label(a)),
        ("engine", f"{a.engine}; {running}"),
        ("times", BASIS[a.estimate]),
        ("output tokens/s", _rate(a.figures, a.bound, estimated, "output_tokens_per_s")),
        ("requests/s", _rate(a.figures, a.bound, estimated, "requests_per_s")),
        ("queue", f"at most {a.figures.max_waiting:,} waiting"),
        ("simulated", f"{a.figures.finished:,} requests, {a.figures.steps:,} steps, "
                      f"{a.figures.step_shapes:,} step shapes compiled"),
    ]  # fmt: skip
    if a.note:
        facts.append(("note", a.note))
    columns = ("", "mean", "p50", "p90", "p99")
    rows = [*_percentiles(a.figures, ""), *(_percentiles(a.bound, ", bound") if estimated
                                              else [])]  # fmt: skip
    rows.sort(key=lambda r: _ORDER.index(r[0].split(",")[0]))
    head = clean(f"{a.model_title} on {a.hardware_title}: requests arriving over time")
    if fmt == "html":
        from .sweep_view import TablePage

        page = TablePage(title=head, headers=columns, rows=tuple(rows), charts=(),
                         skipped=tuple(f"{k}: {v}" for k, v in facts),
                         table_heading="Percentiles", skipped_heading="The run")  # fmt: skip
        return _html(page)
    if fmt == "md":
        body = "\n".join(f"| {md(k)} | {md(v)} |" for k, v in facts)
        return (f"# {md(head)}\n\n|  | value |\n|---|---|\n{body}\n\n"
                + rows_table(rows, columns, fmt))  # fmt: skip
    table = tabulate(rows, headers=columns, tablefmt="simple", disable_numparse=True)
    return terminal(f"{head}\n\n{tabulate(facts, tablefmt='plain')}\n\n{table}\n")


_ORDER = ("TTFT", "TPOT", "latency")


def _percentiles(f: Latencies, suffix: str) -> list[tuple[str, ...]]:
    out = []
    for name, stats in zip(_ORDER, (f.ttft, f.tpot, f.latency), strict=True):
        if stats is not None:  # no TPOT for one-token outputs
            out.append((name + suffix, *(duration(getattr(stats, k))
                                         for k in ("mean", "p50", "p90", "p99"))))  # fmt: skip
    return out


def _rate(f: Latencies, b: Latencies, estimated: bool, name: str) -> str:
    value = fixed(getattr(f, name), 1)
    return f"{value} (bound {fixed(getattr(b, name), 1)})" if estimated else value
