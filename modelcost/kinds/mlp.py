"""The MLP: up (and gate) projections, an activation and a down projection, its hidden
width split over the tensor-parallel ranks."""

from __future__ import annotations

import modelcost.language.spec as ir
from modelcost.ir.parallel import refuse

from .emit import Emit, Lowerer
from .room import EVERY_PARAM, NOTHING_KEPT, REFUSES_NOTHING, Component, Room, ffn


def lower(lw: Lowerer, e: Emit, op: ir.MLP, name: str) -> None:
    a = op.dtypes.activations
    x = lw.enter(e, name, op.dim, a)
    width = op.d_ff // lw.tp
    y = lw.ffn(e, name, op.dim, width, op.act, op.bias, op.dtypes, x, op.fused_gate_up)
    e.stream = lw.exit(e, name, op.dim, a, y)


def _params(op: ir.MLP, tp: int, ep: int) -> tuple[int, int]:
    return ffn(op.dim, op.d_ff // tp, op.act, op.bias), 0


def _sharding(op: ir.MLP, par, where: str):
    """Its hidden width splits over the tp ranks (column- then row-parallel): tp divides
    d_ff."""
    if op.d_ff % par.tp:
        return refuse(
            f"--tp {par.tp} does not divide d_ff = {op.d_ff} of {where}",
            f"use a divisor of {op.d_ff}",
        )
    return None


MLP = Room(
    kind=ir.MLP,
    lower=lower,
    params=_params,
    active=EVERY_PARAM,
    component=Component.mlp,
    memory=NOTHING_KEPT,
    sharding=_sharding,
    refuses=REFUSES_NOTHING,
)
