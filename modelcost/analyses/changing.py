"""A changing op's column at every length a sweep asks for (grid.py): its cost and
roofline computed once with the length a variable and evaluated at all the lengths at
once, as numpy arrays of Python numbers; where that cannot be done, or its figures
differ from a length's own, each length costed and timed on its own.
"""

from __future__ import annotations

from typing import Any

from modelcost.base.symbolic import SKEW, Watch, instantiator, length, skewed, watching
from modelcost.estimate.costing import Costing
from modelcost.ir.graph import Node
from modelcost.roofline.cost import cost_node
from modelcost.roofline.step import Column, column
from modelcost.roofline.timing import NodeTime, node_time, op_passes, op_times, timed
from modelcost.targets.hardware import Hardware

from .arrays import each_point, lane, same_numbers, spread

MAX_SIDES = 3  # costings of one changing node as a function of the length (a decision,
# as compute- against memory-bound, splits its lengths: each side takes one)
_FIELDS = ("seconds", "flops", "bytes", "compute_bound_s", "recomputed_flops", "held")


def node_timed(n: Node, hw: Hardware, how: Costing, train: bool, again: bool) -> NodeTime:
    """A node costed and timed as compile does (the tables of equal ops' costs and
    times: `cost_node`, `op_times`)."""
    costed = cost_node(n, how.conventions, train, again)
    return node_time(costed, hw, how.peak, how.bandwidth, op_times(hw, how.peak, how.bandwidth))


def changing_column(f: Any, lengths: list[int], hw: Hardware, how: Costing, train: bool,
                    again: bool) -> Column:  # fmt: skip
    """The column of the node `f` rebuilds at a length (symbolic.instantiator), at each
    of `lengths`: from its cost and roofline as functions of the length where the
    decisions they make on it come out alike (a side: up to MAX_SIDES of them) and
    they give each checked length (`spread`) its own figures bit for bit; at each
    length on its own where not."""
    values: list[Any] = [None] * len(lengths)  # each length's figures (_FIELDS)
    todo = list(range(len(lengths)))
    template: Column | None = None
    for _ in range(MAX_SIDES):
        side = _side(f, lengths, todo, hw, how, train, again) if todo else None
        if side is None:
            break
        col, served = side
        for i, v in served.items():
            values[i] = v
        template = template or col
        todo = [i for i in todo if values[i] is None]
    for i in todo:  # each on its own
        got = column(node_timed(f(lengths[i]), hw, how, train, again))
        template = template or got
        values[i] = _figures(got)
    seconds, flops, nbytes, bound, recomputed, held = (
        lane(v) if v[0] is not None else None for v in zip(*values, strict=True)
    )
    assert template is not None  # the lengths are two or more: one of them made it
    return Column(seconds, flops, nbytes, bound, recomputed, template.step, template.network,
                  template.beside, held)  # fmt: skip


def _side(f: Any, lengths: list[int], todo: list[int], hw: Hardware, how: Costing,
          train: bool, again: bool) -> tuple[Column, dict[int, tuple]] | None:  # fmt: skip
    """One costing as a function of the length, made at the first of `todo`: its column
    and the figures it gives the lengths of `todo` it serves; None where it serves
    none, or a checked length's own figures differ (a read of the length unseen)."""
    import numpy as np

    made = _symbolic_column(f, lengths[todo[0]], hw, how, train, again)
    if made is None:
        return None
    col, watch = made
    try:
        held = watch.holding(np.array([lengths[i] for i in todo], dtype=object)).tolist()
        covered = [i for i, ok in zip(todo, held, strict=True) if ok]
        at = np.array([lengths[i] for i in covered], dtype=object)
        found = dict(zip(covered, zip(*(each_point(_evaluate(getattr(col, name), at),
                                                   len(covered)) for name in _FIELDS),
                                      strict=True), strict=True))  # fmt: skip
    except Exception:  # evaluating the functions failed: each length on its own
        return None
    for i in spread(covered, lengths.__getitem__) if covered else ():
        own = _figures(column(node_timed(f(lengths[i]), hw, how, train, again)))
        if not same_numbers(found[i], own):
            return None
    return (col, found) if covered else None


def _figures(c: Column) -> tuple:
    """A column's figures that change with the length (_FIELDS), in order."""
    return tuple(getattr(c, name) for name in _FIELDS)


def _symbolic_column(f: Any, x0: int, hw: Hardware, how: Costing, train: bool,
                     again: bool) -> tuple[Column, Watch] | None:  # fmt: skip
    """A changing node's column with the length a variable worth `x0`, and the
    decisions its cost and roofline made on it; None where the length's value escaped
    (a hash, a float(): not a function of it) or costing failed on the variable."""
    try:
        with skewed(SKEW), watching() as watch:
            costed = cost_node(f(length(x0)), how.conventions, train, again, memo=False)
            passes = op_passes(costed.node.op, costed.fwd, costed.bwd, hw, how.peak,
                               how.bandwidth)  # fmt: skip
            col = column(timed(costed, passes, _as_float))
    except Exception:  # any failure here leaves the node to the exact path
        return None
    return None if watch.escaped else (col, watch)


def _as_float(v: Any) -> Any:
    """float(v), as arithmetic (an int times 1.0 is the int made a float, as float()
    makes it), so a function of the length stays one."""
    return v * 1.0


def _evaluate(value: Any, xs: Any) -> Any:
    """A column's figure at the lengths `xs`: its function of the length evaluated on
    them, or the figure itself where it does not depend on the length."""
    fn = instantiator(value)
    return value if fn is None else fn(xs)
