"""What one device holds at once: the model's memory as lowering sized it, and the
activations alive, at inference the largest op's inputs and output, in training what the
backward keeps for the microbatches in flight on the stage that holds the most.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from modelcost.ir.graph import RECEIVED, ModelFacts, OpGraph
from modelcost.lowering.memory import kept_activations, layer_sets, resident_bytes
from modelcost.perfmodel import bpe
from modelcost.targets.hardware import Hardware


def fits(graph: OpGraph, hw: Hardware) -> bool:
    """Whether one device of the graph's layout holds everything the footprint counts."""
    return sum(footprint(graph).values()) <= hw.capacity


def footprint(graph: OpGraph) -> dict[str, float]:
    """Memory by kind: the model's (sized by lowering) and the activations the graph
    keeps alive; docs/report.md says what each counts."""
    return memory_parts(graph.facts, activation_bytes(graph))


def memory_parts(
    facts: ModelFacts, activations: Any, real: Callable[[Any], Any] = float
) -> dict[str, Any]:
    """The footprint's parts: the model's facts, and the activations kept alive, each
    made `real` (a float; a sweep's points: an array of floats, grid.py)."""
    return {
        "weights": real(facts.weight_bytes),
        "kv_cache": real(facts.cache_bytes),
        "activations": real(activations),
        "gradients": real(facts.gradient_bytes),
        "optimizer_states": real(facts.optimizer_bytes),
    }


def activation_bytes(graph: OpGraph) -> float:
    """The activations alive at once: what training's backward keeps
    (`_training_activations`), or at inference the largest op's inputs and output."""
    if graph.shape.train:
        return _training_activations(graph)
    produced = {n.name: n.out_bytes for n in graph.nodes}
    activations = 0.0
    for n in graph.nodes:
        inputs = 0.0
        for i in set(n.inputs) if len(n.inputs) > 1 else n.inputs:
            inputs += produced.get(i, 0)
        alive = n.out_bytes + inputs
        if alive > activations:
            activations = alive
    return activations


def kept_for_backward(graph: OpGraph) -> dict[str, float]:
    """The bytes of the tensors the backward reads, by layer group, for every
    microbatch of the step (memory.kept_activations says which)."""
    return kept_activations(graph.nodes)


def _training_activations(graph: OpGraph) -> float:
    """What the backward needs kept (`kept_for_backward`), or under full recomputation
    each layer's input plus one layer's outputs, rebuilt during its backward
    (Korthikanti et al. 2022: 2·s·b·h per layer in 16-bit; 1/tp under sequence
    parallelism), of the microbatches in flight on the pipeline stage that holds the
    most: the first (`microbatches_in_flight`: it runs the most forwards before its
    first backward) or the last, which holds the head and its logits. The first stage is
    taken to hold as many layers as this (the last) stage, keeping what its layers keep
    on average, and one received residual a chunk as the last does (the embedding's
    output on its first chunk); its weights are in `model_facts`'s figures."""
    shape, facts = graph.shape, graph.facts
    par = shape.par
    m = par.microbatches
    last = microbatches_in_flight(m, par.pp, par.vpp, par.pp - 1)
    first = microbatches_in_flight(m, par.pp, par.vpp)
    kept = kept_for_backward(graph)
    model_level = kept.pop("model", 0.0) / m  # a microbatch's, as each below
    inputs = sum(n.out_bytes * n.count for n in graph.nodes if n.name == RECEIVED) / m
    if par.recompute != "full":
        stage = sum(kept.values()) / m  # the stage's layers, a microbatch
        if par.offload:  # the layers' sets a device holds while the rest are on the host
            stage = resident_bytes(layer_sets(graph.nodes, graph.groups, m), par.offload)
        return max((stage + model_level) * last, (stage + inputs) * first)
    counts = {g.name: g.count for g in graph.groups}
    layers = sum(counts[g] for g in kept)
    stream = layers * shape.T_seq * facts.width * float(bpe(facts.activations))
    one_layer = max((t / m / counts[g] for g, t in kept.items()), default=0.0)
    return max((stream + model_level) * last, (stream + inputs) * first) + one_layer


def microbatches_in_flight(m: int, pp: int, vpp: int, stage: int = 0) -> float:
    """The microbatches' activations pipeline `stage` (0 the first) holds at its peak,
    in microbatches of the whole stage. 1F1B (Megatron-LM's
    forward_backward_pipelining_without_interleaving): pp − stage − 1 warm-up forwards
    and one more before its first backward, min(m, pp − stage). Interleaved (vpp > 1,
    forward_backward_pipelining_with_interleaving): 2·(pp − stage − 1) + (vpp − 1)·pp
    warm-up chunk forwards and one more, at most all m·vpp of them (every forward first
    when m = pp), a chunk 1/vpp of the stage's layers: on the first stage
    min(m·vpp, vpp·pp + pp − 1)/vpp, pp + (pp − 1)/vpp once m > pp."""
    if vpp == 1:
        return min(m, pp - stage)
    if m == pp:  # Megatron-LM runs all warm-up forwards then
        return m
    return min(m * vpp, 2 * (pp - stage - 1) + (vpp - 1) * pp + 1) / vpp
