"""LayerNorm and RMSNorm over the residual stream, and the residual add: replicated on
every tensor-parallel rank, nothing kept across decode steps."""

from __future__ import annotations

import modelcost.language.spec as ir
from modelcost.perfmodel import BinaryOp, NormOp, bpe

from .emit import Emit, Lowerer
from .room import (
    NO_PARAMS,
    Component,
    plain_room,
)


def lower_norm(lw: Lowerer, e: Emit, op: ir.Norm, name: str) -> None:
    T, a = lw.s.T_seq, lw.act(op)
    rec = NormOp(op.kind, T * op.dim, op.dim, True, op.bias, lw.s.train, a)
    e.stream = e.add(name, rec, (e.stream,), out=T * op.dim * bpe(a))


def lower_residual(lw: Lowerer, e: Emit, op: ir.Residual, name: str) -> None:
    T, a = lw.s.T_seq, lw.act(op)
    rec = BinaryOp((T, op.dim), (T, op.dim), "add", a, a, a)
    inputs = (e.stream, e.residual_from)
    e.stream = e.residual_from = e.add(name, rec, inputs, out=T * op.dim * bpe(a))


def _norm_params(op: ir.Norm, tp: int, ep: int) -> tuple[int, int]:
    """A scale, and a bias when it has one."""
    return op.dim * (2 if op.bias else 1), 0


LAYER_NORM = plain_room(ir.LayerNorm, lower_norm, _norm_params, Component.norms)
RMS_NORM = plain_room(ir.RMSNorm, lower_norm, _norm_params, Component.norms)
RESIDUAL = plain_room(ir.Residual, lower_residual, NO_PARAMS, Component.norms)
