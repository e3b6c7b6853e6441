"""Stage 4, cost: FLOPs and bytes of every node of an op graph, forward and backward."""

from __future__ import annotations

from .graph import Node, OpGraph
from .perfmodel import Conventions, Cost
from .record import Record


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


def cost(graph: OpGraph, conventions: Conventions = Conventions.modelcost) -> CostedGraph:
    """Cost every node once; repeated layers carry their count, not copies."""
    train = graph.shape.train
    # full recomputation runs each layer's forward again inside its backward
    again = graph.shape.par.recompute == "full"
    nodes = []
    seen: dict[object, Cost] = {}  # equal ops (every layer's norms) are costed once
    for n in graph.nodes:
        op = n.op
        fwd = seen.get(op)
        if fwd is None:
            fwd = seen[op] = op.cost(conventions)
        bwd = op.cost_bwd(conventions) if train and not n.step else None
        recomputed = False
        if bwd is not None and again and n.group != "model":
            bwd, recomputed = bwd + fwd, True
        nodes.append(CostedNode(n, fwd, bwd, recomputed))
    return CostedGraph(graph, conventions, tuple(nodes))
