"""What the Spec IR's layer classes share: the frozen IR base, activations, routers,
attention kernels, the dtype policy, the base of every layer statement and the checks
its arguments must pass together.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import Annotated, ClassVar

from pydantic import Field

from modelcost.base.dtypes import DType
from modelcost.base.frozen import Frozen

from .vocabulary import Arg, ArgType, CheckFailure, Ref


class IR(Frozen):
    """A node of the Spec IR (validators built on first use: the recursive layer union
    especially costs more to build than a spec costs to compile)."""


class Activation(StrEnum):
    gelu = "gelu"
    gelu_tanh = "gelu_tanh"
    quick_gelu = "quick_gelu"  # x·sigmoid(1.702x) (CLIP)
    relu = "relu"
    silu = "silu"
    swiglu = "swiglu"  # silu(gate) * up
    geglu = "geglu"  # gelu(gate) * up

    @property
    def gated(self) -> bool:
        return self in (Activation.swiglu, Activation.geglu)


class Router(StrEnum):
    """How a MoE router turns logits into expert scores."""

    softmax = "softmax"  # Mixtral, Qwen3-MoE, gpt-oss
    sigmoid = "sigmoid"  # DeepSeek-V3 (`scoring_func: sigmoid`)


class AttentionKernel(StrEnum):
    """The kernel an attention runs as: a fused flash kernel, or PyTorch's composite
    "math" SDPA (eager attention too), which materialises the score matrix."""

    flash = "flash"
    math = "math"


class DtypePolicy(IR):
    """Dtypes by role: weights, activations, and the KV cache; and the precision recipe
    its linear layers follow (recipes.py; the weights are the recipe's already)."""

    weights: DType
    activations: DType
    kv_cache: DType
    recipe: str = "none"


T = ArgType


def _divides(small: str, big: str, values: dict, what: str) -> None:
    if values[big] % values[small]:
        raise CheckFailure(
            small,
            f"{small} = {values[small]} does not divide {big} = {values[big]}",
            what,
        )


def _check_gqa(v: dict) -> None:
    if v["heads"] % v["kv_heads"]:
        raise CheckFailure(
            "kv_heads",
            f"kv_heads = {v['kv_heads']} does not divide heads = {v['heads']}",
            "each KV head serves a whole group of query heads (GQA)",
        )


def _check_attention(v: dict) -> None:
    _check_gqa(v)
    if v["chunk"] and v["window"]:
        raise CheckFailure(
            "chunk",
            "an attention takes a sliding window or chunks, not both",
            "chunked attention (Llama 4) sees its own chunk; a window, the last n keys",
        )
    if v["chunk"] and not v["causal"]:
        raise CheckFailure("chunk", "chunked attention is causal", "drop causal = false")


# `kernel = flash | math`: the one declaration attention, cross_attention and mla share
Kernel = Annotated[
    AttentionKernel,
    Arg(T.KERNEL, AttentionKernel.flash),
    Field(
        description="the kernel it runs as: flash (a fused flash-attention kernel) or "
        "math (PyTorch's composite SDPA, eager attention: the score matrix materialised)"
    ),
]


def _default_head_dim(v: dict) -> int:
    if v["dim"] % v["heads"]:
        raise CheckFailure(
            "heads",
            f"heads = {v['heads']} does not divide dim = {v['dim']}",
            "set head_dim explicitly when it is not dim / heads",
        )
    return v["dim"] // v["heads"]


def _check_moe(v: dict) -> None:
    if v["top_k"] > v["experts"]:
        raise CheckFailure(
            "top_k",
            f"top_k = {v['top_k']} is larger than experts = {v['experts']}",
            "a token is routed to top_k distinct experts",
        )
    _divides("groups", "experts", v, "experts are split into equal groups")
    if v["groups_kept"] > v["groups"]:
        raise CheckFailure(
            "groups_kept",
            f"groups_kept = {v['groups_kept']} is larger than groups = {v['groups']}",
            "a token picks groups_kept of the groups, then top_k experts inside them",
        )
    per_group = v["experts"] // v["groups"]
    if v["top_k"] > v["groups_kept"] * per_group:
        raise CheckFailure(
            "top_k",
            f"top_k = {v['top_k']} is more than the {v['groups_kept'] * per_group} experts "
            f"of {v['groups_kept']} kept groups",
            "raise groups_kept or lower top_k",
        )


def _check_mlp(v: dict) -> None:
    if v["fused_gate_up"] and not v["act"].gated:
        raise CheckFailure(
            "fused_gate_up",
            f"fused_gate_up needs a gated activation, and `{v['act'].value}` has no gate",
            "use act = swiglu or geglu",
        )


def _default_mamba_heads(v: dict) -> int:
    d_inner = v["expand"] * v["dim"]
    if d_inner % v["head_dim"]:
        raise CheckFailure(
            "head_dim",
            f"head_dim = {v['head_dim']} does not divide expand * dim = {d_inner}",
            "the SSD heads split the inner width evenly (or set heads)",
        )
    return d_inner // v["head_dim"]


def _check_mamba2(v: dict) -> None:
    heads = v["heads"]
    if heads % v["groups"]:
        raise CheckFailure(
            "groups",
            f"groups = {v['groups']} does not divide the {heads} SSD heads",
            "B and C are shared by heads/groups heads each",
        )


def _check_deltanet(v: dict) -> None:
    _divides("k_heads", "v_heads", v, "groups of value heads share a key head")


def _check_patch(v: dict) -> None:
    _divides("patch", "image", v, "the image is cut into whole patches")


class _Op(IR):
    dim: Annotated[
        int, Arg(T.DIM, Ref("d_model")), Field(description="model (residual stream) width")
    ]
    dtypes: DtypePolicy

    scope: ClassVar[str]
    takes_kv_dtype: ClassVar[bool] = False
    quantized: ClassVar[bool] = False  # its linear layers follow the precision recipe
    check: ClassVar[Callable[[dict], None] | None] = None
    starts_stream: ClassVar[bool] = False  # it sets the stream's width (an embedding)
    # what it fixes a stream's length by, in words (an image, a token grid), or ""
    fixes_length: ClassVar[str] = ""

    @property
    def decodes(self) -> bool:
        """Whether the layer can run one new token at a time (causal attention over a
        cache, or a recurrent state): a model decodes if any of its layers does."""
        return False

    @property
    def width_out(self) -> int | None:
        """The stream's width after it, when it sets or changes it (None: it keeps it)."""
        return self.dim if self.starts_stream else None
