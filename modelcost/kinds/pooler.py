"""BERT's pooler: a dense layer and a tanh on each sequence's first (class) token
(docs/contributing.md's worked example)."""

from __future__ import annotations

import modelcost.language.spec as ir
from modelcost.perfmodel import UnaryOp, bpe

from .emit import Emit, Lowerer, gemm
from .room import EVERY_PARAM, NOTHING_KEPT, REFUSES_NOTHING, REPLICATED, Component, Room, linear


def lower(lw: Lowerer, e: Emit, op: ir.Pooler, name: str) -> None:
    s, d = lw.s, op.dtypes
    rec = gemm(s.B, op.dim, op.dim, op.bias, d)  # on each sequence's class token
    dense = lw.gemm_node(e, f"{name}.dense", rec, (e.stream,))
    tanh = UnaryOp((s.B, op.dim), "tanh", d.activations, d.activations)
    e.stream = e.add(f"{name}.tanh", tanh, (dense,), out=s.B * op.dim * bpe(d.activations))


def params(op: ir.Pooler, tp: int, ep: int) -> tuple[int, int]:
    return linear(op.dim, op.dim, op.bias), 0


POOLER = Room(
    kind=ir.Pooler,
    lower=lower,
    params=params,
    active=EVERY_PARAM,
    component=Component.head,
    memory=NOTHING_KEPT,
    sharding=REPLICATED,  # every rank runs it whole
    refuses=REFUSES_NOTHING,
)
