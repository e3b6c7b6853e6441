"""What a layer kind's room holds: its lowering, its parameters, its memory, its
sharding rule and its refusals, each said explicitly (a `Room` has no defaults: a kind
with nothing to say passes `NO_PARAMS`, `NOTHING_KEPT`, `REPLICATED`, `REFUSES_NOTHING`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import modelcost.language.spec as ir
from modelcost.base.dtypes import DType
from modelcost.base.errors import SpecError

if TYPE_CHECKING:
    from modelcost.ir.graph import Parallel

    from .emit import Emit, Lowerer

SSM_STATE = DType.fp32  # a recurrent layer's state (Mamba-2's, a Gated DeltaNet's)


class Component(StrEnum):
    """What a parameter belongs to, for the counts by kind."""

    embedding = "embedding"
    attention = "attention"
    mlp = "mlp"
    experts = "experts"
    ssm = "ssm"
    norms = "norms"
    head = "head"


class Feature(StrEnum):
    """A workload feature a layer kind may not be modelled for."""

    chunk = "chunk"  # a decode step's prefill chunk (--chunk)
    prefix = "prefix"  # a prefix cache before a prefill (--prefix)
    cp = "cp"  # context parallelism (--cp)
    queries = "queries"  # several new tokens per sequence in a decode step (a verify)


@dataclass(frozen=True)
class Refusal:
    """A feature the kind refuses, and why (said in the error)."""

    feature: Feature
    why: str


@dataclass(frozen=True)
class Memory:
    """What one layer op keeps across decode steps on one of `tp` tensor-parallel ranks:
    `per_token` elements of KV cache per token it keeps, `per_sequence` bytes of
    recurrent state (and conv window), and `tokens`, how many of a sequence's `length`
    tokens (or of its source stream's, `sources`) it keeps."""

    per_token: Callable[[Any, int], int]
    per_sequence: Callable[[Any, int], float]
    tokens: Callable[[Any, int, dict[str, int]], int]


def _every_token(op: Any, length: int, sources: dict[str, int]) -> int:
    return length


NOTHING_KEPT = Memory(lambda op, tp: 0, lambda op, tp: 0.0, _every_token)


def kv_cache(per_token: Callable[[Any, int], int], tokens=_every_token) -> Memory:
    """A KV cache of `per_token` elements per token kept (no recurrent state)."""
    return Memory(per_token, lambda op, tp: 0.0, tokens)


def recurrent_state(per_sequence: Callable[[Any, int], float]) -> Memory:
    """A recurrent state of `per_sequence` bytes per sequence (no KV cache)."""
    return Memory(lambda op, tp: 0, per_sequence, _every_token)


Params = Callable[[Any, int, int], tuple[int, int]]
Sharding = Callable[[Any, "Parallel", str], SpecError | None]


def NO_PARAMS(op: Any, tp: int, ep: int) -> tuple[int, int]:
    """A weightless kind: no parameters."""
    return 0, 0


def REPLICATED(op: Any, par: Parallel, where: str) -> SpecError | None:
    """A kind every rank runs whole (or splits by a rule any layout meets): no layout
    refused."""
    return None


def EVERY_PARAM(op: Any, dense: int, experts: int) -> int:
    """A kind whose every parameter each token touches (all but routed experts)."""
    return dense + experts


REFUSES_NOTHING: tuple[Refusal, ...] = ()


@dataclass(frozen=True)
class Room:
    """A layer kind in one place.

    - `kind`: its Spec IR class (spec.py declares its statement and arguments);
    - `lower(lw, e, op, name)`: emits its perf-model ops through the lowerer `lw` into
      `e`, leaving `e.stream` on the node that carries the residual stream on;
    - `params(op, tp, ep)`: its (dense, expert) parameters on one device of `tp`
      tensor- and `ep` expert-parallel ranks; `active(op, dense, experts)`: those one
      token touches (of one device's); `component`: what they count as;
    - `memory`: what it keeps across decode steps;
    - `sharding(op, par, where)`: the error for a layout it cannot be split by (`where`
      names the layer), else None;
    - `refuses`: the workload features it is not modelled for.
    """

    kind: type[ir.IR]
    lower: Callable[[Lowerer, Emit, Any, str], None]
    params: Params
    active: Callable[[Any, int, int], int]
    component: Component
    memory: Memory
    sharding: Sharding
    refuses: tuple[Refusal, ...]

    def refusal(self, feature: Feature) -> Refusal | None:
        return next((r for r in self.refuses if r.feature is feature), None)


def plain_room(
    kind: type[ir.IR],
    lower: Callable[[Lowerer, Emit, Any, str], None],
    params: Params,
    component: Component,
) -> Room:
    """A kind that keeps nothing between steps, runs on every layout (replicated, or
    split in its own params and lowering) and refuses nothing: norms, residuals, token
    reshapes, embeddings, heads and projections."""
    return Room(
        kind=kind,
        lower=lower,
        params=params,
        active=EVERY_PARAM,
        component=component,
        memory=NOTHING_KEPT,
        sharding=REPLICATED,
        refuses=REFUSES_NOTHING,
    )


def recurrent_room(
    kind: type[ir.IR],
    lower: Callable[[Lowerer, Emit, Any, str], None],
    params: Params,
    state_bytes: Callable[[Any, int], float],
    sharding: Sharding,
    carrier: str,
    scan: str,
) -> Room:
    """A recurrent layer (Mamba-2, Gated DeltaNet): every parameter touched, counted as
    an SSM's, a state of `state_bytes` per sequence kept instead of a KV cache. Its
    `carrier` ("an SSM") carries that state through a prefill chunk or a prefix, and its
    `scan` runs along the whole sequence: neither is costed as attention's, so it refuses
    --chunk, --prefix and --cp, and a decode step of several new tokens per sequence (a
    speculative verify, stepping its state k + 1 times), the reasons naming them."""
    return Room(
        kind=kind,
        lower=lower,
        params=params,
        active=EVERY_PARAM,
        component=Component.ssm,
        memory=recurrent_state(state_bytes),
        sharding=sharding,
        refuses=(
            Refusal(Feature.chunk, f"{carrier} carries its state through a chunk"),
            Refusal(Feature.prefix, f"{carrier} carries its state through a prefix"),
            Refusal(Feature.cp, scan),
            Refusal(Feature.queries, f"{carrier} steps its state one token at a time"),
        ),
    )


def linear(n_in: int, n_out: int, bias: bool) -> int:
    """A linear layer's parameters."""
    return n_in * n_out + (n_out if bias else 0)


def ffn(dim: int, d_ff: int, act: ir.Activation, bias: bool) -> int:
    """One MLP (or one expert): gated ones have gate and up projections, then down."""
    ups = 2 if act.gated else 1
    return ups * linear(dim, d_ff, bias) + linear(d_ff, dim, bias)
