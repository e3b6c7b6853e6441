"""Plain-text summary for the terminal."""

from __future__ import annotations

from tabulate import tabulate

from modelcost.ir.report import PER_TOKEN, Report, comm_label

from .escape import clean, terminal
from .units import duration, fixed, held, ms, pct, si


def render_text(reports: list[Report]) -> str:
    return terminal("\n".join(_one(r) for r in reports))


def _one(r: Report) -> str:
    t, w, h = r.totals, r.workload, r.hardware
    # the user's titles on this one line (render/escape.clean), whatever they hold
    head = clean(
        f"{r.model.title} on {h.title} ({h.peak} peaks), {w.phase} batch {w.batch}, {w.label}"
    )
    pt = t.per_token
    rows = [
        ["step time", duration(t.time_s)],
        [PER_TOKEN, duration(pt.ms_per_token / 1e3)],
        ["tokens/s", fixed(pt.tokens_per_s, 1)],
        *(
            [
                ["devices", f"{w.layout.devices} ({w.layout.label})"],
                ["per device", f"{fixed(pt.tokens_per_s_device, 1)} tokens/s"],
                [
                    comm_label(w.layout),
                    f"{duration(t.comm_s)} ({duration(t.comm_exposed_s)} exposed)",
                ],
                *([["pipeline bubble", duration(t.bubble_s)]] if t.bubble_s else []),
            ]
            if w.layout.devices > 1 or w.layout.offload
            else []
        ),
        ["FLOPs", si(t.flops, "FLOP")],
        ["bytes", si(t.bytes, "B")],
        ["bound", f"{t.bound} ({pct(t.compute_share)} of the time in compute-bound ops)"],
        ["MFU bound", pct(t.mfu_bound)],
        *(
            [
                [
                    "estimate",
                    f"{duration(t.estimate_s)} a step with the kernels that would serve it "
                    f"({pct(t.efficiency or 0)} of the roofline; MFU {pct(t.mfu_estimate or 0)})",
                ]
            ]
            if t.estimate_s is not None
            else []
        ),
        [
            "memory" if w.layout.devices == 1 else "memory/device",
            f"{held(t.memory.total)} of {held(t.memory.capacity)} ({r.hardware.memory_basis})",
        ],
    ]
    out = [head, tabulate(rows, tablefmt="plain")]
    if t.memory.warning:
        out.append(f"warning: {clean(t.memory.warning)}")
    kinds = [[k.kind, si(k.flops, "FLOP"), si(k.bytes, "B"), ms(k.time_s), pct(k.share)]
             for k in r.kinds]  # fmt: skip
    out.append(tabulate(kinds, headers=["kind", "FLOPs", "bytes", "ms", "share"]))
    return "\n\n".join(out) + "\n"
