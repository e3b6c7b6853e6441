"""Bar charts as pure functions of plain data (the same input gives the same bytes):
a stacked share bar, A-against-B bars per op kind, and a waterfall of a change. Colours
come from render/palette.py: an op kind has one colour on every chart. Each opens with
charts.svg_open (its own style sheet); user text goes through escape.xml."""

from __future__ import annotations

import math

from modelcost.base.record import Record

from .charts import _r
from .charts import svg_open as _open
from .escape import xml as escape
from .units import duration


def stacked_bar_svg(
    segments: list[tuple[str, float, str]],
    title: str,
    width: int = 760,
) -> str:
    """One horizontal bar split by share: (label, value, colour) segments, in order,
    labelled, with a legend below."""
    total = sum(v for _, v, _ in segments) or 1.0
    bar_h, legend_rows = 26, math.ceil(len(segments) / 3)
    height = 24 + bar_h + 10 + 16 * legend_rows
    out = [_open("bars", width, height, title),
           f'<text x="0" y="14" class="axis">{escape(title)}</text>']  # fmt: skip
    x = 0.0
    for label, value, color in segments:
        w = value / total * width
        out.append(
            f'<rect x="{_r(x)}" y="22" width="{_r(w)}" height="{bar_h}" fill="{color}" '
            f'class="segment"><title>{escape(label)}: {value / total * 100:.1f}%</title></rect>'
        )
        x += w
    for i, (label, value, color) in enumerate(segments):
        lx, ly = (i % 3) * (width / 3), 22 + bar_h + 22 + 16 * (i // 3)
        out.append(
            f'<rect x="{_r(lx)}" y="{ly - 9}" width="9" height="9" fill="{color}"/>'
            f'<text x="{_r(lx + 13)}" y="{ly}" class="legend">{escape(label)} '
            f"{value / total * 100:.1f}%</text>"
        )
    out.append("</svg>")
    return "\n".join(out)


def paired_bars_svg(
    rows: list[tuple[str, float, float, str]],
    title: str,
    a_label: str = "A",
    b_label: str = "B",
    width: int = 760,
) -> str:
    """Time by op kind for A and B side by side: per (label, a, b, colour) row, A's bar
    (light) above B's (solid) on one scale, each with its time."""
    label_w, value_w, row_h = 150, 90, 30
    scale = max((max(a, b) for _, a, b, _ in rows), default=0.0) or 1.0
    bar_w = width - label_w - value_w
    height = 40 + row_h * len(rows)
    out = [_open("paired-bars", width, height, title),
           f'<text x="0" y="14" class="axis">{escape(title)}</text>',
           f'<text x="{label_w}" y="30" class="legend">upper bar: {escape(a_label)}; '
           f"lower: {escape(b_label)}</text>"]  # fmt: skip
    for i, (label, a, b, color) in enumerate(rows):
        y = 40 + row_h * i
        out.append(f'<text x="{label_w - 6}" y="{y + 13}" class="legend" text-anchor="end">'
                   f"{escape(label)}</text>")  # fmt: skip
        for j, (value, opacity, side) in enumerate(((a, 0.4, "A"), (b, 1.0, "B"))):
            w = value / scale * bar_w
            by = y + 2 + 12 * j
            out.append(
                f'<rect x="{label_w}" y="{by}" width="{_r(w)}" height="11" fill="{color}" '
                f'fill-opacity="{opacity}" class="bar-{side.lower()}" data-kind="{escape(label)}">'
                f"<title>{escape(label)}, {side}: {duration(value)}</title></rect>"
            )
            out.append(f'<text x="{_r(label_w + w + 4)}" y="{by + 9}" class="tick">'
                       f"{duration(value)}</text>")  # fmt: skip
    out.append("</svg>")
    return "\n".join(out)


def waterfall_svg(
    a: float,
    steps: list[tuple[str, float, str]],
    b: float,
    title: str,
    width: int = 760,
    height: int = 300,
) -> str:
    """From A's step time to B's: A's bar, one floating bar per (label, change,
    colour) step in order, B's bar; increases rise, decreases fall, each labelled."""
    left, top, bottom = 70, 28, 70
    ph = height - top - bottom
    levels = [a]
    for _, delta, _ in steps:
        levels.append(levels[-1] + delta)
    hi = max([a, b, *levels]) or 1.0
    n = len(steps) + 2
    slot = (width - left) / n
    bar = slot * 0.6

    def Y(v: float) -> float:
        return top + ph - v / hi * ph

    base = _r(Y(0))
    out = [_open("waterfall", width, height, title),
           f'<text x="0" y="14" class="axis">{escape(title)}</text>',
           f'<line x1="{left}" y1="{base}" x2="{width}" y2="{base}" class="grid"/>']  # fmt: skip
    bars = [("A", 0.0, a, "#8a94a6", duration(a))]
    for (label, delta, color), before in zip(steps, levels, strict=False):
        sign = "+" if delta >= 0 else "−"
        bars.append((label, before, before + delta, color, f"{sign}{duration(abs(delta))}"))
    bars.append(("B", 0.0, b, "#3f4a59", duration(b)))
    for i, (label, lo, top_v, color, text) in enumerate(bars):
        x = left + slot * i + (slot - bar) / 2
        y0, y1 = Y(max(lo, top_v)), Y(min(lo, top_v))
        out.append(
            f'<rect x="{_r(x)}" y="{_r(y0)}" width="{_r(bar)}" height="{_r(max(y1 - y0, 1))}" '
            f'fill="{color}" class="step" data-label="{escape(label)}">'
            f"<title>{escape(label)}: {text}</title></rect>"
        )
        out.append(f'<text x="{_r(x + bar / 2)}" y="{_r(y0 - 4)}" class="tick" '
                   f'text-anchor="middle">{text}</text>')  # fmt: skip
        lx, ly = _r(x + bar / 2), top + ph + 12
        out.append(f'<text x="{lx}" y="{ly}" class="legend" text-anchor="end" '
                   f'transform="rotate(-35 {lx} {ly})">{escape(label)}</text>')  # fmt: skip
    out.append("</svg>")
    return "\n".join(out)


class GridCell(Record, frozen=True):
    """One model on one target, for the site's grid: per-token times (None: the model
    does not decode), decode tokens/s and whether it fits in memory."""

    prefill_s: float
    decode_s: float | None
    decode_tps: float | None
    fits: bool


# the grid's three measures (not op kinds: colours of their own)
MEASURES = (("prefill per token", "#3f4a59"), ("decode per token", "#7b8696"),
            ("decode tokens/s", "#2f5fb3"))  # fmt: skip


def grid_svg(
    models: list[str],
    targets: list[str],
    cells: dict[tuple[int, int], GridCell],
    title: str,
    width: int = 1000,
) -> str:
    """Models down, targets across; in each cell a bar per measure, each measure on one
    scale over the whole grid (longer: slower per token, or more tokens/s), its value
    beside it, and whether the model fits."""
    label_w, row_h, head = 170, 58, 54
    col_w = (width - label_w) / max(len(targets), 1)
    height = head + row_h * len(models) + 8
    tops = [
        max((getattr(c, f) or 0.0 for c in cells.values()), default=0.0) or 1.0
        for f in ("prefill_s", "decode_s", "decode_tps")
    ]
    out = [_open("grid", width, height, title),
           f'<text x="0" y="14" class="axis">{escape(title)}</text>']  # fmt: skip
    for i, (name, color) in enumerate(MEASURES):
        lx = label_w + i * 170
        out.append(f'<rect x="{lx}" y="22" width="9" height="9" fill="{color}"/>'
                   f'<text x="{lx + 13}" y="31" class="legend">{name}</text>')  # fmt: skip
    for j, target in enumerate(targets):
        out.append(f'<text x="{_r(label_w + j * col_w)}" y="{head - 6}" class="axis">'
                   f"{escape(target)}</text>")  # fmt: skip
    for i, model in enumerate(models):
        y = head + row_h * i
        out.append(f'<line x1="0" y1="{y}" x2="{width}" y2="{y}" class="grid"/>')
        out.append(f'<text x="0" y="{y + 20}" class="legend">{escape(model)}</text>')
        for j in range(len(targets)):
            c = cells.get((i, j))
            if c is None:
                continue
            x0 = label_w + j * col_w
            bar_w = col_w - 90
            values = (
                (c.prefill_s, duration(c.prefill_s)),
                (c.decode_s, duration(c.decode_s) if c.decode_s is not None else "—"),
                (c.decode_tps, f"{c.decode_tps:,.0f}/s" if c.decode_tps is not None else "—"),
            )
            for k, ((value, text), (measure, color)) in enumerate(zip(values, MEASURES,
                                                                      strict=True)):  # fmt: skip
                by = y + 6 + 13 * k
                w = (value or 0.0) / tops[k] * bar_w
                out.append(f'<rect x="{_r(x0)}" y="{by}" width="{_r(max(w, 0.5))}" height="10" '
                           f'fill="{color}" class="cell-bar" data-measure="{measure}">'
                           f"<title>{escape(model)} on {escape(targets[j])}: {measure} "
                           f"{text}</title></rect>")  # fmt: skip
                out.append(f'<text x="{_r(x0 + w + 4)}" y="{by + 9}" class="tick">{text}</text>')
            fit = "fits" if c.fits else "does not fit"
            out.append(f'<text x="{_r(x0)}" y="{y + 53}" class="{"fits" if c.fits else "no-fit"}">'
                       f"{fit} in HBM</text>")  # fmt: skip
    out.append("</svg>")
    return "\n".join(out)
