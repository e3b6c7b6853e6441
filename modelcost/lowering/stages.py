"""The pipeline-stage plan: a spec's top level split into model-level ops, other
streams and layer groups (a repeat of block calls interleaving its groups), each with
its layer indices, and what this device's pipeline stage runs and holds. It depends on
the spec and the layout alone, so it is computed once per spec (memo.per_object)."""

from __future__ import annotations

from collections import Counter

import modelcost.language.spec as ir
from modelcost.base.errors import SpecError
from modelcost.base.memo import per_object
from modelcost.base.record import Record
from modelcost.language.spec import walk

from .memory import Held


class Stack(Record, frozen=True):
    """One layer group of the top level: `count` layers of `body`, the group's layers
    interleaving with its siblings' (stride k for a repeat of k block calls)."""

    block: str
    count: int
    stride: int
    offset: int
    body: tuple[ir.Statement, ...]


def _layer_plan(body: tuple[ir.Statement, ...]) -> list[ir.Op | ir.Stream | Stack]:
    """Split the top level into model-level ops, other streams and layer groups."""
    plan: list[ir.Op | ir.Stream | Stack] = []
    for node in body:
        if isinstance(node, ir.Repeat):
            blocks = [b for b in node.body if isinstance(b, ir.Block)]
            if len(blocks) == len(node.body):
                k = len(blocks)
                plan.extend(Stack(b.name, node.count, k, j, b.body) for j, b in enumerate(blocks))
            else:
                plan.append(Stack("layer", node.count, 1, 0, node.body))
        elif isinstance(node, ir.Block):
            plan.append(Stack(node.name, 1, 1, 0, node.body))
        else:
            plan.append(node)
    return plan


def _placed(
    plan: list[ir.Op | ir.Stream | Stack],
) -> list[tuple[ir.Op | ir.Stream | Stack, tuple[int, ...]]]:
    """Each plan item with its layer indices: a stack's layers, or for a model-level op
    the index of the next layer (so an op before the layers sorts before them)."""
    placed: list[tuple[ir.Op | ir.Stream | Stack, tuple[int, ...]]] = []
    layer = pending_end = 0
    for item in plan:
        if not isinstance(item, Stack):
            placed.append((item, (max(layer, pending_end),)))
            continue
        first = layer + item.offset
        placed.append((item, tuple(first + i * item.stride for i in range(item.count))))
        pending_end = max(pending_end, first + (item.count - 1) * item.stride + 1)
        if item.offset == item.stride - 1:
            layer = pending_end
    return placed


