"""The perf model: analytical FLOPs and bytes for every op, forward and backward.

Two layers live here. The TraceLens-compatible classes (`GEMM`, `SDPA`, `CONV`, ...)
expose TraceLens's static functions with its parameter names and order, so notebooks
written against `TraceLens.PerfModel` run unchanged. The op records (`GemmOp`,
`SdpaOp`, ...) are what the compiler builds: frozen, one per op instance, with a dtype
per operand and counts under either convention (docs/conventions.md).
"""

from .attention import (
    SDPA,
    InferenceAttention,
    SdpaOp,
    Softmax,
    SoftmaxOp,
    exact_pairs,
    trapezoid_pairs,
)
from .base import MODELCOST, TRACELENS, Conventions, Cost, OpRecord, Unit, bpe
from .collectives import CollectiveOp, Fanout
from .conv import CONV, ConvOp
from .deltanet import GatedDeltaNetOp, GatedDeltaStepOp
from .elementwise import (
    BinaryElementwise,
    BinaryOp,
    Reduce,
    ReduceOp,
    UnaryElementwise,
    UnaryOp,
    broadcast_shape,
)
from .gemm import GEMM, GemmOp, GroupedGemm, GroupedGemmOp
from .misc import CrossEntropy, CrossEntropyOp, EmbeddingOp, FusedRoPE, RopeOp
from .moe import (
    FusedMoE,
    MoEComm,
    MoECommOp,
    MoERoutingOp,
    UnfusedMoE_Down,
    UnfusedMoE_Up,
    expected_experts_hit,
)
from .norm import Normalization, NormOp, RMSNorm
from .offload import OffloadOp
from .optimizer import AdamStepOp
from .quant import DequantizeOp, QuantizeOp
from .ring import RingMergeOp
from .ssm import CausalConv1d, CausalConv1dOp, MambaSSD, MambaSsdOp, MambaStepOp

__all__ = [
    "CONV",
    "GEMM",
    "MODELCOST",
    "SDPA",
    "TRACELENS",
    "AdamStepOp",
    "BinaryElementwise",
    "BinaryOp",
    "CausalConv1d",
    "CausalConv1dOp",
    "CollectiveOp",
    "ConvOp",
    "Conventions",
    "Cost",
    "CrossEntropy",
    "CrossEntropyOp",
    "DequantizeOp",
    "EmbeddingOp",
    "Fanout",
    "FusedMoE",
    "FusedRoPE",
    "GatedDeltaNetOp",
    "GatedDeltaStepOp",
    "GemmOp",
    "GroupedGemm",
    "GroupedGemmOp",
    "InferenceAttention",
    "MambaSSD",
    "MambaSsdOp",
    "MambaStepOp",
    "MoEComm",
    "MoECommOp",
    "MoERoutingOp",
    "NormOp",
    "Normalization",
    "OffloadOp",
    "OpRecord",
    "QuantizeOp",
    "RMSNorm",
    "Reduce",
    "ReduceOp",
    "RingMergeOp",
    "RopeOp",
    "SdpaOp",
    "Softmax",
    "SoftmaxOp",
    "UnaryElementwise",
    "UnaryOp",
    "UnfusedMoE_Down",
    "UnfusedMoE_Up",
    "Unit",
    "bpe",
    "broadcast_shape",
    "exact_pairs",
    "expected_experts_hit",
    "trapezoid_pairs",
]  # fmt: skip
