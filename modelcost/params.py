"""Parameter counting: total and active (per-token) parameters of a Spec, by component.

Counts every weight, bias and norm scale the reference implementations allocate.
"Active" counts what one token touches: for MoE, top_k routed experts plus the shared
experts and the router, instead of all experts.
"""

from __future__ import annotations

from collections.abc import Iterator
from enum import StrEnum

from . import spec as ir
from .frozen import Frozen


class Component(StrEnum):
    embedding = "embedding"
    attention = "attention"
    mlp = "mlp"
    experts = "experts"
    ssm = "ssm"
    norms = "norms"
    head = "head"


class ParamCount(Frozen):
    model: str
    total: int
    active: int
    components: dict[Component, int]
    active_components: dict[Component, int]


def _linear(n_in: int, n_out: int, bias: bool) -> int:
    return n_in * n_out + (n_out if bias else 0)


def _ffn(dim: int, d_ff: int, act: ir.Activation, bias: bool) -> int:
    """One MLP (or one expert): gated ones have gate and up projections, then down."""
    ups = 2 if act.gated else 1
    return ups * _linear(dim, d_ff, bias) + _linear(d_ff, dim, bias)


def op_params(op: ir.Op) -> tuple[Component, int, int]:
    """(component, total, active) parameters of one op instance."""
    match op:
        case ir.Embedding():
            return Component.embedding, op.vocab * op.dim, op.vocab * op.dim
        case ir.PositionEmbedding():
            n = op.positions * op.dim
            return Component.embedding, n, n
        case ir.PatchEmbed():
            conv = _linear(op.channels * op.patch * op.patch, op.dim, op.bias)
            n = conv + (op.dim if op.cls_token else 0)
            return Component.embedding, n, n
        case ir.Norm():
            n = op.dim * (2 if op.bias else 1)
            return Component.norms, n, n
        case ir.Attention():
            q = op.heads * op.head_dim
            kv = op.kv_heads * op.head_dim
            n = (
                _linear(op.dim, q, op.qkv_bias)
                + 2 * _linear(op.dim, kv, op.qkv_bias)
                + _linear(q, op.dim, op.out_bias)
                + (2 * op.head_dim if op.qk_norm else 0)
                + (op.heads if op.sinks else 0)
            )
            return Component.attention, n, n
        case ir.MLA():
            qk_head = op.qk_nope_head_dim + op.qk_rope_head_dim
            if op.q_lora_rank:
                q = op.dim * op.q_lora_rank + op.q_lora_rank + op.q_lora_rank * op.heads * qk_head
            else:
                q = op.dim * op.heads * qk_head
            kv = (
                op.dim * (op.kv_lora_rank + op.qk_rope_head_dim)
                + op.kv_lora_rank
                + op.kv_lora_rank * op.heads * (op.qk_nope_head_dim + op.v_head_dim)
            )
            o = op.heads * op.v_head_dim * op.dim
            return Component.attention, q + kv + o, q + kv + o
        case ir.MLP():
            n = _ffn(op.dim, op.d_ff, op.act, op.bias)
            return Component.mlp, n, n
        case ir.MoE():
            expert = _ffn(op.dim, op.d_ff, op.act, op.bias)
            shared = op.shared_experts * _ffn(op.dim, op.shared_d_ff, op.act, op.bias)
            # the correction bias is a buffer, not a parameter, in the reference code; it
            # is in the checkpoint, so it is counted (docs/conventions.md)
            router = _linear(op.dim, op.experts, op.router_bias) + (
                op.experts if op.correction_bias else 0
            )
            return (
                Component.experts,
                op.experts * expert + shared + router,
                op.top_k * expert + shared + router,
            )
        case ir.Mamba2():
            bc = 2 * op.groups * op.d_state
            in_proj = _linear(op.dim, 2 * op.d_inner + bc + op.heads, op.bias)
            conv_ch = op.d_inner + bc
            conv = conv_ch * op.d_conv + (conv_ch if op.conv_bias else 0)
            per_head = 3 * op.heads  # dt_bias, A_log, D
            n = in_proj + conv + per_head + op.d_inner + _linear(op.d_inner, op.dim, op.bias)
            return Component.ssm, n, n
        case ir.Residual():
            return Component.norms, 0, 0
        case ir.LMHead():
            n = 0 if op.tied else _linear(op.dim, op.vocab, op.bias)
            return Component.head, n, n
        case ir.Pooler():
            n = _linear(op.dim, op.dim, op.bias)
            return Component.head, n, n
        case ir.Classifier():
            n = _linear(op.dim, op.classes, op.bias)
            return Component.head, n, n
    raise AssertionError(f"unhandled op {op!r}")  # pragma: no cover


def walk(nodes: tuple[ir.Statement, ...], multiplicity: int = 1) -> Iterator[tuple[ir.Op, int]]:
    """Every op of a layer tree with how many times it occurs."""
    for node in nodes:
        if isinstance(node, ir.Repeat):
            yield from walk(node.body, multiplicity * node.count)
        elif isinstance(node, ir.Block):
            yield from walk(node.body, multiplicity)
        else:
            yield node, multiplicity


def count_params(spec: ir.Spec) -> ParamCount:
    total: dict[Component, int] = dict.fromkeys(Component, 0)
    active: dict[Component, int] = dict.fromkeys(Component, 0)
    for op, times in walk(spec.body):
        component, n, n_active = op_params(op)
        total[component] += n * times
        active[component] += n_active * times
    present = [c for c in Component if total[c]]
    return ParamCount(
        model=spec.name,
        total=sum(total.values()),
        active=sum(active.values()),
        components={c: total[c] for c in present},
        active_components={c: active[c] for c in present},
    )
