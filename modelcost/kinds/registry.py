"""The registry: each layer kind's Spec IR class → its room. Adding a kind is its module
and one line here (docs/contributing.md); a kind of the `Op` union without a room is an
error when this module loads, not a crash at compile time."""

from __future__ import annotations

import modelcost.language.spec as ir

from . import (
    attention,
    deltanet,
    embeddings,
    heads,
    mamba2,
    mla,
    mlp,
    moe,
    norms,
    pooler,
    tokens,
)
from .room import Room

ROOMS: dict[type[ir.IR], Room] = {
    room.kind: room
    for room in (
        embeddings.EMBEDDING,
        embeddings.POSITION_EMBEDDING,
        embeddings.TOKEN_TYPE_EMBEDDING,
        embeddings.PATCH_EMBED,
        embeddings.CONV_STEM,
        embeddings.RELATIVE_POSITION_BIAS,
        norms.LAYER_NORM,
        norms.RMS_NORM,
        norms.RESIDUAL,
        attention.ATTENTION,
        attention.CROSS_ATTENTION,
        mla.MLA,
        mlp.MLP,
        moe.MOE,
        mamba2.MAMBA2,
        deltanet.GATED_DELTANET,
        tokens.KEEP,
        tokens.POOL,
        tokens.PIXEL_SHUFFLE,
        heads.LINEAR,
        heads.MTP_PROJECTION,
        heads.LM_HEAD,
        heads.CLASSIFIER,
        pooler.POOLER,
    )
}

_missing = [t.__name__ for t in ir.OP_TYPES if t not in ROOMS]
if _missing:
    raise TypeError(f"layer kinds without a room in modelcost/kinds/registry.py: {_missing}")


def room(op: ir.IR) -> Room:
    """The room of `op`'s kind."""
    return ROOMS[type(op)]
