"""Charts are pure functions: deterministic, rounded, escaped, one point per op."""

import re

from modelcost.render.charts import Point, Roof, roofline_svg, stacked_bar_svg

POINTS = [
    Point("q_proj", "GEMM", 1365.3, 1.3e15, 0.4, "q_proj: GEMM"),
    Point("sdpa", "SDPA", 7.97, 6.4e13, 0.1, "sdpa"),
    Point("embed", "Embedding", 0.0, 0.0, 0.0, "no FLOPs"),
    Point("<b>x</b>", "Normalization", 1.0, 8e12, 0.5, 'a "quoted" <tip>'),
]
ROOFS = [Roof("matrix bf16", 2516.6e12), Roof("vector bf16", 157.3e12)]


def test_roofline_is_deterministic_and_has_one_point_per_op() -> None:
    a = roofline_svg(POINTS, ROOFS, 8e12)
    assert a == roofline_svg(POINTS, ROOFS, 8e12)
    assert a.count('class="op-point"') == len(POINTS)
    assert a.count('class="roof"') == 2 and a.count('class="ridge"') == 2


def test_coordinates_are_rounded_to_a_tenth() -> None:
    svg = roofline_svg(POINTS, ROOFS, 8e12)
    for value in re.findall(r'\b(?:cx|cy|x1|y1|x2|y2|r)="([0-9.]+)"', svg):
        assert len(value.partition(".")[2]) <= 1, value


def test_user_text_is_escaped() -> None:
    svg = roofline_svg(POINTS, ROOFS, 8e12)
    assert "<b>" not in svg and "&lt;b&gt;x&lt;/b&gt;" in svg
    assert "&quot;quoted&quot; &lt;tip&gt;" in svg


def test_ridge_points_sit_at_peak_over_bandwidth() -> None:
    svg = roofline_svg(POINTS, ROOFS, 8e12)
    assert "ridge 314.6 FLOP/B (matrix bf16)" in svg  # 2516.6e12 / 8e12
    assert "ridge 19.7 FLOP/B (vector bf16)" in svg


def test_stacked_bar_shares() -> None:
    svg = stacked_bar_svg([("GEMM", 3.0), ("SDPA", 1.0)], "time by kind", width=400)
    assert '<rect x="0" y="22" width="300" height="26"' in svg  # 3/4 of 400
    assert '<rect x="300" y="22" width="100" height="26"' in svg
    assert "GEMM 75.0%" in svg and "SDPA 25.0%" in svg
