"""What one device of a parallel layout holds and runs: the sharding rules, in one place.

Megatron-LM's tensor parallelism (Shoeybi et al. 2019; Korthikanti et al. 2022 for
sequence parallelism): attention splits its query heads over the tp ranks (KV heads
too; when tp exceeds them each rank keeps one, replicated), MLPs their hidden width,
Mamba-2 its heads and groups, the embedding and the LM head their vocabulary (padded to
a multiple of tp); norms, routers, positions, patch embeddings, poolers and classifiers
are replicated. Experts are split over ep ranks, each expert's width over tp.

Lowering asks `heads`, `width` and friends for a device's share; parameter and memory
figures per device come from `device_params`. `check_layout` refuses a layout a spec
cannot run, naming the layer and the flag to change.
"""

from __future__ import annotations

from . import spec as ir
from .errors import SpecError
from .graph import Parallel
from .params import _ffn, _linear, walk


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def kv_heads(kv: int, tp: int) -> int:
    """KV heads one rank keeps: kv/tp, or one (replicated) when tp exceeds them."""
    return kv // tp if kv >= tp else 1


def vocab_shard(vocab: int, tp: int) -> int:
    """One rank's slice of a vocabulary-parallel embedding or head (padded to tp)."""
    return ceil_div(vocab, tp)


def _refuse(what: str, hint: str) -> SpecError:
    return SpecError(what, filename="modelcost", hint=hint)


def check_layout(spec: ir.Spec, par: Parallel, batch: int) -> None:
    """Raise a SpecError for a layout `spec` cannot run with `batch` sequences."""
    if par.single:
        return
    if batch % par.dp:
        raise _refuse(
            f"batch {batch} does not split over dp = {par.dp} data-parallel replicas",
            f"use a batch that is a multiple of {par.dp}",
        )
    tp, ep = par.tp, par.ep
    has_experts = False
    for op, _ in walk(spec.body):
        where = f"`{op.kind}` of `{spec.name}`"
        match op:
            case ir.Attention() | ir.MLA() if op.heads % tp:
                raise _refuse(
                    f"--tp {tp} does not divide the {op.heads} heads of {where}",
                    f"tensor parallelism splits attention by heads: use a divisor of {op.heads}",
                )
            case ir.Attention() if op.kv_heads % tp and tp % op.kv_heads:
                raise _refuse(
                    f"--tp {tp} and the {op.kv_heads} KV heads of {where} do not divide "
                    "one another",
                    "each rank keeps kv_heads/tp KV heads, or one replicated when tp exceeds them",
                )
            case ir.MLP() if op.d_ff % tp:
                raise _refuse(
                    f"--tp {tp} does not divide d_ff = {op.d_ff} of {where}",
                    f"use a divisor of {op.d_ff}",
                )
            case ir.MoE():
                has_experts = True
                if op.experts % ep:
                    raise _refuse(
                        f"--ep {ep} does not divide the {op.experts} experts of {where}",
                        f"use a divisor of {op.experts}",
                    )
                if op.d_ff % tp or (op.shared_experts * op.shared_d_ff) % tp:
                    raise _refuse(
                        f"--tp {tp} does not divide the expert width d_ff = {op.d_ff} "
                        f"(or the shared experts') of {where}",
                        "each expert's width is split over the tp ranks",
                    )
            case ir.Mamba2() if op.heads % tp or op.groups % tp:
                raise _refuse(
                    f"--tp {tp} does not divide the {op.heads} SSD heads and "
                    f"{op.groups} groups of {where}",
                    "tensor parallelism splits Mamba-2 by heads and by B/C groups",
                )
    if ep > 1 and not has_experts:
        raise _refuse(
            f"--ep {ep}: `{spec.name}` has no experts to split",
            "expert parallelism applies to MoE layers; use --dp for data parallelism",
        )


def device_params(op: ir.Op, par: Parallel) -> tuple[int, int]:
    """(dense, expert) parameters of one op instance on one device (weights not yet
    sharded by ZeRO-3). On one device: (total, 0) except MoE's experts."""
    tp = par.tp
    match op:
        case ir.Embedding():
            return vocab_shard(op.vocab, tp) * op.dim, 0
        case ir.Attention():
            q = op.heads // tp * op.head_dim
            kv = kv_heads(op.kv_heads, tp) * op.head_dim
            n = (
                _linear(op.dim, q, op.qkv_bias)
                + 2 * _linear(op.dim, kv, op.qkv_bias)
                + _linear(q, op.dim, op.out_bias)
                + (2 * op.head_dim if op.qk_norm else 0)
                + (op.heads // tp if op.sinks else 0)
            )
            return n, 0
        case ir.MLA():
            heads = op.heads // tp
            qk_head = op.qk_nope_head_dim + op.qk_rope_head_dim
            if op.q_lora_rank:
                q = op.dim * op.q_lora_rank + op.q_lora_rank + op.q_lora_rank * heads * qk_head
            else:
                q = op.dim * heads * qk_head
            kv = (
                op.dim * (op.kv_lora_rank + op.qk_rope_head_dim)
                + op.kv_lora_rank
                + op.kv_lora_rank * heads * (op.qk_nope_head_dim + op.v_head_dim)
            )
            return q + kv + heads * op.v_head_dim * op.dim, 0
        case ir.MLP():
            return _ffn(op.dim, op.d_ff // tp, op.act, op.bias), 0
        case ir.MoE():
            expert = _ffn(op.dim, op.d_ff // tp, op.act, op.bias)
            shared = _ffn(op.dim, op.shared_experts * op.shared_d_ff // tp, op.act, op.bias)
            router = _linear(op.dim, op.experts, op.router_bias) + (
                op.experts if op.correction_bias else 0
            )
            return (shared if op.shared_experts else 0) + router, op.experts // par.ep * expert
        case ir.Mamba2():
            heads, groups, di = op.heads // tp, op.groups // tp, op.d_inner // tp
            bc = 2 * groups * op.d_state
            in_proj = _linear(op.dim, 2 * di + bc + heads, op.bias)
            conv_ch = di + bc
            conv = conv_ch * op.d_conv + (conv_ch if op.conv_bias else 0)
            return in_proj + conv + 3 * heads + di + _linear(di, op.dim, op.bias), 0
        case ir.LMHead():
            return (0 if op.tied else _linear(op.dim, vocab_shard(op.vocab, tp), op.bias)), 0
    from .params import op_params

    return op_params(op)[1], 0  # replicated: norms, positions, patches, pooler, classifier
