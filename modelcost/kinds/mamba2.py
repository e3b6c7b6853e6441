"""The Mamba-2 SSD mixer: in_proj, causal conv1d, the SSD scan (a step per token at
decode), gated RMSNorm, out_proj; its heads and B/C groups split over the
tensor-parallel ranks (a single group replicated on each, as vLLM runs it); it keeps a
recurrent state per sequence."""

from __future__ import annotations

import modelcost.language.spec as ir
from modelcost.ir.parallel import refuse
from modelcost.perfmodel import BinaryOp, MambaSsdOp, MambaStepOp, OpRecord, UnaryOp, bpe

from .emit import Emit, Lowerer, gemm
from .room import SSM_STATE, linear, recurrent_room


def per_rank(op: ir.Mamba2, tp: int) -> tuple[int, int, int]:
    """(SSD heads, B/C groups, inner width) on one of `tp` ranks: its params, state and
    lowering split by this one rule. Groups split over the ranks when tp divides them;
    a single group is replicated on every rank instead (vLLM's mamba_mixer2:
    `extra_groups_for_head_shards` adds tp − 1 copies of it, so each head shard has its
    group's B and C: each rank holds and computes the whole B/C projection, its conv
    channels and its state's B/C part)."""
    groups = op.groups // tp if op.groups % tp == 0 else op.groups
    return op.heads // tp, groups, op.d_inner // tp


def lower(lw: Lowerer, e: Emit, op: ir.Mamba2, name: str) -> None:
    s, d = lw.s, op.dtypes
    a = d.activations
    tp = lw.tp
    (H, G, di), P, N = per_rank(op, tp), op.head_dim, op.d_state
    proj = 2 * di + 2 * G * N + H
    x = lw.enter(e, name, op.dim, a)
    z = lw.gemm_node(e, f"{name}.in_proj", gemm(s.T, proj, op.dim, op.bias, d), (x,))
    if s.decode:
        rec: OpRecord = MambaStepOp(s.B, H, P, G, N, op.d_conv, a, SSM_STATE)
    else:
        rec = MambaSsdOp(s.B, s.S, H, P, G, N, op.chunk, op.d_conv, a, SSM_STATE)
    y = e.add(f"{name}.ssd", rec, (z,), out=s.T * di * bpe(a))
    y = lw.rmsnorm_node(e, f"{name}.norm", 1, di, a, y)
    g = e.add(f"{name}.gate", UnaryOp((s.T, di), "silu", a, a), (z,), out=s.T * di * bpe(a))
    y = e.add(
        f"{name}.gate_mul",
        BinaryOp((s.T, di), (s.T, di), "mul", a, a, a),
        (y, g),
        out=s.T * di * bpe(a),
    )
    y = lw.gemm_node(e, f"{name}.out_proj", gemm(s.T, op.dim, di, op.bias, d), (y,))
    e.stream = lw.exit(e, name, op.dim, a, y)


def _params(op: ir.Mamba2, tp: int, ep: int) -> tuple[int, int]:
    heads, groups, di = per_rank(op, tp)
    bc = 2 * groups * op.d_state
    in_proj = linear(op.dim, 2 * di + bc + heads, op.bias)
    conv_ch = di + bc
    conv = conv_ch * op.d_conv + (conv_ch if op.conv_bias else 0)
    per_head = 3 * heads  # dt_bias, A_log, D
    return in_proj + conv + per_head + di + linear(di, op.dim, op.bias), 0


def _state_bytes(op: ir.Mamba2, tp: int) -> float:
    """The SSM state and the conv window of one sequence on one rank."""
    heads, groups, di = per_rank(op, tp)
    conv_ch = di + 2 * groups * op.d_state
    state = heads * op.head_dim * op.d_state * bpe(SSM_STATE)
    return state + conv_ch * op.d_conv * bpe(op.dtypes.activations)


def _sharding(op: ir.Mamba2, par, where: str):
    """What vLLM's mamba_mixer2 refuses: heads that tp does not divide, and groups
    that it does not divide unless there is one (replicated on each rank)."""
    if op.heads % par.tp:
        return refuse(
            f"--tp {par.tp} does not divide the {op.heads} SSD heads of {where}",
            f"tensor parallelism splits Mamba-2 by heads: use a divisor of {op.heads}",
        )
    if op.groups % par.tp and op.groups != 1:
        return refuse(
            f"--tp {par.tp} does not divide the {op.groups} B/C groups of {where}",
            "tensor parallelism splits the groups, or replicates a single one (as vLLM "
            f"does): use a divisor of {op.groups}",
        )
    return None


MAMBA2 = recurrent_room(
    ir.Mamba2, lower, _params, _state_bytes, _sharding, carrier="an SSM", scan="the SSM scan"
)
