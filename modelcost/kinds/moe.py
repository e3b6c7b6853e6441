"""Mixture of experts: a router, top_k of `experts` routed experts per token, and shared
experts run as one MLP. Two layouts (graph.Parallel):

- ep taken from dp (attention data-parallel, Megatron's default): each rank's tokens
  travel to their experts' ranks by all-to-all and back, each expert's width over tp;
  the bound moves a token once to each rank holding one of its experts (and once to
  each other scale-up domain across: DeepEP's normal kernels), the estimate every
  (token, expert) copy, as NCCL's all-to-all and DeepEP's low-latency kernels do
  (perfmodel/collectives.py `Fanout`, network.exchange);
- folded onto tp × dp (Megatron-Core's MoE parallel folding, `par.folded`): the tokens
  are replicated over the tp ranks after attention, so no rank sends them; an expert
  group spanning g = ep·etp/tp dp replicas all-gathers their tokens first and
  reduce-scatters its partial outputs after, and the layer's tp all-reduce sums the
  expert ranks' partial outputs. This is vLLM's default: `FusedMoEParallelConfig.
  use_all2all_kernels` is `dp_size > 1 and use_ep` (vllm/model_executor/layers/
  fused_moe/config.py), so TP with EP alone runs no all-to-all, and with dp > 1 the
  default `VLLM_ALL2ALL_BACKEND` is `allgather_reducescatter` (vllm/envs.py); SGLang's
  default `--moe-a2a-backend none` likewise keeps the tokens on the tp ranks (DeepEP's
  all-to-all is its opt-in). Each rank computes its E/ep experts (1/etp of each) on the
  rows routed to them: g·T·k/ep of them on the mean (whole rows, rounded up: some rank
  takes at least that many), the mean being the bound's (docs/conventions.md).
"""

from __future__ import annotations

import modelcost.language.spec as ir
from modelcost.ir.parallel import ceil_div, refuse
from modelcost.perfmodel import (
    BinaryOp,
    Fanout,
    MoECommOp,
    MoERoutingOp,
    UnaryOp,
    bpe,
    expected_experts_hit,
)
from modelcost.perfmodel.moe import ROUTER_INDEX_BYTES, ROUTER_PROB_BYTES

from .emit import ACT_FN, Emit, Lowerer, gemm
from .room import NOTHING_KEPT, REFUSES_NOTHING, Component, Room, ffn, linear

ROUTE_BYTES = ROUTER_PROB_BYTES + ROUTER_INDEX_BYTES  # a routing decision: weight and id


def lower(lw: Lowerer, e: Emit, op: ir.MoE, name: str) -> None:
    s, d, par = lw.s, op.dtypes, lw.par
    a = d.activations
    T, E, k = s.T, op.experts, op.top_k
    reps = par.expert_gather  # folded: the dp replicas whose tokens the expert group takes
    x = lw.enter(e, name, op.dim, a)
    # routers are kept in the activation dtype even when experts are quantized
    router = lw.gemm_node(e, f"{name}.router", gemm(T, E, op.dim, op.router_bias, d, a), (x,))
    routing = MoERoutingOp(
        T, E, k, op.router.value, a, op.groups, op.groups_kept, op.correction_bias
    )
    route = e.add(f"{name}.routing", routing, (router,), out=T * k * ROUTE_BYTES)
    # the rows this rank's experts take: each token copy once (folded: the group's
    # reps·T·k copies over its ep ranks, at least the mean, in whole rows)
    rows = ceil_div(reps * T * k, par.ep) if par.folded else T * k
    # the exchange's routing: a row travels once to each rank holding its experts
    fanout = Fanout(experts=E, top_k=k, groups=op.groups, groups_kept=op.groups_kept)
    disp = _dispatch(lw, e, op, name, x, route, rows, fanout)
    dn = _experts(lw, e, op, name, rows, disp)
    out = _combine(lw, e, op, name, dn, route, rows, fanout)
    if op.shared_experts:
        out = _shared(lw, e, op, name, x, out)
    e.stream = lw.exit(e, name, op.dim, a, out)


def _dispatch(lw: Lowerer, e: Emit, op: ir.MoE, name: str, x: str, route: str, rows: int,
              fanout: Fanout) -> str:  # fmt: skip
    """The tokens to their experts: the group's other dp replicas' gathered first
    (folded: vLLM's allgather_reducescatter), each token copy once, and (ep from dp)
    each token to its experts' ranks by all-to-all."""
    a, par = op.dtypes.activations, lw.par
    src = x
    if par.expert_gather > 1:
        src = lw.collective(e, f"{name}.dispatch.all_gather", "all_gather",
                            par.expert_gather * lw.s.T * op.dim, a, x, "gather")  # fmt: skip
    disp = e.add(
        f"{name}.dispatch",
        MoECommOp(rows, op.dim, "dispatch", a),
        (src, route),
        out=rows * op.dim * bpe(a),
    )
    if par.ep > 1 and not par.folded:  # each token to its experts' ranks (mean)
        disp = lw.collective(
            e, f"{name}.dispatch.all_to_all", "all_to_all", rows * op.dim, a, disp, "ep",
            fanout,
        )  # fmt: skip
    return disp


