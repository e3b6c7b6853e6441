"""A serving answer as a terminal table, Markdown or JSON. Formatting only."""

from __future__ import annotations

from tabulate import tabulate

from ..serving import Serving
from .escape import md, terminal
from .units import duration, fixed, si


def render_serving(s: Serving, fmt: str) -> str:
    if fmt == "json":
        return s.model_dump_json(indent=2) + "\n"
    rows = [
        ("requests", f"{s.isl:,} in, {s.osl:,} out"),
        ("layout", f"{s.devices} device{'s' if s.devices > 1 else ''}"
                   + (f" ({s.layout})" if s.layout else "")),
        ("concurrency", f"{s.concurrency:,} per replica (at most {s.max_concurrency:,} fit)"),
        ("TTFT", duration(s.ttft_s)),
        ("TPOT", duration(s.tpot_s)),
        ("request latency", duration(s.latency_s)),
        ("output tokens/s", f"{fixed(s.output_tokens_per_s, 1)} "
                            f"({fixed(s.output_tokens_per_s_device, 1)} per device)"),
        ("total tokens/s", fixed(s.total_tokens_per_s, 1)),
        ("memory/device", f"{si(s.memory, 'B')} of {si(s.capacity, 'B')}"
                          + ("" if s.fits else " (does NOT fit)")),
        ("KV per sequence", f"{si(s.kv_per_sequence, 'B')} per device"),
    ]  # fmt: skip
    if s.why:
        rows.append(("targets", f"not met: {s.why}"))
    head = f"{s.model} on {s.hardware}"
    if fmt == "md":
        body = "\n".join(f"| {md(k)} | {md(v)} |" for k, v in rows)
        return f"# {md(head)}\n\n|  | value |\n|---|---|\n{body}\n"
    return terminal(head + "\n\n" + tabulate(rows, tablefmt="plain") + "\n")
