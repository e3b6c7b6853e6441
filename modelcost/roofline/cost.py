"""Stage 4, cost: FLOPs and bytes of every node of an op graph, forward and backward."""

from __future__ import annotations

from modelcost.base.record import Record
from modelcost.ir.graph import Node, OpGraph
from modelcost.perfmodel import Conventions, Cost, OpRecord


class CostedNode(Record, frozen=True):
    """A node with its per-instance costs; `bwd` only when training."""

    node: Node
    fwd: Cost
    bwd: Cost | None
    recomputed: bool = False  # `bwd` includes a second forward (full recomputation)


class CostedGraph(Record, frozen=True):
    graph: OpGraph
    conventions: Conventions
    nodes: tuple[CostedNode, ...]


# An op's cost is a pure function of the op record and the conventions: equal ops (every
# layer's norms; a sweep's points sharing a batch) are costed once, in a table cleared
# when it holds MAX_MEMO entries (bounded memory in a long sweep)
MAX_MEMO = 65_536
_FORWARD: dict[tuple[OpRecord, Conventions], Cost] = {}
_BACKWARD: dict[tuple[OpRecord, Conventions], Cost] = {}


def _memo(table: dict, key: tuple[OpRecord, Conventions], backward: bool) -> Cost:
    found = table.get(key)
    if found is None:
        if len(table) >= MAX_MEMO:
            table.clear()
        op, conventions = key
        found = table[key] = op.cost_bwd(conventions) if backward else op.cost(conventions)
    return found


def cost_node(
    n: Node, conventions: Conventions, train: bool, again: bool, memo: bool = True
) -> CostedNode:
    """One node's per-instance costs: its forward, and when training its backward (with
    the forward again under full recomputation, `again`, for a layer's ops); looked up
    in the tables of equal ops' costs unless `memo` is off (a sweep's op that is a
    function of its length: grid.py)."""
    key = (n.op, conventions)
    if memo:
        fwd = _memo(_FORWARD, key, False)
        bwd = _memo(_BACKWARD, key, True) if train and not n.step else None
    else:
        fwd = n.op.cost(conventions)
        bwd = n.op.cost_bwd(conventions) if train and not n.step else None
    recomputed = False
    if bwd is not None and again and n.group != "model":
        bwd, recomputed = bwd + fwd, True
    return CostedNode(n, fwd, bwd, recomputed)


def cost(graph: OpGraph, conventions: Conventions = Conventions.modelcost) -> CostedGraph:
    """Cost every node once; repeated layers carry their count, not copies."""
    train = graph.shape.train
    # full recomputation runs each layer's forward again inside its backward
    again = graph.shape.par.recompute == "full"
    nodes = tuple(cost_node(n, conventions, train, again) for n in graph.nodes)
    return CostedGraph(graph, conventions, nodes)