def _experts(lw: Lowerer, e: Emit, op: ir.MoE, name: str, rows: int, disp: str) -> str:
    """The experts this rank holds on the rows routed to them: gate and up projection,
    the activation (and the gating product), the down projection; as many experts
    weighed as any token of the ep ranks (folded: of the group's replicas) reaches."""
    d, par, T = op.dtypes, lw.par, lw.s.T
    a, d_ff = d.activations, op.d_ff // par.expert_tp
    E, k, ep = op.experts, op.top_k, par.ep
    hit = expected_experts_hit(E, k, T * par.expert_gather if par.folded else T * ep) / ep
    hit = int(hit) if float(hit).is_integer() else hit
    up_n = (2 if op.act.gated else 1) * d_ff
    gu = lw.experts(e, f"{name}.experts.gate_up", rows, op.dim, up_n, hit, d, disp)
    h_bytes = rows * d_ff * bpe(a)
    h = e.add(
        f"{name}.experts.act",
        UnaryOp((rows, d_ff), ACT_FN[op.act], a, a),
        (gu,),
        out=h_bytes,
    )
    if op.act.gated:
        h = e.add(
            f"{name}.experts.gate_mul",
            BinaryOp((rows, d_ff), (rows, d_ff), "mul", a, a, a),
            (h,),
            out=h_bytes,
        )
    return lw.experts(e, f"{name}.experts.down", rows, d_ff, op.dim, hit, d, h)


def _combine(lw: Lowerer, e: Emit, op: ir.MoE, name: str, dn: str, route: str, rows: int,
             fanout: Fanout) -> str:  # fmt: skip
    """The experts' outputs back to each token's rank (ep from dp: all-to-all), weighed
    and summed, and (folded) each replica's tokens reduce-scattered over the group."""
    a, par, T = op.dtypes.activations, lw.par, lw.s.T
    reps = par.expert_gather
    if par.ep > 1 and not par.folded:  # and back to the token's own rank
        dn = lw.collective(
            e, f"{name}.combine.all_to_all", "all_to_all", rows * op.dim, a, dn, "ep",
            fanout,
        )  # fmt: skip
    out = e.add(
        f"{name}.combine",
        MoECommOp(rows, op.dim, "combine", a),
        (dn, route),
        out=reps * T * op.dim * bpe(a),
    )
    if reps > 1:  # each replica's tokens back, summed over the group's dp ranks
        out = lw.collective(e, f"{name}.combine.reduce_scatter", "reduce_scatter",
                            reps * T * op.dim, a, out, "gather")  # fmt: skip
    return out


def _shared(lw: Lowerer, e: Emit, op: ir.MoE, name: str, x: str, out: str) -> str:
    """The shared experts, run as one MLP of their summed width (its output scaled by
    sigmoid(x · w_gate) where the model gates it), added to the routed experts'."""
    d, T = op.dtypes, lw.s.T
    a = d.activations
    width = op.shared_experts * op.shared_d_ff // lw.tp
    sh = lw.ffn(e, f"{name}.shared", op.dim, width, op.act, op.bias, d, x)
    if op.shared_gate:
        g = lw.gemm_node(e, f"{name}.shared_gate", gemm(T, 1, op.dim, False, d, a), (x,))
        g = e.add(f"{name}.shared_gate.sigmoid", UnaryOp((T, 1), "sigmoid", a, a), (g,),
                  out=T * bpe(a))  # fmt: skip
        sh = e.add(f"{name}.shared_gate.mul",
                   BinaryOp((T, op.dim), (T, 1), "mul", a, a, a), (sh, g),
                   out=T * op.dim * bpe(a))  # fmt: skip
    return e.add(
        f"{name}.shared_add",
        BinaryOp((T, op.dim), (T, op.dim), "add", a, a, a),
        (out, sh),
        out=T * op.dim * bpe(a),
    )


def _params(op: ir.MoE, tp: int, ep: int) -> tuple[int, int]:
    expert = ffn(op.dim, op.d_ff // tp, op.act, op.bias)
    shared = op.shared_experts * ffn(op.dim, op.shared_d_ff // tp, op.act, op.bias)
    # the correction bias is a buffer, not a parameter, in the reference code; it
    # is in the checkpoint, so it is counted (docs/conventions.md)
    router = linear(op.dim, op.experts, op.router_bias) + (op.experts if op.correction_bias else 0)
    gate = op.dim if op.shared_gate else 0  # Linear(dim, 1), no bias
    return shared + gate + router, op.experts // ep * expert


def _active(op: ir.MoE, dense: int, experts: int) -> int:
    """A token touches top_k of the experts."""
    return dense + op.top_k * experts // op.experts


def _sharding(op: ir.MoE, par, where: str):
    """Its experts split over the ep ranks (ep divides them), each expert's width over
    etp ranks (tp where ep is taken from dp; etp divides d_ff); the shared experts' width
    over tp."""
    tp, ep, etp = par.tp, par.ep, par.expert_tp
    if op.experts % ep:
        return refuse(
            f"--ep {ep} does not divide the {op.experts} experts of {where}",
            f"use a divisor of {op.experts}",
        )
    if etp != tp and op.d_ff % etp:
        return refuse(
            f"--etp {etp} does not divide the expert width d_ff = {op.d_ff} of {where}",
            "each expert's width is split over the etp ranks: use a divisor of "
            f"{op.d_ff} (--etp 1: each expert whole on its rank)",
        )
    if (op.d_ff % tp and etp == tp) or (op.shared_experts and op.shared_d_ff % tp):
        return refuse(
            f"--tp {tp} does not divide the expert width d_ff = {op.d_ff} "
            f"(or the shared experts') of {where}",
            "each expert's width is split over the tp ranks",
        )
    return None


MOE = Room(
    kind=ir.MoE,
    lower=lower,
    params=_params,
    active=_active,
    component=Component.experts,
    memory=NOTHING_KEPT,
    sharding=_sharding,
    refuses=REFUSES_NOTHING,
)
