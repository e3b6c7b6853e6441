"""Stage 3, lower: a Spec and a workload → an OpGraph of perf-model op records.

Identical repeated layers are lowered once and carry a multiplicity; each distinct
layer kind of a heterogeneous stack (dense then MoE, local/global alternation) is its
own group. Each IR layer statement lowers to the ops its reference implementation runs
(`attention` → q/k/v projections, RoPE, SDPA, o projection, ...), as its kind's room
says (modelcost/kinds); the workload is validated first (validate.py) and the layers
are taken in the order of this device's pipeline stage (stages.py).
"""

from __future__ import annotations

import math
from collections import Counter

import modelcost.language.spec as ir
from modelcost.base.dtypes import DType
from modelcost.base.errors import SpecError
from modelcost.base.record import replace
from modelcost.ir.graph import RECEIVED, Group, ModelFacts, Node, OpGraph, Shape, Workload
from modelcost.kinds.emit import Emit, Lowerer
from modelcost.kinds.registry import room
from modelcost.language.recipes import RECIPES
from modelcost.perfmodel import AdamStepOp, CollectiveOp, OffloadOp, bpe
from modelcost.perfmodel.collectives import CollectiveKind

from .memory import gradient_dtype, layer_sets, model_facts, offloaded_bytes
from .params import residual_width
from .stages import Stack, stage, stream_items
from .validate import workload_shape

# Distinct ops after lowering (repeated layers count once): 20× the first bound, room for
# a heterogeneous model (Nemotron-Ultra-253B: 162 different layers, ~2,600 ops) or 1,800
# distinct Llama-like layers (16 ops each), written as calls of a block with arguments:
# spelled out statement by statement, the token bound (bounds.MAX_TOKENS, 20,000) stops a
# file at about 1,100 distinct layers first. Lowering stops at the first op past it. The
# worst accepted input (tests/hostile.py "most-ops", ~30,000 ops a phase), measured
# through the CLI on this project's 2-core machine: check 0.6 s; compile --format json
# ~1.5-2 s and 270 MB; --format html ~8 s and 380 MB; three phases in JSON ~5 s, 750 MB.
# Time and memory grow linearly with the ops (~25 µs and ~8 KB an op in a report).
MAX_NODES = 30_000


def lower_op(lowerer: Lowerer, e: Emit, op: ir.Op, times: int) -> None:
    """Emit `op`'s nodes as its kind's room lowers it; `times` multiplies the scope's
    count (a nested repeat)."""
    count_before = e.count
    e.count = count_before * times
    lowerer.recipe = RECIPES[op.dtypes.recipe]  # the precision recipe its GEMMs follow
    try:
        room(op).lower(lowerer, e, op, e.scope(op.scope))
    finally:
        e.count = count_before


def _check_size(spec: ir.Spec, nodes: int) -> None:
    """Costing, rooflining and rendering take time per distinct op: bound them."""
    if nodes > MAX_NODES:
        raise SpecError(
            f"`{spec.name}` lowers to more than {MAX_NODES:,} distinct ops",
            filename="modelcost",
            hint="use `repeat` for identical layers: a repeated layer is lowered once",
        )


def _step_nodes(spec: ir.Spec, shape: Shape, facts: ModelFacts) -> list[Node]:
    """Training's once-per-step work on one device: the data-parallel gradient sync
    (ZeRO-0 all-reduce; ZeRO-1/2 reduce-scatter, then all-gather of the updated weights;
    ZeRO-3 also gathers the weights for forward and backward) and the AdamW step on the
    parameters this device updates (Rajbhandari et al. 2020). ZeRO-3 keeps no whole
    weights between microbatches: it gathers them for each microbatch's forward and
    backward and reduce-scatters each microbatch's gradients (Megatron-FSDP's
    optim_grads_params: `grad_reduce_every_bprop`, the pre-forward and pre-backward
    all-gathers). Megatron-Core runs the sync beside the backward and forward
    (overlap_grad_reduce, overlap_param_gather; Megatron-FSDP forces both)."""
    par, w = shape.par, spec.dtypes.weights
    g = gradient_dtype(w, par.grads)  # as Megatron-LM accumulates and reduces them
    nodes: list[Node] = []
    # dense parameters are replicated over dp ranks; experts over dp/ep of them
    for what, elements, group, stride in (
        ("grads", facts.device_dense, par.weight_copies, par.copies_stride),
        ("expert_grads", facts.device_experts, par.expert_copies, par.expert_copies_stride),
    ):
        if group == 1 or not elements:
            continue
        steps: list[tuple[str, CollectiveKind, DType]] = [("all_reduce", "all_reduce", g)]
        if par.zero:
            steps = [("reduce_scatter", "reduce_scatter", g)]
            steps.append(("params.all_gather", "all_gather", w))
            if par.zero == 3:
                steps.append(("params.all_gather.backward", "all_gather", w))
        every = par.microbatches if par.zero == 3 else 1
        for name, kind, dtype in steps:
            rec = CollectiveOp(kind, elements, group, dtype, stride)
            nodes.append(Node(f"{what}.{name}", "model", every, rec, (), 0, step=True,
                              beside=True))  # fmt: skip
    updated = facts.device_dense // (par.weight_copies if par.zero else 1)
    updated += facts.device_experts // (par.expert_copies if par.zero else 1)
    adam = AdamStepOp(updated, weight=w, grad=g)
    nodes.append(Node("optimizer", "model", 1, adam, (), 0, step=True))
    return nodes


