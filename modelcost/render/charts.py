"""SVG charts as pure functions of plain data: the same input gives the same bytes
(coordinates rounded to 0.1 px), so charts can be golden-tested. Each chart carries its
own style sheet (`CHART_CSS`), so it looks the same inline in a page and alone, as a file
beside Markdown (GitHub, MkDocs, an image viewer). User text goes through escape.xml."""

from __future__ import annotations

import math

from modelcost.base.record import Record

from .escape import xml as escape
from .palette import kind_color
from .units import plural, si

# the colours and font of the pages (templates/_style.css.j2 reads them) and their charts
INK = {"fg": "#1d2330", "muted": "#5b6475", "line": "#d8dce4"}
FONT = "-apple-system, Segoe UI, Roboto, Helvetica, Arial, sans-serif"
# every chart's style, scoped to its root (`svg.modelcost`); no blank line (a Markdown
# page's inline SVG is one raw HTML block)
CHART_CSS = "\n".join((
    f"svg.modelcost {{ font-family: {FONT}; font-size: 14px; }}",
    f"svg.modelcost .plot {{ fill: #fbfcfe; stroke: {INK['line']}; }}",
    "svg.modelcost .grid { stroke: #e9ecf2; stroke-width: 1; }",
    "svg.modelcost .tick, svg.modelcost .legend, svg.modelcost .roof-label, "
    f"svg.modelcost .note {{ font-size: 10px; fill: {INK['muted']}; }}",
    "svg.modelcost .ridge-label, svg.modelcost .bw-label { font-size: 10px; fill: #333; }",
    f"svg.modelcost .op-label {{ font-size: 10px; fill: {INK['fg']}; font-weight: 600; }}",
    f"svg.modelcost .axis {{ font-size: 11px; fill: {INK['fg']}; }}",
    "svg.modelcost .roof { fill: none; stroke: #333; stroke-width: 1.5; }",
    "svg.modelcost .ridge { fill: #333; }",
    "svg.modelcost .op-point { stroke: #222; stroke-width: 0.6; fill-opacity: 0.75; }",
    "svg.modelcost .fits { font-size: 10px; fill: #3b7a3b; }",
    "svg.modelcost .no-fit { font-size: 10px; fill: #b3261e; font-weight: 600; }",
))  # fmt: skip


NL = "\n"  # a tip's line break (an attribute keeps it as &#10;)


def svg_open(cls: str, width: int, height: int, label: str, attrs: str = "") -> str:
    """A chart's opening tag and its style sheet: `cls` its kind (`roofline`, ...),
    `label` its accessible name (user text escaped here), `attrs` more of ours."""
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="modelcost {cls}"{attrs} '
        f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'aria-label="{escape(label)}">\n<style>\n{CHART_CSS}\n</style>'
    )


# the series of a line chart (layouts, contexts): colours no op kind or layer group has
# (render/palette.py), so a colour never means two things across pages
PALETTE = (
    "#1b9e77",
    "#d95f02",
    "#7570b3",
    "#e7298a",
    "#66a61e",
    "#e6ab02",
    "#a6761d",
    "#1f78b4",
    "#6a3d9a",
    "#b15928",
)


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
    label: str = ""  # a short name, shown beside the point when it is among the largest


class Roof(Record, frozen=True):
    label: str  # e.g. "matrix bf16"
    peak: float  # FLOP/s


class Extent(Record, frozen=True):
    """A log-log chart's axes, in decades: x from 10^x0 to 10^x1, y from 10^y0 to 10^y1.
    Charts given the same extent (a report's phases, a diff's sides) compare at a
    glance."""

    x0: int
    x1: int
    y0: int
    y1: int

    def union(self, other: Extent) -> Extent:
        return Extent(x0=min(self.x0, other.x0), x1=max(self.x1, other.x1),
                      y0=min(self.y0, other.y0), y1=max(self.y1, other.y1))  # fmt: skip


