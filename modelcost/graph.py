"""The data between lowering and costing: workloads, op-graph nodes, layer groups."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from .perfmodel import OpRecord


class Phase(StrEnum):
    prefill = "prefill"
    decode = "decode"
    train = "train"


@dataclass(frozen=True, slots=True)
class Workload:
    """What runs: prefill(batch, seq), decode(batch, context) or train(batch, seq).

    Decode produces one new token per sequence, attending to `context` cached positions.
    Prefill computes logits for every token (`all`) or only each sequence's last one.
    """

    phase: Phase
    batch: int
    seq: int = 1
    context: int = 0
    logits: Literal["all", "last"] = "all"

    @property
    def tokens(self) -> int:
        """Tokens through every layer in one step."""
        return self.batch if self.phase is Phase.decode else self.batch * self.seq


@dataclass(frozen=True, slots=True)
class Node:
    """One op of the graph, standing for `count` identical instances.

    `name` is hierarchical and stable (`layers.3.attn.q_proj`; a node of a repeated
    group is named after the group's first layer). `inputs` name the nodes whose output
    tensors it reads. `weight_bytes` is what the op reads of parameters; `out_bytes` the
    size of the tensor it produces.
    """

    name: str
    group: str
    count: int
    op: OpRecord
    inputs: tuple[str, ...] = ()
    weight_bytes: float = 0
    out_bytes: float = 0


@dataclass(frozen=True, slots=True)
class Group:
    """A layer group: `count` identical layers (or the model-level ops, count 1)."""

    name: str
    block: str
    layers: tuple[int, ...]
    count: int

    @property
    def layer_label(self) -> str:
        """`0-79`, `0, 2, …, 40`, `3` — or empty for model-level groups."""
        ls = self.layers
        if not ls:
            return ""
        if len(ls) == 1:
            return str(ls[0])
        step = ls[1] - ls[0]
        if step == 1:
            return f"{ls[0]}-{ls[-1]}"
        if len(ls) == 2:
            return f"{ls[0]}, {ls[1]}"
        return f"{ls[0]}, {ls[1]}, …, {ls[-1]}"


@dataclass(frozen=True, slots=True)
class OpGraph:
    model: str
    workload: Workload
    nodes: tuple[Node, ...]
    groups: tuple[Group, ...]
    notes: tuple[str, ...] = ()
