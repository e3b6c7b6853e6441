"""The Spec IR: a resolved, validated model architecture as frozen pydantic models.

Produced by `resolve`, consumed by parameter counting and lowering. Nothing here knows
about source text: two specs that mean the same architecture compare equal.

Its parts: spec_base.py (the shared base, enums and checks), spec_mixers.py (attention,
feed-forward and recurrent layers) and spec_layers.py (every other layer); this module
assembles the tree from them, and names the whole IR (`import modelcost.language.spec as
ir`, then `ir.Attention`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Literal, get_args

from pydantic import Field

from .spec_base import IR, Activation, AttentionKernel, DtypePolicy, Kernel, Router, _Op
from .spec_layers import (
    TOKEN_OPS,
    Classifier,
    ConvStem,
    Embedding,
    Keep,
    LayerNorm,
    Linear,
    LMHead,
    MTPProjection,
    Norm,
    PatchEmbed,
    PixelShuffle,
    Pool,
    Pooler,
    PositionEmbedding,
    RelativePositionBias,
    Residual,
    RMSNorm,
    TokenTypeEmbedding,
)
from .spec_mixers import MLA, MLP, Attention, CrossAttention, GatedDeltaNet, Mamba2, MoE

# the whole IR, by one name (`ir.Attention`), whichever part declares it
__all__ = [
    "IR", "MLA", "MLP", "OP_TYPES", "SCHEMA_VERSION", "TOKEN_OPS", "Activation", "Attention",
    "AttentionKernel", "Block", "Classifier", "ConvStem", "CrossAttention", "DtypePolicy",
    "Embedding", "GatedDeltaNet", "Keep", "Kernel", "LMHead", "LayerNorm", "Linear",
    "MTPProjection", "Mamba2", "MoE", "Norm", "Op", "ParamValue", "PatchEmbed",
    "PixelShuffle", "Pool", "Pooler", "PositionEmbedding", "RMSNorm", "RelativePositionBias",
    "Repeat", "Residual", "Router", "Spec", "Statement", "Stream", "TokenTypeEmbedding",
    "streams_of", "walk",
]  # fmt: skip

SCHEMA_VERSION = 1


class Repeat(IR):
    """`count` identical copies of `body`, in sequence."""

    kind: Literal["repeat"] = "repeat"
    count: int
    body: tuple[Statement, ...]


class Block(IR):
    """One expansion of a user block; keeps the block's name for grouping."""

    kind: Literal["block"] = "block"
    name: str
    body: tuple[Statement, ...]


Op = (
    Embedding
    | PositionEmbedding
    | TokenTypeEmbedding
    | PatchEmbed
    | LayerNorm
    | RMSNorm
    | Attention
    | MLA
    | MLP
    | MoE
    | Mamba2
    | GatedDeltaNet
    | Linear
    | ConvStem
    | RelativePositionBias
    | CrossAttention
    | MTPProjection
    | Keep
    | Pool
    | PixelShuffle
    | Residual
    | LMHead
    | Pooler
    | Classifier
)


OP_TYPES: tuple[type[_Op], ...] = get_args(Op)  # the kinds, in the union's order


class Stream(IR):
    """Layers over another token stream than the model's main one: an encoder whose
    output the main stream cross-attends to (Whisper's audio, T5's source), a vision
    tower whose `joins` output tokens join the main sequence (LLaVA's image tokens), or an
    `auxiliary` module trained beside the model over its tokens and counted apart
    (DeepSeek-V3's multi-token prediction)."""

    kind: Literal["stream"] = "stream"
    name: str
    length: int  # tokens per sequence (0: the main sequence's, an auxiliary stream)
    joins: int = 0
    auxiliary: bool = False
    width: int = 0  # its output's width
    body: tuple[Statement, ...]


Statement = Annotated[Op | Repeat | Block | Stream, Field(discriminator="kind")]


ParamValue = bool | int | float | str


class Spec(IR):
    """A resolved model: its parameters, default dtypes and layer tree."""

    schema_version: int = SCHEMA_VERSION
    name: str
    title: str
    params: dict[str, ParamValue]
    dtypes: DtypePolicy
    body: tuple[Statement, ...]


def walk(
    nodes: tuple[Statement, ...],
    multiplicity: int = 1,
    *,
    streams: bool = True,
    auxiliary: bool = False,
) -> Iterator[tuple[Op, int]]:
    """Every op of a layer tree with how many times it occurs: the model's, its
    encoders' and towers' (unless `streams` is off: the main stream's alone); an
    auxiliary stream's (multi-token prediction) only when `auxiliary` is on."""
    for node in nodes:
        if isinstance(node, Repeat):
            yield from walk(node.body, multiplicity * node.count, streams=streams,
                            auxiliary=auxiliary)  # fmt: skip
        elif isinstance(node, Block):
            yield from walk(node.body, multiplicity, streams=streams, auxiliary=auxiliary)
        elif isinstance(node, Stream):
            if streams and (auxiliary or not node.auxiliary):
                yield from walk(node.body, multiplicity)
        else:
            yield node, multiplicity


def streams_of(spec: Spec) -> tuple[Stream, ...]:
    """The spec's streams besides the main one, in order."""
    return tuple(n for n in spec.body if isinstance(n, Stream))
