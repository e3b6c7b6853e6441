"""Precision recipes: how a deployment feeds each linear layer's operands to its kernel.

A spec states its recipe in one line (`recipe = fp8`). The recipe sets what the linear
layers' weights are stored in and how they are scaled, and whether their activations
are quantized at the GEMM's input (W8A8, A4W4: an explicit Quantize op, and the GEMM
runs at the narrow precision's peak) or fed as they are (weight-only W8A16 / W4A16: the
GEMM reads narrow weights and computes at the activation precision, dequantizing them
in its registers). `attention` makes attention run in FP8 too (FP8 queries over an FP8
KV cache, as FlashAttention-3 does). Embeddings, norms and the LM head stay as the
spec's dtypes say, as the published checkpoints keep them.

Scale bytes: block-scaled dtypes (MXFP4, NVFP4) carry theirs in their size
(`dtypes.DTYPES`); the others name their scales' granularity here.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from modelcost.base.dtypes import DTYPES, DType
from modelcost.base.record import Record, replace

Granularity = Literal["tensor", "channel", "token", "group", "block"]


class Scales(Record, frozen=True):
    """One `dtype` scale per `rows` × `cols` block of a matrix (rows along N for weights,
    M for activations; cols along K); `tensor`: one for the whole matrix, `channel`:
    one per output row, `token`: one per activation row."""

    granularity: Granularity
    dtype: DType = DType.fp32
    rows: int = 0
    cols: int = 0

    def count(self, rows: int, cols: int) -> int:
        """Scales of a rows × cols matrix."""
        match self.granularity:
            case "tensor":
                return 1
            case "channel" | "token":
                return rows
            case "group":
                return rows * -(-cols // self.cols)
        return -(-rows // self.rows) * -(-cols // self.cols)


class Recipe(Record, frozen=True):
    name: str
    title: str
    weights: DType | None  # the linear layers' weight storage (None: the spec's)
    weight_scales: Scales | None = None  # None: in the dtype (MX, NVFP4) or unscaled
    activations: DType | None = None  # quantized at the GEMM input; None: fed as they are
    activation_scales: Scales | None = None
    attention: bool = False  # FP8 queries, keys and values: attention at the FP8 peak
    # training's casts: each reads its tensor once more for the amax its scale is taken
    # from (current scaling), and keeps a second, column-wise quantized copy for the
    # weight gradient (block scales that run along K: the transposed operand needs its own)
    amax_pass: bool = False
    columnwise: bool = False
    source: str = ""

    @property
    def scale_bytes_per_weight(self) -> float:
        """Scale bytes stored per weight element: a group's or block's share (per-tensor
        and per-channel scales are one per matrix or row: left out, under 0.1 %)."""
        sc = self.weight_scales
        if sc is None or sc.granularity not in ("group", "block"):
            return 0.0
        return DTYPES[sc.dtype].bytes_per_element / (sc.rows * sc.cols)


_TENSOR = Scales("tensor")

_FP8 = Recipe(
    "fp8",
    "FP8 W8A8, per-tensor scales",
    DType.fp8_e4m3,
    _TENSOR,
    DType.fp8_e4m3,
    _TENSOR,
    source="NVIDIA ModelOpt FP8 checkpoints (TensorRT-LLM, vLLM): static per-tensor "
    "weight and activation scales",
)

_FP8_BLOCK = Recipe(
    "fp8_block",
    "FP8 W8A8, 128×128 weight blocks and 1×128 activation blocks",
    DType.fp8_e4m3,
    Scales("block", DType.fp32, 128, 128),
    DType.fp8_e4m3,
    Scales("block", DType.fp32, 1, 128),
    source="DeepSeek-V3 technical report, section 3.3 (fine-grained quantization)",
)

RECIPES: dict[str, Recipe] = {
    r.name: r
    for r in (
        Recipe("none", "as the dtypes say", None),
        _FP8,
        Recipe(
            "fp8_dynamic",
            "FP8 W8A8, per-channel weight and per-token activation scales",
            DType.fp8_e4m3,
            Scales("channel"),
            DType.fp8_e4m3,
            Scales("token"),
            source="vLLM FP8 dynamic quantization (llm-compressor FP8_DYNAMIC): scales "
            "per output channel, and per token computed as each batch arrives",
        ),
        # training's FP8, as Transformer Engine runs it and Megatron-Bridge names it
        replace(
            _FP8,
            name="fp8_cs",
            title="FP8 training, per-tensor current scaling",
            amax_pass=True,
            source="Transformer Engine Float8CurrentScaling (Megatron-Bridge FP8-CS): each "
            "cast first reads its tensor for the amax (nvte_compute_amax), then casts; "
            "weights kept in FP8 (fp8_param_gather), fp32 master weights",
        ),
        replace(
            _FP8,
            name="fp8_ds",
            title="FP8 training, per-tensor delayed scaling",
            source="Transformer Engine DelayedScaling: the scale from an amax history, the "
            "amax taken by the cast as it goes (one pass), reduced once a pass",
        ),
        Recipe(
            "mxfp8",
            "MXFP8 training (OCP MX E4M3, an E8M0 scale per 32)",
            DType.mxfp8,
            None,
            DType.mxfp8,
            None,
            columnwise=True,
            source="Transformer Engine MXFP8BlockScaling on Blackwell (Megatron-Bridge "
            "MXFP8): 1×32 scales along K, so training quantizes each tensor twice, row- "
            "and column-wise (its 'x2' scaling kernels), one pass",
        ),
        # FP8 attention is the fp8 recipe with FP8 queries and cache too
        replace(
            _FP8,
            name="fp8_attention",
            title="FP8 W8A8, per-tensor scales, and FP8 attention",
            attention=True,
            source="FlashAttention-3 FP8 (Shah et al. 2024) over an FP8 KV cache",
        ),
        _FP8_BLOCK,
        # training's block scaling, as Transformer Engine runs DeepSeek-V3's granularity
        replace(
            _FP8_BLOCK,
            name="fp8_bs",
            title="FP8 training, block scaling (1×128 activations and gradients, 128×128 weights)",
            columnwise=True,
            source="Transformer Engine Float8BlockScaling (Megatron-Bridge FP8 blockwise, "
            "fp8_recipe 'blockwise'): fp32 scales per 1×128 tile of activations and "
            "gradients, per 128×128 block of weights, as the DeepSeek-V3 report (section "
            "3.3) sets them; the 1×128 tiles run along K, so each tensor is quantized "
            "row-wise and column-wise (its columnwise usage), the block's amax taken as it "
            "goes (one pass); every GEMM with the split accumulator",
        ),
        Recipe(
            "w8a16",
            "INT8 weights, per-channel scales, BF16 math",
            DType.int8,
            Scales("channel", DType.bf16),
            source="weight-only INT8 (TensorRT-LLM W8A16)",
        ),
        Recipe(
            "w4a16",
            "INT4 weights in groups of 128, BF16 math",
            DType.int4,
            Scales("group", DType.bf16, 1, 128),
            source="AWQ / GPTQ group-128 checkpoints (Marlin kernels)",
        ),
        Recipe(
            "mxfp4",
            "MXFP4 A4W4 (OCP MX: an E8M0 scale per 32)",
            DType.mxfp4,
            None,
            DType.mxfp4,
            None,
            source="OCP Microscaling Formats v1.0; MI355X and B200 FP4 matrix cores",
        ),
        Recipe(
            "nvfp4",
            "NVFP4 A4W4 (an E4M3 scale per 16)",
            DType.nvfp4,
            None,
            DType.nvfp4,
            None,
            source="NVIDIA ModelOpt NVFP4 checkpoints (Blackwell)",
        ),
        Recipe(
            "mxfp4_weights",
            "MXFP4 weights, BF16 math",
            DType.mxfp4,
            source="gpt-oss model card: MoE weights in MXFP4, served with BF16 activations",
        ),
    )
}

NO_RECIPE = RECIPES["none"]

RecipeName = StrEnum("RecipeName", {name: name for name in RECIPES})  # type: ignore[misc]
