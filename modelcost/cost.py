"""Stage 4, cost: FLOPs and bytes of every node of an op graph, forward and backward."""

from __future__ import annotations

from dataclasses import dataclass

from .graph import Node, OpGraph
from .perfmodel import AdamStepOp, Conventions, Cost


@dataclass(frozen=True, slots=True)
class CostedNode:
    """A node with its per-instance costs; `bwd` only when training."""

    node: Node
    fwd: Cost
    bwd: Cost | None


@dataclass(frozen=True, slots=True)
class CostedGraph:
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
            n.op.cost_bwd(conventions) if train and not isinstance(n.op, AdamStepOp) else None,
        )
        for n in graph.nodes
    )
    return CostedGraph(graph, conventions, nodes)