def _last_stage(
    spec: ir.Spec, plan, pp: int, vpp: int = 1
) -> tuple[range | frozenset[int], int, str]:
    """(the layers of the last pipeline stage, the model's layer count, a note on how
    they split). Without virtual stages, the last ceil(L/pp) layers (the report is this
    device's: it holds the head, the slowest stage when stages are even). With vpp
    virtual stages (Megatron-LM's interleaved schedule), chunk j of L/(pp·vpp) layers
    sits on stage j mod pp: the last stage holds chunks pp − 1, 2·pp − 1, … (the last
    with the head). Where L does not split into pp·vpp equal chunks but L + 2 does, the
    embedding and the loss count as a layer each, as Megatron-Core splits them with
    `account_for_embedding_in_pipeline_split` and `account_for_loss_in_pipeline_split`
    (Llama 3.1 405B's 126 + 2 = 128 layers in 64 chunks of 2, Megatron-Bridge's recipe):
    the first and last chunks hold one layer fewer. Otherwise Megatron-LM refuses the
    split, and so does modelcost."""
    layers = sum(len(ls) for item, ls in plan if isinstance(item, Stack))
    if pp > max(layers, 1):
        raise SpecError(
            f"--pp {pp} is more pipeline stages than the {layers} layers of `{spec.name}`",
            filename="modelcost",
            hint=f"use at most {layers} stages",
        )
    if vpp > 1:
        chunks = pp * vpp
        counted = layers if layers % chunks == 0 else layers + 2
        if not splits(layers, pp, vpp):
            raise SpecError(
                f"--pp {pp} --vpp {vpp}: the {layers} layers of `{spec.name}` do not split "
                f"into {chunks} equal chunks (Megatron-LM's interleaved schedule needs them)",
                filename="modelcost",
                hint="use --pp and --vpp whose product divides the layers (or the layers "
                "and two, the embedding and the loss counted as Megatron-Core can)",
            )
        size = counted // chunks
        skew = 1 if counted > layers else 0  # the embedding's place in the first chunk

        def chunk(j: int) -> range:
            return range(max(j * size - skew, 0), min((j + 1) * size - skew, layers))

        held = frozenset(i for j in range(pp - 1, chunks, pp) for i in chunk(j))
        note = (
            f"the {layers} layers and the embedding and the loss, a layer each, split into "
            f"{chunks} chunks of {size}, as Megatron-Core's account_for_embedding_in_"
            "pipeline_split and account_for_loss_in_pipeline_split split them: the first "
            f"and last chunks hold {size - 1} layer{'s' if size != 2 else ''}"
            if skew
            else ""
        )
        return held, layers, note
    size = -(-layers // pp)
    last = range(layers - size, layers) if pp > 1 else range(0, max(layers, 1))
    return last, layers, ""


@per_object
def layer_count(spec: ir.Spec) -> int:
    """The layers a pipeline splits: every layer group's, as `_last_stage` counts them."""
    return sum(len(ls) for item, ls in _placed(_layer_plan(spec.body)) if isinstance(item, Stack))


def splits(layers: int, pp: int, vpp: int) -> bool:
    """Whether `layers` split into pp·vpp interleaved chunks as `_last_stage` splits
    them: evenly, or with the embedding and the loss counted as a layer each."""
    chunks = pp * vpp
    return layers % chunks == 0 or (layers + 2) % chunks == 0


class Stage(Record, frozen=True):
    """What this device's pipeline stage runs: each model-level op or layer group it
    holds, with its layers here and its ops (with multiplicities), and everything it
    holds, for its memory. The same for every batch and context."""

    items: tuple[tuple[ir.Op | Stack, tuple[int, ...], tuple[tuple[ir.Op, int], ...]], ...]
    held: Held
    model_scopes: Counter  # every model-level op's scope, on any stage: names stay stable
    note: str = ""  # how the layers split over the stages, where it is not evenly


@per_object
def stage(spec: ir.Spec, pp: int, train: bool, vpp: int = 1) -> Stage:
    plan = _placed(_layer_plan(spec.body))
    stage, total, note = _last_stage(spec, plan, pp, vpp)

    def elsewhere(at: int) -> bool:
        """A model-level op or stream placed before layer `at` runs on the stage holding
        that layer (the first stage's when it precedes them all); after the last layer,
        on the last stage."""
        return at not in stage and at < total

    items: list = []
    held: list[tuple[ir.Op, int]] = []
    for item, layers in plan:
        if isinstance(item, ir.Stream):  # an auxiliary module is loaded to train it
            if (layers and elsewhere(layers[0])) or (item.auxiliary and not train):
                continue
            items.append((item, layers, ()))
            held.extend(walk(item.body))
            continue
        if not isinstance(item, Stack):
            if layers and elsewhere(layers[0]):  # before the layers: the first stage's
                continue
            items.append((item, layers, ((item, 1),)))
            held.append((item, 1))
            continue
        layers = tuple(i for i in layers if i in stage)
        if layers:
            ops = tuple(walk(item.body))
            items.append((item, layers, ops))
            held.extend((op, times * len(layers)) for op, times in ops)
    scopes = Counter(item.scope for item, _ in plan if not isinstance(item, Stack | ir.Stream))
    return Stage(tuple(items), Held(tuple(held)), scopes, note)


@per_object
def stream_items(stream: ir.Stream) -> tuple:
    """A stream's model-level ops and layer groups, as a stage's items (one stage)."""
    items: list = []
    for item, layers in _placed(_layer_plan(stream.body)):
        ops = tuple(walk(item.body)) if isinstance(item, Stack) else ((item, 1),)
        items.append((item, layers, ops))
    return tuple(items)
