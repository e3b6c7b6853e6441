"""Memory footprint of a workload: weights, KV cache, activations (and, when training,
gradients and optimizer states), against the device's HBM capacity."""

from __future__ import annotations

from . import spec as ir
from .graph import OpGraph
from .hardware import Hardware
from .params import op_params, walk
from .perfmodel import bpe

ADAM_STATE_BYTES = 8  # m and v in fp32
MASTER_BYTES = 4  # an fp32 master copy when the weights are narrower


def kv_cache_bytes(op: ir.Op, batch: int, length: int) -> float:
    """Cache a sequence of `length` keeps for one layer op (SSMs keep a fixed state)."""
    kv = bpe(op.dtypes.kv_cache)
    match op:
        case ir.Attention() | ir.MLA() if not op.causal:
            return 0.0  # bidirectional attention (an encoder) keeps no cache
        case ir.Attention():
            kept = min(length, op.window) if op.window else length
            return batch * kept * 2 * op.kv_heads * op.head_dim * kv
        case ir.MLA():
            return batch * length * (op.kv_lora_rank + op.qk_rope_head_dim) * kv
        case ir.Mamba2():
            conv_ch = op.d_inner + 2 * op.groups * op.d_state
            state = op.heads * op.head_dim * op.d_state * 4  # fp32 SSM state
            return batch * (state + conv_ch * op.d_conv * bpe(op.dtypes.activations))
    return 0.0


def footprint(spec: ir.Spec, graph: OpGraph, hw: Hardware) -> dict[str, float]:
    """Bytes by kind; see docs/report.md for what each counts."""
    shape = graph.shape
    train = shape.train
    weights = grads = states = kv = 0.0
    length = shape.n_kv
    for op, times in walk(spec.body):
        n = op_params(op)[1] * times
        weights += n * bpe(op.dtypes.weights)
        if train:
            grads += n * bpe(op.dtypes.activations)
            master = MASTER_BYTES if bpe(op.dtypes.weights) < 4 else 0
            states += n * (ADAM_STATE_BYTES + master)
        else:
            kv += kv_cache_bytes(op, shape.B, length) * times
    produced = {n.name: n.out_bytes for n in graph.nodes}
    if train:  # everything the backward needs is kept (no recomputation)
        activations = sum(n.out_bytes * n.count for n in graph.nodes)
    else:  # the largest op's inputs and output alive at once
        activations = max(
            (n.out_bytes + sum(produced.get(i, 0) for i in set(n.inputs)) for n in graph.nodes),
            default=0.0,
        )
    return {
        "weights": weights,
        "kv_cache": kv,
        "activations": activations,
        "gradients": grads,
        "optimizer_states": states,
    }