def _decades(lo: float, hi: float) -> tuple[int, int]:
    return math.floor(math.log10(lo)), math.ceil(math.log10(hi))


def _width(text: str) -> float:
    """About how wide a label is drawn, in px (10 px sans-serif, bold: 6.5 px a
    character, a little over the average, so neighbours keep a gap)."""
    return 6.5 * len(text)


def _tick(decade: int) -> str:
    """`10P`, `100`, `0.1`: a decade's label on a log axis."""
    return si(10.0**decade, sep="")


def _plotted(p: Point) -> bool:
    """An op with no FLOPs (a lookup, a copy) has no place on a log-log roofline."""
    return p.intensity > 0 and p.flops_per_s > 0


def roofline_extent(points: list[Point], roofs: list[Roof], bandwidth: float) -> Extent:
    """The axes that hold every plotted point, roof and ridge of one or more charts."""
    ridges = [r.peak / bandwidth for r in roofs]
    ais = [p.intensity for p in points if _plotted(p)] + ridges
    ys = [p.flops_per_s for p in points if _plotted(p)] + [r.peak for r in roofs]
    x0, x1 = _decades(min(ais) / 2, max(ais) * 4)
    y0, y1 = _decades(min(ys) / 2, max(ys) * 1.5)
    return Extent(x0=x0, x1=x1, y0=y0, y1=y1)


LABELLED = 3  # the ops with the largest shares are named on the chart


class _Plot(Record, frozen=True):
    """A log-log plot area: where it sits in the SVG (left, top, its width and height)
    and the decades its axes span."""

    left: int
    top: int
    pw: int
    ph: int
    x0: int
    x1: int
    y0: int
    y1: int

    def X(self, v: float) -> float:
        return self.left + (math.log10(v) - self.x0) / (self.x1 - self.x0) * self.pw

    def Y(self, v: float) -> float:
        return self.top + self.ph - (math.log10(v) - self.y0) / (self.y1 - self.y0) * self.ph


