"""Charts are pure functions: deterministic, rounded, escaped; the roofline labels its
roofs, ridges and largest ops, leaves ops without FLOPs off the plot with a note, and
orders its legend by share; an op kind has one colour on every chart."""

import re

from modelcost.render.bars import paired_bars_svg, stacked_bar_svg, waterfall_svg
from modelcost.render.charts import PALETTE, Extent, Point, Roof, roofline_extent, roofline_svg
from modelcost.render.palette import KIND_COLORS, LAYER_SHADES, kind_color

POINTS = [
    Point("q_proj", "GEMM", 1365.3, 1.3e15, 0.4, "q_proj: GEMM", "attn.q_proj"),
    Point("sdpa", "SDPA", 7.97, 6.4e13, 0.1, "sdpa"),
    Point("embed", "Embedding", 0.0, 0.0, 0.02, "no FLOPs"),
    Point("<b>x</b>", "Normalization", 1.0, 8e12, 0.48, 'a "quoted" <tip>'),
]
ROOFS = [Roof("matrix bf16", 2516.6e12), Roof("vector bf16", 157.3e12)]


def test_roofline_is_deterministic_and_plots_the_ops_with_flops() -> None:
    a = roofline_svg(POINTS, ROOFS, 8e12)
    assert a == roofline_svg(POINTS, ROOFS, 8e12)
    assert a.count('class="op-point"') == 3  # the embedding has no FLOPs: a note instead
    assert "not plotted: 1 op without FLOPs (lookups, copies), 2.0% of the time" in a
    assert a.count('class="roof"') == 2 and a.count('class="ridge"') == 2


def test_coordinates_are_rounded_to_a_tenth() -> None:
    svg = roofline_svg(POINTS, ROOFS, 8e12)
    for value in re.findall(r'\b(?:cx|cy|x1|y1|x2|y2|r|x|y)="([0-9.]+)"', svg):
        assert len(value.partition(".")[2]) <= 1, value


def test_user_text_is_escaped() -> None:
    svg = roofline_svg(POINTS, ROOFS, 8e12)
    assert "<b>" not in svg and "&lt;b&gt;x&lt;/b&gt;" in svg
    assert "&quot;quoted&quot; &lt;tip&gt;" in svg


def test_roofs_ridges_and_the_largest_ops_are_labelled() -> None:
    svg = roofline_svg(POINTS, ROOFS, 8e12)
    assert "ridge 314.6 FLOP/B (matrix bf16)" in svg  # 2516.6e12 / 8e12
    assert ">315 FLOP/B</text>" in svg and ">20 FLOP/B</text>" in svg  # 157.3e12 / 8e12
    assert ">HBM 8.00 TB/s</text>" in svg
    labels = re.findall(r'class="op-label"[^>]*>([^<]*)<', svg)
    assert labels == ["&lt;b&gt;x&lt;/b&gt;", "attn.q_proj", "sdpa"]  # by share, 3 at most


def test_the_legend_is_ordered_by_share_of_time() -> None:
    svg = roofline_svg(POINTS, ROOFS, 8e12)
    legend = re.findall(r'class="legend">([^<]*)<', svg)
    assert legend == ["Normalization 48%", "GEMM 40%", "SDPA 10%"]


def test_charts_given_one_extent_share_their_axes() -> None:
    # the second chart's ops reach further out; both drawn on the union of the axes
    other = [Point("big", "GEMM", 1e5, 2e15, 1.0, "big")]
    e = roofline_extent(POINTS, ROOFS, 8e12).union(roofline_extent(other, ROOFS, 8e12))
    # intensities 1 / 2 = 0.5 (10^-1) to 1e5 · 4 (10^6); FLOP/s 8e12 / 2 (10^12) to
    # 2e15 · 1.5 (10^16)
    assert e == Extent(x0=-1, x1=6, y0=12, y1=16)
    ticks = [re.findall(r'class="tick"[^>]*>([^<]*)<', roofline_svg(p, ROOFS, 8e12, e))
             for p in (POINTS, other)]  # fmt: skip
    assert ticks[0] == ticks[1]


def test_an_op_kind_has_one_colour_everywhere() -> None:
    roof = roofline_svg(POINTS, ROOFS, 8e12)
    bar = stacked_bar_svg([("GEMM", 3.0, kind_color("GEMM"))], "time by kind")
    pairs = paired_bars_svg([("GEMM", 1.0, 2.0, kind_color("GEMM"))], "A and B")
    for svg in (roof, bar, pairs):
        assert f'fill="{KIND_COLORS["GEMM"]}"' in svg
    assert len(set(KIND_COLORS.values())) == len(KIND_COLORS)  # no colour means two kinds
    assert not set(LAYER_SHADES) & set(KIND_COLORS.values())  # nor a kind and a layer
    assert not set(PALETTE) & (set(KIND_COLORS.values()) | set(LAYER_SHADES))  # nor a series


def test_stacked_bar_shares() -> None:
    svg = stacked_bar_svg([("GEMM", 3.0, "#111111"), ("SDPA", 1.0, "#222222")], "time by kind",
                          width=400)  # fmt: skip
    assert '<rect x="0" y="22" width="300" height="26" fill="#111111"' in svg  # 3/4 of 400
    assert '<rect x="300" y="22" width="100" height="26" fill="#222222"' in svg
    assert "GEMM 75.0%" in svg and "SDPA 25.0%" in svg


def test_the_waterfall_climbs_from_a_to_b() -> None:
    # A = 10 ms, GEMM +6 ms, SDPA −2 ms, B = 14 ms: the plot is 300 − 28 − 70 = 202 px
    # tall for 16 ms (the highest level), so GEMM's bar spans 6/16 of it from 10 ms up
    svg = waterfall_svg(0.010, [("GEMM", 0.006, "#111111"), ("SDPA", -0.002, "#222222")],
                        0.014, "change")  # fmt: skip
    bars = re.findall(r'<rect x="[0-9.]+" y="([0-9.]+)" width="[0-9.]+" height="([0-9.]+)" '
                      r'fill="[^"]+" class="step" data-label="([^"]+)"', svg)  # fmt: skip
    assert [b[2] for b in bars] == ["A", "GEMM", "SDPA", "B"]
    # 202 × 10, 6, 2, 14 / 16 = 126.25, 75.75, 25.25, 176.75 px, to a tenth (binary halves)
    assert [float(b[1]) for b in bars] == [126.2, 75.8, 25.2, 176.8]
    assert ">+6.000 ms<" in svg and ">−2.000 ms<" in svg
