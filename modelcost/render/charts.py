"""Inline SVG charts as pure functions of plain data: the same input gives the same
bytes (coordinates rounded to 0.1 px), so charts can be golden-tested."""

from __future__ import annotations

import math
from html import escape

from ..record import Record
from .units import si

# A fixed palette, assigned by the sorted order of the kinds present.
PALETTE = (
    "#4e79a7",
    "#f28e2b",
    "#e15759",
    "#76b7b2",
    "#59a14f",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
    "#1f77b4",
    "#8c564b",
    "#17becf",
    "#bcbd22",
)


def colors(keys) -> dict[str, str]:
    return {k: PALETTE[i % len(PALETTE)] for i, k in enumerate(sorted(set(keys)))}


def _r(x: float) -> str:
    """A coordinate rounded to 0.1, without a trailing `.0`."""
    v = round(x, 1)
    return str(int(v)) if v == int(v) else f"{v:.1f}"


class Point(Record, frozen=True):
    """One op: arithmetic intensity (FLOP/B), attained FLOP/s, its share of the time."""

    name: str
    kind: str
    intensity: float
    flops_per_s: float
    share: float
    tooltip: str


class Roof(Record, frozen=True):
    label: str  # e.g. "matrix bf16"
    peak: float  # FLOP/s


def _decades(lo: float, hi: float) -> tuple[int, int]:
    return math.floor(math.log10(lo)), math.ceil(math.log10(hi))


def _tick(decade: int) -> str:
    """`10P`, `100`, `0.1`: a decade's label on a log axis."""
    return si(10.0**decade, sep="")


def roofline_svg(
    points: list[Point], roofs: list[Roof], bandwidth: float, width: int = 760, height: int = 440
) -> str:
    """A log-log roofline: attainable FLOP/s against arithmetic intensity, one roof per
    precision present (with its ridge point), every op a point sized by its share of the
    time and coloured by kind, with a tooltip."""
    left, right, top, bottom = 70, 170, 20, 50
    pw, ph = width - left - right, height - top - bottom
    ridges = [r.peak / bandwidth for r in roofs]
    ais = [p.intensity for p in points if p.intensity > 0] + ridges
    ys = [p.flops_per_s for p in points if p.flops_per_s > 0] + [r.peak for r in roofs]
    x0, x1 = _decades(min(ais) / 2, max(ais) * 4)
    y0, y1 = _decades(min(ys) / 2, max(ys) * 1.5)

    def X(ai: float) -> float:
        return left + (math.log10(ai) - x0) / (x1 - x0) * pw

    def Y(f: float) -> float:
        return top + ph - (math.log10(f) - y0) / (y1 - y0) * ph

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="roofline" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-label="roofline chart">',
        f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" class="plot"/>',
    ]
    for d in range(x0, x1 + 1):
        x = _r(X(10.0**d))
        out.append(f'<line x1="{x}" y1="{top}" x2="{x}" y2="{top + ph}" class="grid"/>')
        out.append(
            f'<text x="{x}" y="{top + ph + 16}" class="tick" text-anchor="middle">{_tick(d)}</text>'
        )
    for d in range(y0, y1 + 1):
        y = _r(Y(10.0**d))
        out.append(f'<line x1="{left}" y1="{y}" x2="{left + pw}" y2="{y}" class="grid"/>')
        out.append(
            f'<text x="{left - 6}" y="{y}" class="tick" text-anchor="end" '
            f'dominant-baseline="middle">{_tick(d)}</text>'
        )
    out.append(
        f'<text x="{_r(left + pw / 2)}" y="{height - 8}" class="axis" '
        'text-anchor="middle">arithmetic intensity (FLOP/byte)</text>'
    )
    out.append(
        f'<text x="14" y="{_r(top + ph / 2)}" class="axis" text-anchor="middle" '
        f'transform="rotate(-90 14 {_r(top + ph / 2)})">attainable FLOP/s</text>'
    )
    lo, hi = 10.0**x0, 10.0**x1
    for roof, ridge in zip(roofs, ridges, strict=True):
        start = max(lo, 10.0**y0 / bandwidth)
        pts = [(start, start * bandwidth), (ridge, roof.peak), (hi, roof.peak)]
        path = " ".join(f"{_r(X(a))},{_r(Y(f))}" for a, f in pts if lo <= a <= hi)
        out.append(f'<polyline points="{path}" class="roof"/>')
        out.append(
            f'<circle cx="{_r(X(ridge))}" cy="{_r(Y(roof.peak))}" r="3" class="ridge">'
            f"<title>ridge {ridge:,.1f} FLOP/B ({escape(roof.label)})</title></circle>"
        )
        out.append(
            f'<text x="{left + pw + 6}" y="{_r(Y(roof.peak))}" class="roof-label" '
            f'dominant-baseline="middle">{escape(roof.label)} {si(roof.peak, "FLOP/s")}'
            "</text>"
        )
    palette = colors(p.kind for p in points)
    for p in sorted(points, key=lambda p: -p.share):  # big first, small drawn on top
        ai = p.intensity if p.intensity > 0 else lo
        fy = p.flops_per_s if p.flops_per_s > 0 else 10.0**y0
        radius = _r(2.5 + 14 * math.sqrt(p.share))
        hollow = ' fill-opacity="0.15"' if p.intensity <= 0 else ""
        out.append(
            f'<circle cx="{_r(X(ai))}" cy="{_r(Y(fy))}" r="{radius}" class="op-point" '
            f'fill="{palette[p.kind]}"{hollow} data-name="{escape(p.name)}" '
            f'data-kind="{escape(p.kind)}"><title>{escape(p.tooltip)}</title></circle>'
        )
    ly = top + ph - 14 * len(palette)
    for i, (kind, color) in enumerate(palette.items()):
        ky = ly + 14 * i
        out.append(
            f'<rect x="{left + pw + 8}" y="{ky - 8}" width="9" height="9" '
            f'fill="{color}"/><text x="{left + pw + 21}" y="{ky}" class="legend">'
            f"{escape(kind)}</text>"
        )
    out.append("</svg>")
    return "\n".join(out)


