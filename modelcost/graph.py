"""The data between lowering and costing: workloads, op-graph nodes, layer groups."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from .dtypes import DType
from .perfmodel import OpRecord
from .record import Record, force_setattr


class Phase(StrEnum):
    prefill = "prefill"
    decode = "decode"
    train = "train"


DEFAULT_BATCH = 1
DEFAULT_SEQ = 2048  # prefill/train queries per sequence, when not given
DEFAULT_CONTEXT = 2048  # decode cached positions per sequence, when not given
DEFAULT_LOGITS: Literal["all", "last"] = "all"


class Workload(Record, frozen=True):
    """What runs: prefill(batch, seq), decode(batch, context) or train(batch, seq).

    Decode produces one new token per sequence, attending to `context` cached positions.
    Prefill computes logits for every token (`all`) or only each sequence's last one.
    `seq` and `context` left as None take DEFAULT_SEQ and DEFAULT_CONTEXT (the CLI's
    defaults too), or the length a model fixes itself (a vision model's patch count).
    `phase` may be given as its name (`Workload("decode", 8)`).
    """

    phase: Phase
    batch: int = DEFAULT_BATCH
    seq: int | None = None
    context: int | None = None
    logits: Literal["all", "last"] = DEFAULT_LOGITS

    def __post_init__(self) -> None:
        if not isinstance(self.phase, Phase):
            try:
                force_setattr(self, "phase", Phase(self.phase))  # normalizing, in __init__
            except ValueError:
                raise ValueError(
                    f"unknown phase {self.phase!r}; choose from {', '.join(Phase)}"
                ) from None
        if self.logits not in ("all", "last"):
            raise ValueError(f"logits must be 'all' or 'last', got {self.logits!r}")
        for name in ("batch", "seq", "context"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value <= 0):
                raise ValueError(f"{name} must be a positive integer, got {value!r}")


class Shape(Record, frozen=True):
    """The token geometry lowering settled on for a workload: the one place that says
    how many tokens a step processes, how many queries and keys each sequence has,
    whether a cache is read and a backward pass runs, and how the step is labelled.

    `B` sequences, `S` queries each, attending `n_kv` keys; `logits_all`: logits for
    every position (else each sequence's last)."""

    phase: Phase
    B: int
    S: int
    n_kv: int
    logits_all: bool

    @property
    def T(self) -> int:
        """Tokens through every layer in one step."""
        return self.B * self.S

    @property
    def decode(self) -> bool:
        """One new query per sequence over a cache that is read, not written in full."""
        return self.phase is Phase.decode

    @property
    def train(self) -> bool:
        """A backward pass, a loss and an optimizer step follow the forward."""
        return self.phase is Phase.train

    @property
    def label(self) -> str:
        """`context 2048` for decode, `seq 197` otherwise."""
        return f"context {self.n_kv}" if self.decode else f"seq {self.S}"


class Node(Record, frozen=True):
    """One op of the graph, standing for `count` identical instances.

    `name` is hierarchical and stable (`layers.3.attn.q_proj`; a node of a repeated
    group is named after the group's first layer). `inputs` name the nodes whose output
    tensors it reads; `out_bytes` is the size of the tensor it produces.
    """

    name: str
    group: str
    count: int
    op: OpRecord
    inputs: tuple[str, ...] = ()
    out_bytes: float = 0


class Group(Record, frozen=True):
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


class ModelFacts(Record, frozen=True):
    """What reporting needs of the spec, computed once by lowering (memory.model_facts):
    after lowering only the graph travels on."""

    name: str
    title: str
    params_total: int
    params_active: int
    activations: DType  # the model's activation dtype: the precision of the MFU and knee
    weight_bytes: float
    cache_bytes: float  # KV cache and SSM state of the workload's sequences (inference)
    gradient_bytes: float  # training
    optimizer_bytes: float  # training: AdamW states and master weights


class OpGraph(Record, frozen=True):
    """A lowered workload: its nodes and layer groups, the token geometry, the facts of
    the model it came from, and notes for the reader."""

    facts: ModelFacts
    workload: Workload
    shape: Shape
    nodes: tuple[Node, ...]
    groups: tuple[Group, ...]
    notes: tuple[str, ...] = ()
