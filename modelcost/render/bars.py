"""Bar charts as pure functions of plain data (the same input gives the same bytes):
a stacked share bar, A-against-B bars per op kind, and a waterfall of a change. Colours
come from render/palette.py: an op kind has one colour on every chart."""

from __future__ import annotations

import math
from html import escape

from .charts import _r
from .units import duration


def _open(cls: str, title: str, width: int, height: int) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="{cls}" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-label="{escape(title)}">'
    )


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
    out = [_open("bars", title, width, height),
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
    out = [_open("paired-bars", title, width, height),
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
    out = [_open("waterfall", title, width, height),
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