def stacked_bar_svg(segments: list[tuple[str, float]], title: str, width: int = 760) -> str:
    """One horizontal bar split by share, labelled, with a legend below."""
    total = sum(v for _, v in segments) or 1.0
    palette = colors(label for label, _ in segments)
    bar_h, legend_rows = 26, math.ceil(len(segments) / 3)
    height = 24 + bar_h + 10 + 16 * legend_rows
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="bars" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-label="{escape(title)}">',
        f'<text x="0" y="14" class="axis">{escape(title)}</text>',
    ]
    x = 0.0
    for label, value in segments:
        w = value / total * width
        out.append(
            f'<rect x="{_r(x)}" y="22" width="{_r(w)}" height="{bar_h}" '
            f'fill="{palette[label]}" class="segment"><title>{escape(label)}: '
            f"{value / total * 100:.1f}%</title></rect>"
        )
        x += w
    for i, (label, value) in enumerate(segments):
        lx, ly = (i % 3) * (width / 3), 22 + bar_h + 22 + 16 * (i // 3)
        out.append(
            f'<rect x="{_r(lx)}" y="{ly - 9}" width="9" height="9" '
            f'fill="{palette[label]}"/><text x="{_r(lx + 13)}" y="{ly}" class="legend">'
            f"{escape(label)} {value / total * 100:.1f}%</text>"
        )
    out.append("</svg>")
    return "\n".join(out)


class Series(Record, frozen=True):
    """One line of a line chart: (x, y) points in order; `marked` points are drawn
    filled (e.g. they fit in memory, or lie on the Pareto front), the others hollow."""

    label: str
    points: tuple[tuple[float, float], ...]
    marked: tuple[bool, ...]
    joined: bool = True  # a line through the points, or the points alone


def line_svg(
    series: list[Series],
    x_label: str,
    y_label: str,
    name: str,
    lines: tuple[tuple[str, float], ...] = (),
    width: int = 760,
    height: int = 400,
) -> str:
    """A log-log line chart, one coloured line per series with a legend; `lines` are
    labelled horizontal lines (a capacity). Every point has a tooltip."""
    left, right, top, bottom = 70, 200, 20, 50
    pw, ph = width - left - right, height - top - bottom
    xs = [x for s in series for x, _ in s.points if x > 0]
    ys = [y for s in series for _, y in s.points if y > 0] + [v for _, v in lines]
    x0, x1 = _decades(min(xs), max(xs) * 1.01)
    y0, y1 = _decades(min(ys), max(ys) * 1.01)
    x1, y1 = max(x1, x0 + 1), max(y1, y0 + 1)

    def X(v: float) -> float:
        return left + (math.log10(v) - x0) / (x1 - x0) * pw

    def Y(v: float) -> float:
        return top + ph - (math.log10(v) - y0) / (y1 - y0) * ph

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="line-chart" data-chart="{escape(name)}" '
        f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'aria-label="{escape(y_label)} against {escape(x_label)}">',
        f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" class="plot"/>',
    ]
    for d in range(x0, x1 + 1):
        gx = _r(X(10.0**d))
        out.append(f'<line x1="{gx}" y1="{top}" x2="{gx}" y2="{top + ph}" class="grid"/>')
        out.append(f'<text x="{gx}" y="{top + ph + 16}" class="tick" text-anchor="middle">'
                   f"{_tick(d)}</text>")  # fmt: skip
    for d in range(y0, y1 + 1):
        gy = _r(Y(10.0**d))
        out.append(f'<line x1="{left}" y1="{gy}" x2="{left + pw}" y2="{gy}" class="grid"/>')
        out.append(f'<text x="{left - 6}" y="{gy}" class="tick" text-anchor="end" '
                   f'dominant-baseline="middle">{_tick(d)}</text>')  # fmt: skip
    out.append(f'<text x="{_r(left + pw / 2)}" y="{height - 8}" class="axis x-axis" '
               f'text-anchor="middle">{escape(x_label)}</text>')  # fmt: skip
    mid = _r(top + ph / 2)
    out.append(f'<text x="14" y="{mid}" class="axis y-axis" text-anchor="middle" '
               f'transform="rotate(-90 14 {mid})">{escape(y_label)}</text>')  # fmt: skip
    for label, value in lines:
        ly = _r(Y(value))
        out.append(f'<line x1="{left}" y1="{ly}" x2="{left + pw}" y2="{ly}" class="roof"/>')
        out.append(f'<text x="{left + 4}" y="{ly}" dy="-4" class="roof-label">'
                   f"{escape(label)}</text>")  # fmt: skip
    palette = {s.label: PALETTE[i % len(PALETTE)] for i, s in enumerate(series)}
    for s in series:
        color = palette[s.label]
        pts = [(x, y) for x, y in s.points if x > 0 and y > 0]
        path = " ".join(f"{_r(X(x))},{_r(Y(y))}" for x, y in pts)
        if s.joined:
            out.append(f'<polyline points="{path}" fill="none" stroke="{color}" '
                       f'class="series" data-series="{escape(s.label)}"/>')  # fmt: skip
        for (x, y), filled in zip(s.points, s.marked, strict=True):
            if x <= 0 or y <= 0:
                continue
            fill = color if filled else "white"
            out.append(f'<circle cx="{_r(X(x))}" cy="{_r(Y(y))}" r="3" fill="{fill}" '
                       f'stroke="{color}" class="pt{" marked" if filled else ""}">'
                       f"<title>{escape(s.label)}: {si(x)} {escape(x_label)}, {si(y)} "
                       f"{escape(y_label)}</title></circle>")  # fmt: skip
    for i, s in enumerate(series):
        ky = top + 8 + 14 * i
        out.append(f'<rect x="{left + pw + 8}" y="{ky - 8}" width="9" height="9" '
                   f'fill="{palette[s.label]}"/><text x="{left + pw + 21}" y="{ky}" '
                   f'class="legend">{escape(s.label)}</text>')  # fmt: skip
    out.append("</svg>")
    return "\n".join(out)
