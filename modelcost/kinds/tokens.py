"""What changes a stream's token count: keep (a slice), 2-D average pooling, pixel
shuffle. Weightless, replicated, nothing kept; the layers after one run over fewer
tokens (the lowerer's shape changes)."""

from __future__ import annotations

import math

import modelcost.language.spec as ir
from modelcost.base.record import replace
from modelcost.perfmodel import ReduceOp, UnaryOp, bpe

from .emit import Emit, Lowerer
from .room import (
    NO_PARAMS,
    Component,
    plain_room,
)


def lower_keep(lw: Lowerer, e: Emit, op: ir.Keep, name: str) -> None:
    """A slice of the stream's tokens: no work, fewer tokens from here on."""
    lw.s = replace(lw.s, S=op.tokens, n_kv=op.tokens)


def lower_pool(lw: Lowerer, e: Emit, op: ir.Pool, name: str) -> None:
    """The mean of each kernel × kernel square of the token grid."""
    s, a, k = lw.s, op.dtypes.activations, op.kernel
    side = math.isqrt(s.S) // k
    rec = ReduceOp((s.B, side, k, side, k, op.dim), (2, 4), "mean", a, a)
    out = s.B * side * side * op.dim * bpe(a)
    e.stream = e.residual_from = e.add(name, rec, (e.stream,), out=out)
    lw.s = replace(s, S=side * side, n_kv=side * side)


def lower_pixel_shuffle(lw: Lowerer, e: Emit, op: ir.PixelShuffle, name: str) -> None:
    """Neighbouring tokens' features moved side by side: a copy of the stream."""
    s, a, k = lw.s, op.dtypes.activations, op.factor
    rec = UnaryOp((s.T, op.dim), "copy", a, a)
    e.stream = e.residual_from = e.add(name, rec, (e.stream,), out=s.T * op.dim * bpe(a))
    lw.s = replace(s, S=s.S // (k * k), n_kv=s.S // (k * k))


KEEP = plain_room(ir.Keep, lower_keep, NO_PARAMS, Component.norms)
POOL = plain_room(ir.Pool, lower_pool, NO_PARAMS, Component.norms)
PIXEL_SHUFFLE = plain_room(ir.PixelShuffle, lower_pixel_shuffle, NO_PARAMS, Component.norms)
