"""Gated DeltaNet linear attention (Qwen3-Next): q, k, v, z and β, the decay gate from
two projections, a causal conv1d, the gated delta rule with a dk × dv state per value
head (a step per token at decode), a gated RMSNorm and out_proj; its key and value heads
split over the tensor-parallel ranks; it keeps a recurrent state per sequence."""

from __future__ import annotations

import modelcost.language.spec as ir
from modelcost.ir.parallel import refuse
from modelcost.perfmodel import BinaryOp, GatedDeltaNetOp, GatedDeltaStepOp, OpRecord, UnaryOp, bpe
from modelcost.perfmodel.deltanet import conv_channels

from .emit import Emit, Lowerer, gemm
from .room import SSM_STATE, linear, recurrent_room


def per_rank(op: ir.GatedDeltaNet, tp: int) -> tuple[int, int]:
    """(value heads, key heads) on one of `tp` ranks: its params, state and lowering
    split by this one rule."""
    return op.v_heads // tp, op.k_heads // tp


def lower(lw: Lowerer, e: Emit, op: ir.GatedDeltaNet, name: str) -> None:
    s, d = lw.s, op.dtypes
    a, tp = d.activations, lw.tp
    (H, KH), dk, dv = per_rank(op, tp), op.head_k_dim, op.head_v_dim
    kd, vd = KH * dk, H * dv
    x = lw.enter(e, name, op.dim, a)
    qkvz = gemm(s.T, 2 * kd + 2 * vd, op.dim, False, d)
    z = lw.gemm_node(e, f"{name}.in_proj_qkvz", qkvz, (x,))
    ba = lw.gemm_node(e, f"{name}.in_proj_ba", gemm(s.T, 2 * H, op.dim, False, d),
                      (x,))  # fmt: skip
    if s.decode:
        rec: OpRecord = GatedDeltaStepOp(s.B, H, KH, dk, dv, op.d_conv, a, SSM_STATE)
    else:
        rec = GatedDeltaNetOp(s.B, s.S, H, KH, dk, dv, op.chunk, op.d_conv, a, SSM_STATE)
    y = e.add(f"{name}.delta_rule", rec, (z, ba), out=s.T * vd * bpe(a))
    y = lw.rmsnorm_node(e, f"{name}.norm", H, dv, a, y)  # gated by z
    g = e.add(f"{name}.gate", UnaryOp((s.T, vd), "silu", a, a), (z,), out=s.T * vd * bpe(a))
    y = e.add(f"{name}.gate_mul", BinaryOp((s.T, vd), (s.T, vd), "mul", a, a, a), (y, g),
              out=s.T * vd * bpe(a))  # fmt: skip
    y = lw.gemm_node(e, f"{name}.out_proj", gemm(s.T, op.dim, vd, False, d), (y,))
    e.stream = lw.exit(e, name, op.dim, a, y)


def _params(op: ir.GatedDeltaNet, tp: int, ep: int) -> tuple[int, int]:
    """Heads split over the tensor-parallel ranks."""
    kd, vd, vh = op.key_dim // tp, op.value_dim // tp, per_rank(op, tp)[0]
    conv_ch = conv_channels(op.v_heads, op.k_heads, op.head_k_dim, op.head_v_dim) // tp
    n = (
        linear(op.dim, 2 * kd + 2 * vd, False)  # q, k, v, z
        + linear(op.dim, 2 * vh, False)  # β and the decay gate
        + conv_ch * op.d_conv  # the conv1d has no bias
        + 2 * vh  # dt_bias, A_log
        + op.head_v_dim  # the gated RMSNorm, shared by the heads
        + linear(vd, op.dim, False)
    )
    return n, 0


def _state_bytes(op: ir.GatedDeltaNet, tp: int) -> float:
    """dk × dv per value head and the conv window, of one sequence on one rank."""
    conv_ch = conv_channels(op.v_heads, op.k_heads, op.head_k_dim, op.head_v_dim) // tp
    state = per_rank(op, tp)[0] * op.head_k_dim * op.head_v_dim * bpe(SSM_STATE)
    return state + conv_ch * op.d_conv * bpe(op.dtypes.activations)


def _sharding(op: ir.GatedDeltaNet, par, where: str):
    """Its heads split over the tp ranks: tp divides the key heads (and so the value
    heads, a multiple of them)."""
    if op.k_heads % par.tp:  # k_heads divides v_heads (spec.py), so tp divides both
        return refuse(
            f"--tp {par.tp} does not divide the {op.k_heads} key heads of {where}",
            f"tensor parallelism splits Gated DeltaNet by heads: use a divisor of {op.k_heads}",
        )
    return None


GATED_DELTANET = recurrent_room(
    ir.GatedDeltaNet,
    lower,
    _params,
    _state_bytes,
    _sharding,
    carrier="the delta rule",
    scan="the delta rule's scan",
)
