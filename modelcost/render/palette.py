"""The colours of every chart and page: one per op kind, the same wherever the kind
appears (roofline points, the kind bar, diff bars, the waterfall), and a separate ramp
of greys for layer groups, so no colour means two things."""

from __future__ import annotations

# the closed op vocabulary (perfmodel's OpRecord kinds), each its own colour
KIND_COLORS: dict[str, str] = {
    "GEMM": "#4e79a7",
    "GroupedGemm": "#2b5c8a",
    "SDPA": "#f28e2b",
    "Softmax": "#ffbe7d",
    "Normalization": "#59a14f",
    "UnaryElementwise": "#8cd17d",
    "BinaryElementwise": "#b6992d",
    "FusedRoPE": "#f1ce63",
    "Embedding": "#499894",
    "CONV": "#86bcb6",
    "MoERouting": "#e15759",
    "MoEComm": "#ff9d9a",
    "MambaSSD": "#b07aa1",
    "GatedDeltaNet": "#d4a6c8",
    "CausalConv1d": "#9d7660",
    "CrossEntropy": "#d7b5a6",
    "Reduce": "#79706e",
    "Quantize": "#bab0ac",
    "Dequantize": "#d37295",
    "Collective": "#fabfd2",
    "Optimizer": "#a0cbe8",
    "Offload": "#9467bd",
    "RingMerge": "#17becf",
}
OTHER = "#c7c7c7"  # a kind outside the vocabulary (never expected)
# layer groups: greys from dark to light, by share of the time
LAYER_SHADES = ("#3f4a59", "#5d6878", "#7b8696", "#99a3b1", "#b7bfca", "#d3d8e0")


def kind_color(kind: str) -> str:
    return KIND_COLORS.get(kind, OTHER)


def layer_color(rank: int) -> str:
    """The `rank`-th layer group's shade (the largest share first)."""
    return LAYER_SHADES[rank % len(LAYER_SHADES)]