def _grid(p: _Plot) -> list[str]:
    """The plot's frame, and a grid line with its tick at every decade of each axis."""
    left, top, pw, ph = p.left, p.top, p.pw, p.ph
    out = [f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" class="plot"/>']
    for d in range(p.x0, p.x1 + 1):
        x = _r(p.X(10.0**d))
        out.append(f'<line x1="{x}" y1="{top}" x2="{x}" y2="{top + ph}" class="grid"/>')
        out.append(f'<text x="{x}" y="{top + ph + 16}" class="tick" text-anchor="middle">'
                   f"{_tick(d)}</text>")  # fmt: skip
    for d in range(p.y0, p.y1 + 1):
        y = _r(p.Y(10.0**d))
        out.append(f'<line x1="{left}" y1="{y}" x2="{left + pw}" y2="{y}" class="grid"/>')
        out.append(f'<text x="{left - 6}" y="{y}" class="tick" text-anchor="end" '
                   f'dominant-baseline="middle">{_tick(d)}</text>')  # fmt: skip
    return out


def roofline_svg(
    points: list[Point],
    roofs: list[Roof],
    bandwidth: float,
    extent: Extent | None = None,
    width: int = 760,
    height: int = 440,
) -> str:
    """A log-log roofline: attainable FLOP/s against arithmetic intensity, one roof per
    precision present (its ridge point labelled in FLOP/B), the bandwidth roof labelled
    in TB/s, every op a point sized by its share of the time and coloured by kind (the
    largest named), a legend by share of time, and a note for the ops without FLOPs,
    which are not plotted. Pages stretch it to their width (the style sheet)."""
    left, right, top, bottom = 70, 170, 20, 66
    e = extent or roofline_extent(points, roofs, bandwidth)
    p = _Plot(left, top, width - left - right, height - top - bottom, e.x0, e.x1, e.y0, e.y1)
    mid = _r(top + p.ph / 2)
    out = [
        svg_open("roofline", width, height, "roofline chart"),
        *_grid(p),
        f'<text x="{_r(left + p.pw / 2)}" y="{top + p.ph + 34}" class="axis" '
        'text-anchor="middle">arithmetic intensity (FLOP/byte)</text>',
        f'<text x="14" y="{mid}" class="axis" text-anchor="middle" '
        f'transform="rotate(-90 14 {mid})">attainable FLOP/s</text>',
    ]
    start = max(10.0**e.x0, 10.0**e.y0 / bandwidth)  # where the bandwidth roof enters
    placed: list[tuple[float, float, float]] = []  # labels drawn: (x from, x to, y)
    out += _roof_lines(p, roofs, bandwidth, start, placed)
    out.append(_bandwidth_label(p, bandwidth, start))
    plotted = [q for q in points if _plotted(q)]
    ranked = sorted(plotted, key=lambda q: (-q.share, q.name))
    out += _op_points(p, ranked, placed)
    out += _kind_legend(p, plotted)
    hidden = [q for q in points if not _plotted(q)]
    if hidden:
        off = sum(q.share for q in hidden)
        unplotted = plural(len(hidden), "op")
        out.append(
            f'<text x="{left}" y="{height - 6}" class="note">not plotted: {unplotted} '
            f"without FLOPs (lookups, copies), {off * 100:.1f}% of the time</text>"
        )
    out.append("</svg>")
    return "\n".join(out)


def _roof_lines(p: _Plot, roofs: list[Roof], bandwidth: float, start: float,
                placed: list[tuple[float, float, float]]) -> list[str]:  # fmt: skip
    """Each precision's roof from where the bandwidth roof enters, its ridge point and
    knee labelled (the knee's label recorded in `placed`), its peak named at the right."""
    lo, hi = 10.0**p.x0, 10.0**p.x1
    out = []
    for roof in roofs:
        ridge = roof.peak / bandwidth
        pts = [(start, start * bandwidth), (ridge, roof.peak), (hi, roof.peak)]
        path = " ".join(f"{_r(p.X(a))},{_r(p.Y(f))}" for a, f in pts if lo <= a <= hi)
        out.append(f'<polyline points="{path}" class="roof"/>')
        rx, ry = _r(p.X(ridge)), _r(p.Y(roof.peak))
        out.append(
            f'<circle cx="{rx}" cy="{ry}" r="3" class="ridge">'
            f"<title>ridge {ridge:,.1f} FLOP/B ({escape(roof.label)})</title></circle>"
        )
        knee = f"{ridge:,.0f} FLOP/B"
        out.append(f'<text x="{rx}" y="{ry}" dx="5" dy="13" class="ridge-label">{knee}</text>')
        kx, ky = p.X(ridge) + 5, p.Y(roof.peak) + 9  # its middle: a baseline 13 px down
        placed.append((kx, kx + _width(knee), ky))
        out.append(
            f'<text x="{p.left + p.pw + 6}" y="{ry}" class="roof-label" '
            f'dominant-baseline="middle">{escape(roof.label)} {si(roof.peak, "FLOP/s")}'
            "</text>"
        )
    return out


def _bandwidth_label(p: _Plot, bandwidth: float, start: float) -> str:
    """The bandwidth roof's label, along its slope."""
    a0 = start * 1.6
    x_a, y_a = p.X(a0), p.Y(a0 * bandwidth)
    angle = math.degrees(math.atan2(p.Y(a0 * 10 * bandwidth) - y_a, p.X(a0 * 10) - x_a))
    return (
        f'<text x="{_r(x_a)}" y="{_r(y_a)}" dy="-5" class="bw-label" '
        f'transform="rotate({_r(angle)} {_r(x_a)} {_r(y_a)})">HBM {bandwidth / 1e12:,.2f} TB/s'
        "</text>"
    )


def _op_points(p: _Plot, ranked: list[Point],
               placed: list[tuple[float, float, float]]) -> list[str]:  # fmt: skip
    """Every op a point sized by its share of the time, the largest drawn first (the
    small ones on top); the LABELLED largest named, each label below any already there
    (a knee's, or ops at one point)."""
    out = []
    for q in ranked:
        radius = _r(2.5 + 14 * math.sqrt(q.share))
        out.append(
            f'<circle cx="{_r(p.X(q.intensity))}" cy="{_r(p.Y(q.flops_per_s))}" r="{radius}" '
            f'class="op-point" fill="{kind_color(q.kind)}" data-name="{escape(q.name)}" '
            f'data-kind="{escape(q.kind)}"><title>{escape(q.tooltip)}</title></circle>'
        )
    for q in ranked[:LABELLED]:
        text = q.label or q.name
        tx, ty = p.X(q.intensity) + 4 + 14 * math.sqrt(q.share), p.Y(q.flops_per_s)
        while any(abs(ty - y) < 12 and tx < x1 and x0 < tx + _width(text)
                  for x0, x1, y in placed):  # fmt: skip
            ty += 12
        placed.append((tx, tx + _width(text), ty))
        out.append(
            f'<text x="{_r(tx)}" y="{_r(ty)}" class="op-label" dominant-baseline="middle">'
            f"{escape(text)}</text>"
        )
    return out


def _kind_legend(p: _Plot, plotted: list[Point]) -> list[str]:
    """The op kinds plotted, by their share of the time, at the plot's bottom right."""
    share: dict[str, float] = {}
    for q in plotted:
        share[q.kind] = share.get(q.kind, 0.0) + q.share
    kinds = sorted(share, key=lambda k: (-share[k], k))
    ly = p.top + p.ph - 14 * len(kinds)
    out = []
    for i, kind in enumerate(kinds):
        ky = ly + 14 * i
        out.append(
            f'<rect x="{p.left + p.pw + 8}" y="{ky - 8}" width="9" height="9" '
            f'fill="{kind_color(kind)}"/><text x="{p.left + p.pw + 21}" y="{ky}" class="legend">'
            f"{escape(kind)} {share[kind] * 100:.0f}%</text>"
        )
    return out


class Series(Record, frozen=True):
    """One line of a line chart: (x, y) points in order; `marked` points are drawn
    filled (e.g. they fit in memory, or lie on the Pareto front), the others hollow."""

    label: str
    points: tuple[tuple[float, float], ...]
    marked: tuple[bool, ...]
    joined: bool = True  # a line through the points, or the points alone
    tips: tuple[str, ...] = ()  # each point's tooltip (an interactive chart's): its figures


Domain = tuple[float, float, float, float]  # x from, x to, y from, y to (all > 0)


def domain(series: list[Series], lines: tuple[tuple[str, float], ...] = ()) -> Domain:
    """The extent of every positive point (and line) of `series`: charts drawn over one
    domain share their axes (small multiples)."""
    xs = [x for s in series for x, _ in s.points if x > 0]
    ys = [y for s in series for _, y in s.points if y > 0] + [v for _, v in lines]
    return min(xs), max(xs), min(ys), max(ys)


def line_svg(
    series: list[Series],
    x_label: str,
    y_label: str,
    name: str,
    lines: tuple[tuple[str, float], ...] = (),
    width: int = 760,
    height: int = 400,
    over: Domain | None = None,
    interactive: bool = False,
) -> str:
    """A log-log line chart, one coloured line per series with a legend; `lines` are
    labelled horizontal lines (a capacity). Every point has a tooltip. `over`: the
    domain to draw (`domain` of several charts' series, so they share their axes);
    by default the series' own. Each series its own colour while there are no more
    than PALETTE's (callers keep to that: render/sweep_view.py). `interactive`: each
    series in a group and each legend entry a button of the same `data-series` (the
    page's script hides a series when its entry is clicked), each point's tip (the
    series' `tips`, else its coordinates) in `data-tip` for the page's tooltip."""
    left, right, top, bottom = 70, 200, 20, 50
    pw, ph = width - left - right, height - top - bottom
    xa, xb, ya, yb = over if over is not None else domain(series, lines)
    x0, x1 = _decades(xa, xb * 1.01)
    y0, y1 = _decades(ya, yb * 1.01)
    p = _Plot(left, top, pw, ph, x0, max(x1, x0 + 1), y0, max(y1, y0 + 1))
    label = f"{y_label} against {x_label}"
    out = [svg_open("line-chart", width, height, label, f' data-chart="{escape(name)}"'),
           *_grid(p)]  # fmt: skip
    out.append(f'<text x="{_r(left + pw / 2)}" y="{height - 8}" class="axis x-axis" '
               f'text-anchor="middle">{escape(x_label)}</text>')  # fmt: skip
    mid = _r(top + ph / 2)
    out.append(f'<text x="14" y="{mid}" class="axis y-axis" text-anchor="middle" '
               f'transform="rotate(-90 14 {mid})">{escape(y_label)}</text>')  # fmt: skip
    for said, value in lines:
        ly = _r(p.Y(value))
        out.append(f'<line x1="{left}" y1="{ly}" x2="{left + pw}" y2="{ly}" class="roof"/>')
        out.append(f'<text x="{left + 4}" y="{ly}" dy="-4" class="roof-label">'
                   f"{escape(said)}</text>")  # fmt: skip
    palette = {s.label: PALETTE[i % len(PALETTE)] for i, s in enumerate(series)}
    for s in series:
        out += _series(p, s, palette[s.label], x_label, y_label, interactive)
    out += _series_legend(p, series, palette, interactive)
    out.append("</svg>")
    return "\n".join(out)


def _series(p: _Plot, s: Series, color: str, x_label: str, y_label: str,
            interactive: bool) -> list[str]:  # fmt: skip
    """One series: its line (where joined) and its points, each with its tip; in a
    group of its own on an interactive chart."""
    out = []
    if interactive:
        out.append(f'<g class="series-group" data-series="{escape(s.label)}">')
    pts = [(x, y) for x, y in s.points if x > 0 and y > 0]
    path = " ".join(f"{_r(p.X(x))},{_r(p.Y(y))}" for x, y in pts)
    if s.joined:
        out.append(f'<polyline points="{path}" fill="none" stroke="{color}" '
                   f'class="series" data-series="{escape(s.label)}"/>')  # fmt: skip
    tips = s.tips or ("",) * len(s.points)
    for (x, y), filled, tip in zip(s.points, s.marked, tips, strict=True):
        if x <= 0 or y <= 0:
            continue
        fill = color if filled else "white"
        said = tip or f"{s.label}: {si(x)} {x_label}, {si(y)} {y_label}"
        lines_said = "&#10;".join(escape(line) for line in said.split(NL))
        data = f' data-tip="{lines_said}"' if interactive else ""
        out.append(f'<circle cx="{_r(p.X(x))}" cy="{_r(p.Y(y))}" r="3" fill="{fill}" '
                   f'stroke="{color}" class="pt{" marked" if filled else ""}"{data}>'
                   f"<title>{escape(said.replace(NL, '; '))}</title></circle>")  # fmt: skip
    if interactive:
        out.append("</g>")
    return out


def _series_legend(p: _Plot, series: list[Series], palette: dict[str, str],
                   interactive: bool) -> list[str]:  # fmt: skip
    """A legend entry a series, in order, at the plot's top right; on an interactive
    chart each a button of its series."""
    out = []
    for i, s in enumerate(series):
        ky = p.top + 8 + 14 * i
        entry = (f'<rect x="{p.left + p.pw + 8}" y="{ky - 8}" width="9" height="9" '
                 f'fill="{palette[s.label]}"/><text x="{p.left + p.pw + 21}" y="{ky}" '
                 f'class="legend">{escape(s.label)}</text>')  # fmt: skip
        if interactive:
            entry = (f'<g class="legend-item" data-series="{escape(s.label)}" role="button" '
                     f'tabindex="0" aria-pressed="true">{entry}</g>')  # fmt: skip
        out.append(entry)
    return out
