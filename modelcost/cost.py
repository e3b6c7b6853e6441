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


class CostedGraph(Record, frozen=True):
    graph: OpGraph
    conventions: Conventions
    nodes: tuple[CostedNode, ...]


def cost(graph: OpGraph, conventions: Conventions = Conventions.modelcost) -> CostedGraph:
    """Cost every node once; repeated layers carry their count, not copies."""
    train = graph.shape.train
    nodes = tuple(
        CostedNode(
            n,
            n.op.cost(conventions),
            n.op.cost_bwd(conventions) if train and not n.step else None,
        )
        for n in graph.nodes
    )
    return CostedGraph(graph, conventions, nodes)
