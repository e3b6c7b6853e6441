"""What a model keeps in memory, sized from its spec during lowering: weights, the KV
cache and SSM state, and (training) gradients and optimizer states.

Each kind's room (modelcost/kinds) says what it keeps: `cache_elements_per_token` is what
an attention layer writes per token (its lowering sizes its cache-write ops from the
same rule) and `state_bytes` what a recurrent layer keeps per sequence. Lowering calls
`model_facts` once and carries the result on the graph; reporting (footprint.footprint)
reads the graph alone. `kept_activations` is what training's backward needs kept, by
layer group: the footprint's activations and activation offloading's copies read it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import modelcost.language.spec as ir
from modelcost.base.dtypes import DType
from modelcost.base.memo import per_object
from modelcost.base.record import Record
from modelcost.kinds.registry import room
from modelcost.language.recipes import RECIPES
from modelcost.language.spec import walk
from modelcost.perfmodel import BinaryOp, CollectiveOp, OpRecord, UnaryOp, bpe

from .params import count_params, device_params, residual_width

if TYPE_CHECKING:
    from modelcost.ir.graph import Grads, Group, ModelFacts, Node, Parallel, Shape

ADAM_STATE_BYTES = 8  # m and v in fp32
MASTER_BYTES = 4  # an fp32 master copy when the weights are narrower


def gradient_dtype(weights: DType, grads: Grads = "fp32") -> DType:
    """The dtype training accumulates and reduces gradients in. `fp32`: as Megatron-LM
    does for bf16 models ("bfloat16 requires gradient accumulation and all-reduce to be
    done in fp32", megatron/training/arguments.py; its gradient buffer is then fp32,
    param_and_grad_buffer.py) and for fp32 ones; an fp16 model's in fp16 (Megatron-LM
    turns fp32 accumulation on only for bf16). `param`: the parameters' own dtype, as
    Megatron-Bridge's performance recipes run (grad_reduce_in_fp32 False,
    perf_recipes/_common.py; the gradient buffer then takes the parameters' dtype,
    Megatron-Core param_and_grad_buffer.py). Narrower weights (an FP8 recipe) are
    trained from bf16 parameters (Transformer Engine): their gradients are fp32, or
    bf16 under `param`."""
    if weights == DType.fp16:
        return DType.fp16
    if grads == "param":
        return weights if bpe(weights) >= 2 else DType.bf16
    return DType.fp32


def cache_elements_per_token(op: ir.Op, tp: int = 1) -> int:
    """Elements of KV cache one token adds to one layer op on one of `tp` tensor-parallel
    ranks (bidirectional attention, an encoder's, keeps none; cross-attention keeps its
    source stream's keys and values, per source token): its room's memory says."""
    return room(op).memory.per_token(op, tp)


def state_bytes(op: ir.Op, tp: int = 1) -> float:
    """Bytes a recurrent layer keeps per sequence on one of `tp` ranks: the state and
    the conv window (Mamba-2's SSM state, a Gated DeltaNet's dk × dv per value head)."""
    return room(op).memory.per_sequence(op, tp)


def cache_bytes(
    op: ir.Op, batch: int, length: int, tp: int = 1, sources: dict[str, int] | None = None
) -> float:
    """What `batch` sequences of `length` tokens keep for one layer op on one rank (a
    window's or chunk's at most; a cross-attention its source stream's, `sources`)."""
    memory = room(op).memory
    kept = memory.tokens(op, length, sources or {})
    per_token = memory.per_token(op, tp) * bpe(op.dtypes.kv_cache)
    return batch * (kept * per_token + memory.per_sequence(op, tp))


class Held(Record, frozen=True, weakref=True):
    """The layer ops (with multiplicities) one device holds: its pipeline stage's.
    Lowering makes one per spec and stage, so what follows from it alone is computed
    once (memo.per_object)."""

    ops: tuple[tuple[ir.Op, int], ...]


def model_facts(spec: ir.Spec, shape: Shape, held: Held | None = None) -> ModelFacts:
    """Everything reporting needs of the spec, in one walk of its layers: the model's
    parameter counts, and what one device of the layout keeps (ZeRO shards weights at
    stage 3, gradients from 2, optimizer states from 1 over the ranks holding copies).
    `held`: the ops of this device's pipeline stage; all of them when None."""
    from modelcost.ir.graph import ModelFacts

    par = shape.par
    held = Held(tuple(walk(spec.body))) if held is None else held
    dense, experts, weights, grads, states = _held(held, par, shape.train)
    # from an int 0, as sum() starts: the same figures, and a sweep's symbolic length
    # (symbolic.py) stays seen (0.0 + x is float's own addition, which reads x unasked)
    cache: float = 0
    if not shape.train:
        # a context-parallel rank keeps the keys of its own chunk
        length = shape.n_kv if shape.decode else shape.n_kv // par.cp
        sources = dict(shape.streams)
        for op, times in _caching(held, par.tp):
            cache += cache_bytes(op, shape.B_device, length, par.tp, sources) * times
            if shape.chunk:  # the chunk's prompts, at their full length
                full = shape.prefix + shape.prompt
                cache += cache_bytes(op, shape.chunk_sequences, full, par.tp, sources) * times
    params = count_params(spec)
    return ModelFacts(
        name=spec.name,
        title=spec.title,
        params_total=params.total,
        params_active=params.active,
        device_dense=dense,
        device_experts=experts,
        width=residual_width(spec),
        activations=spec.dtypes.activations,
        compute=RECIPES[spec.dtypes.recipe].activations or spec.dtypes.activations,
        weight_bytes=weights,
        cache_bytes=cache,
        gradient_bytes=grads,
        optimizer_bytes=states,
    )


@per_object
def _caching(held: Held, tp: int) -> tuple[tuple[ir.Op, int], ...]:
    """The held ops that keep anything per sequence (a KV cache, an SSM state)."""
    return tuple((op, times) for op, times in held.ops
                 if cache_elements_per_token(op, tp) or state_bytes(op, tp))  # fmt: skip


@per_object
def _held(held: Held, par: Parallel, train: bool) -> tuple[int, int, float, float, float]:
    """(dense and expert parameters, weight, gradient and optimizer bytes) one device
    holds: the same for every batch and context, so computed once per stage and layout."""
    weights = grads = states = 0.0
    dense = experts = 0
    for op, times in held.ops:
        d, x = device_params(op, par.tp, par.ep, par.expert_tp)
        dense, experts = dense + d * times, experts + x * times
        stored = bpe(op.dtypes.weights) + RECIPES[op.dtypes.recipe].scale_bytes_per_weight
        for n, copies in ((d * times, par.weight_copies), (x * times, par.expert_copies)):
            weights += n * stored / (copies if par.zero == 3 else 1)
            if train:
                grad = bpe(gradient_dtype(op.dtypes.weights, par.grads))
                grads += n * grad / (copies if par.zero >= 2 else 1)
                master = MASTER_BYTES if bpe(op.dtypes.weights) < 4 else 0
                states += n * (ADAM_STATE_BYTES + master) / (copies if par.zero >= 1 else 1)
    return dense, experts, weights, grads, states


def kept_activations(nodes: Sequence[Node]) -> dict[str, float]:
    """Bytes of the tensors the backward reads, by layer group, for every microbatch of
    the step, as Megatron-Core keeps them: an op's output is kept when a consumer's
    backward reads it (`OpRecord.backward_reads_inputs`: a GEMM's input, a norm's, a
    product's; not a residual add's, a rotation's or a reduction's, so partial sums are
    not kept) or its own backward does (flash attention's O). A gathered tensor is not
    kept, its shard is, and the backward gathers it again (Korthikanti et al. 2022,
    section 4.2.2), so sequence parallelism divides a layer's by tp. An activation that
    only feeds a gating product (SwiGLU, GeGLU) is recomputed in the fused backward from
    its input, which is kept (Megatron-Core's fused bias_swiglu/bias_geglu save only the
    first linear's output)."""
    read: set[str] = set()  # tensors a consumer's backward reads
    ungated: set[str] = set()  # tensors a consumer other than a gating product reads
    for n in nodes:
        reads, gating = n.op.backward_reads_inputs(), _gating(n.op)
        for i in n.inputs:
            if reads:
                read.add(i)
            if not gating:
                ungated.add(i)
    kept: dict[str, float] = {}
    for n in nodes:
        op = n.op
        if n.step or (isinstance(op, CollectiveOp) and op.collective == "all_gather"):
            continue
        if isinstance(op, UnaryOp) and n.name in read and n.name not in ungated:
            continue  # recomputed from its input in the fused gating backward
        if n.name in read or op.backward_reads_output():
            kept[n.group] = kept.get(n.group, 0.0) + n.out_bytes * n.count
    return kept


def _gating(op: OpRecord) -> bool:
    return isinstance(op, BinaryOp) and op.fn == "mul"


def layer_sets(nodes: Sequence[Node], groups: Sequence[Group], microbatches: int) -> list[float]:
    """One microbatch's saved activations (`kept_activations`) of each layer of the
    stage, in layer order: a group's share split evenly over its layers."""
    kept = kept_activations(nodes)
    streams: dict[str, int] = {}  # a token stream's layers (`encoder.layers.3`) in the
    by_layer: dict[tuple[int, int], float] = {}  # order its groups were lowered
    for g in groups:
        if g.name in kept and g.layers:
            rank = streams.setdefault(g.name.rpartition("layers.")[0], len(streams))
            each = kept[g.name] / microbatches / len(g.layers)
            by_layer.update(dict.fromkeys(((rank, i) for i in g.layers), each))
    return [by_layer[k] for k in sorted(by_layer)]


def offloaded_bytes(sets: Sequence[float], offload: int) -> float:
    """One microbatch's bytes activation offloading copies out and back: the first
    `offload` layers' (Transformer Engine's default schedule offloads the first
    num_layers layers)."""
    return sum(sets[:offload])


def resident_bytes(sets: Sequence[float], offload: int) -> float:
    """One microbatch's saved activations on the device under offloading: at most
    layers − `offload` layers' sets at once (Transformer Engine's default schedule,
    docs cpu_offloading.rst @d0067d0d: "At most (model_layers - num_layers) sets of
    activations are on GPU at any time"), taken as the largest so many."""
    return sum(sorted(sets, reverse=True)[: len(sets) - offload])