def _offload_node(
    spec: ir.Spec, nodes: list[Node], groups: list[Group], offload: int, microbatches: int
) -> Node:
    """Activation offloading's copies, once per microbatch: the first `offload` layers'
    saved activations to host memory in the forward and back in the backward, on their
    own stream beside compute (Transformer Engine's CPU offload under Megatron-Core's
    cpu_offloading_num_layers, which must be fewer than the layers)."""
    sets = layer_sets(nodes, groups, microbatches)
    if offload >= len(sets):
        raise SpecError(
            f"--offload {offload}: `{spec.name}` has {len(sets)} layers, and Megatron-Core "
            "offloads fewer than all of them",
            filename="modelcost",
            hint=f"use at most {len(sets) - 1} (at most {len(sets) - 2} for the copies "
            "to overlap compute, Transformer Engine's docs say)",
        )
    rec = OffloadOp(math.ceil(offloaded_bytes(sets, offload)), offload)
    return Node("activations.offload", "model", microbatches, rec, beside=True)


def _lower_items(
    lowerer: Lowerer,
    items,
    prefix: str,
    group: str,
    scopes: Counter,
    stream: str,
    residual: str,
    nodes: list[Node],
    groups: list[Group],
    spec: ir.Spec,
) -> tuple[str, str]:
    """Lower one stream's model-level ops and layer groups in order; returns the nodes
    carrying its stream and residual at the end."""
    model_emit = Emit(prefix, group, 1, stream, residual, totals=scopes)
    for item, layers, ops in items:
        if isinstance(item, ir.Stream):
            _lower_stream(lowerer, item, nodes, groups, spec, stream)
            continue
        if not isinstance(item, Stack):
            model_emit.stream, model_emit.residual_from = stream, residual
            start = len(model_emit.nodes)
            lower_op(lowerer, model_emit, item, 1)
            nodes.extend(model_emit.nodes[start:])
            _check_size(spec, len(nodes))
            stream, residual = model_emit.stream, model_emit.residual_from
            continue
        label = f"{prefix}layers.{layers[0]}"
        totals = Counter(op.scope for op, _ in ops)
        e = Emit(f"{label}.", label, len(layers), stream, residual, totals=totals)
        for op, times in ops:
            lower_op(lowerer, e, op, times)
            _check_size(spec, len(nodes) + len(e.nodes))
        nodes.extend(e.nodes)
        groups.append(Group(label, item.block, layers, len(layers)))
        stream, residual = e.stream, e.residual_from
        lowerer.hidden = stream  # the last layer's output (what multi-token prediction reads)
    return stream, residual


def _lower_stream(
    lowerer: Lowerer,
    st: ir.Stream,
    nodes: list[Node],
    groups: list[Group],
    spec: ir.Spec,
    main: str,
) -> None:
    """An encoder or tower over its own tokens (prefill and training: decode reuses
    what it left), or an auxiliary module over the main stream's tokens (training)."""
    shape = lowerer.s
    if shape.decode and not st.auxiliary:
        return
    sub = shape
    if not st.auxiliary:
        L = dict(shape.streams)[st.name]
        sub = Shape(shape.phase, shape.B, L, L, False, shape.par)
    groups.append(Group(st.name, "stream", (), 1))
    scopes = Counter(item.scope for item, _, _ in stream_items(st) if not isinstance(item, Stack))
    lowerer.s = sub
    hidden = lowerer.hidden
    start = main if st.auxiliary else ""  # a module reads the main stream; a tower, nothing
    try:
        out, _ = _lower_items(lowerer, stream_items(st), f"{st.name}.", st.name, scopes,
                              start, start, nodes, groups, spec)  # fmt: skip
    finally:
        lowerer.s, lowerer.hidden = shape, hidden
    lowerer.outputs[st.name] = out


def lower(
    spec: ir.Spec, workload: Workload, shaped: tuple[Shape, list[str]] | None = None
) -> OpGraph:
    """Lower a resolved spec for one workload into an op graph; `shaped`, the workload's
    shape and notes when validate.workload_shape has given them already."""
    shape, notes = workload_shape(spec, workload) if shaped is None else shaped
    lowerer = Lowerer(spec, shape)
    nodes: list[Node] = []
    groups: list[Group] = []
    stream, residual = "", ""
    par = shape.par
    st = stage(spec, par.pp, shape.train, par.vpp)
    if par.pp > 1:  # the previous stage's activations arrive (gradients go back), once
        # for each of the stage's vpp chunks (interleaved 1F1B: vpp× the p2p traffic)
        a = spec.dtypes.activations
        rec = CollectiveOp("p2p", shape.T_seq * residual_width(spec), 2, a, par.pp_stride)
        stream = residual = RECEIVED
        out = shape.T_seq * residual_width(spec) * bpe(a)
        # sent beside compute in the interleaved schedule (Megatron-Core's
        # overlap_p2p_comm, which Megatron-Bridge turns on where pp > 1 and vpp > 1),
        # waited on in plain 1F1B
        nodes.append(Node(stream, "model", par.vpp, rec, (), out, beside=par.vpp > 1))
    _lower_items(lowerer, st.items, "", "model", st.model_scopes, stream, residual, nodes,
                 groups, spec)  # fmt: skip
    m = shape.par.microbatches
    if m > 1:  # every op of the step runs once per microbatch
        nodes = [replace(n, count=n.count * m) for n in nodes]
    facts = model_facts(spec, shape, st.held)
    if shape.train and par.offload:
        nodes.append(_offload_node(spec, nodes, groups, par.offload, m))
    if shape.train:
        nodes.extend(_step_nodes(spec, shape, facts))
    model_nodes = [n for n in nodes if n.group == "model"]
    if model_nodes:
        groups.insert(0, Group("model", "model", (), 1))
    used = {n.group for n in nodes}
    groups = [g for g in groups if g.name in used]
    split = (st.note,) if st.note else ()
    return OpGraph(
        facts, workload, shape, tuple(nodes), tuple(groups), (*notes, *split, *lowerer.notes)
    )
