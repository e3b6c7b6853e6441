"""Many lengths at once: one layout and batch of a spec on a target, at every context (or
sequence length) a sweep asks for, lowered once.

The workload is lowered with its length as a variable (symbolic.py), so the op records
that depend on it are functions of it and the others are the same at every length. Each
point's changing ops are rebuilt at its length, costed and timed (the same tables as
`compile_totals`: an equal op is costed and timed once); the ops that do not change are
costed and timed once for all the points. The step's sums (roofline.step_sums) are
taken over lanes of the lengths (`Lanes`: a value per length, added element by element),
in node order, with the same operations on the same Python numbers as one point's;
each point's totals are then assembled as `compile_totals` assembles them.
So a point's totals are the very ones `compile_totals` gives, at a fraction of the work.

A comparison the lowering makes on the length is a guard (symbolic.watching): the
lowering serves the lengths where its guards come out alike, and the first other length
takes a lowering of its own (a sliding window: two). Where the length's value escapes
(a hash, a name that shows it), the lowering refuses the first length, or the rebuilt
ops differ from real lowerings (run skewed, symbolic.skewed, so that a read C code makes
unseen shows at the first length), `at_lengths` says so (None) and the caller computes
each point on its own.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from itertools import repeat
from typing import Any

import modelcost.language.spec as ir
from modelcost.base.errors import SpecError
from modelcost.base.record import replace
from modelcost.base.symbolic import Watch, instantiator, length, skewed, watching
from modelcost.estimate.costing import Costing
from modelcost.ir.graph import ModelFacts, Node, OpGraph, Shape, Workload, settled
from modelcost.ir.report import Totals
from modelcost.lowering.lower import lower
from modelcost.lowering.validate import workload_shape
from modelcost.roofline.compile import compile_totals
from modelcost.roofline.cost import cost_node
from modelcost.roofline.estimated import (
    NodeEstimate,
    collectives_engine,
    estimate_nodes,
    estimate_step,
    with_estimate_step,
)
from modelcost.roofline.footprint import activation_bytes, memory_parts
from modelcost.roofline.step import Column, Sums, assemble, column, matrix_peak, step_sums
from modelcost.roofline.timing import NodeTime, node_time, op_times
from modelcost.targets.hardware import Hardware

Point = tuple[Shape, Totals] | SpecError | ValueError  # a point's shape and totals, or why not


def length_field(w: Workload) -> str:
    """The workload's length that a sweep varies: decode's context, else the sequence."""
    return "context" if w.phase.value == "decode" else "seq"


MAX_TEMPLATES = 4  # lowerings one group's lengths may take (a sliding window: two)
SKEW = 1_000_003  # what a symbolic value's own number is off by (symbolic.skewed)


def at_lengths(
    spec: ir.Spec, hw: Hardware, base: Workload, lengths: Sequence[int], how: Costing
) -> list[Point] | None:
    """Each length's (shape, totals), or the error that refuses it, as `compile_totals`
    of `base` at that length gives them (its `length_field`); None when the lengths
    cannot share a lowering (the caller computes each on its own). Where a decision in
    the lowering splits them (`min(context, window)`), each side takes a lowering of its
    own, up to MAX_TEMPLATES; what is left is computed one by one. The batch is not such
    a variable: it changes every GEMM of the step, whose costs are computed anyway."""
    field = length_field(base)
    workloads: dict[int, Workload] = {}  # of the points with a shape
    found: dict[int, Point] = {}
    shapes: dict[int, Shape] = {}
    for i, n in enumerate(lengths):
        try:
            w = settled(replace(base, **{field: n}), how.conventions)
            shapes[i] = workload_shape(spec, w)[0]
            workloads[i] = w
        except (SpecError, ValueError) as err:  # as compile_totals refuses the point
            found[i] = err
    todo = list(workloads)
    if len(todo) < 2:
        return None
    for attempt in range(MAX_TEMPLATES):
        if len(todo) < 2:
            break
        part = _region(spec, hw, lengths, workloads, shapes, todo, field, how)
        if part is None:
            if attempt == 0:
                return None
            break
        found.update(part)
        todo = [i for i in todo if i not in part]
    for i in todo:  # the rest, each on its own
        try:
            graph, tot = compile_totals(spec, hw, workloads[i], how)
            found[i] = (graph.shape, tot)
        except (SpecError, ValueError) as err:
            found[i] = err
    return [found[i] for i in range(len(lengths))]


def _region(
    spec: ir.Spec,
    hw: Hardware,
    lengths: Sequence[int],
    workloads: dict[int, Workload],
    shapes: dict[int, Shape],
    todo: list[int],
    field: str,
    how: Costing,
) -> dict[int, tuple[Shape, Totals]] | None:
    """The points of `todo` that one lowering at the first of them serves (where its
    decisions come out alike), with their totals; None when it serves none."""
    template = _template(spec, workloads[todo[0]], field, lengths[todo[0]])
    if template is None:
        return None
    graph, shape_at, watch = template
    covered = [i for i in todo if watch.holds(lengths[i])]
    if not covered:  # the guards hold at the first length, where they were taken
        return None
    node_at = [instantiator(n) for n in graph.nodes]
    facts_at = instantiator(graph.facts)
    for i in covered:
        if (shape_at(lengths[i]) if shape_at else graph.shape) != shapes[i]:
            return None  # the shape is not the template's at this length
    # values that C code reads without asking (a float raised to the length's power, an
    # index) were read off by SKEW: a real lowering at the first length shows any that
    # matters there; a read that saturates (the experts hit) may agree at the first
    # length yet not at others: real lowerings at the longest, middle and shortest
    # lengths catch one that rises or falls with the length
    by_length = sorted(covered, key=lambda i: lengths[i])
    middle = by_length[len(by_length) // 2]
    for i in dict.fromkeys((covered[0], by_length[-1], middle, by_length[0])):
        try:
            checked = lower(spec, workloads[i])
        except (SpecError, ValueError):  # refused at a length the template served
            return None
        x = lengths[i]
        if (
            _nodes_at(graph.nodes, node_at, x) != checked.nodes
            or (facts_at(x) if facts_at else graph.facts) != checked.facts
        ):
            return None
    totals = _totals(graph, checked, node_at, facts_at, [lengths[i] for i in covered],
                     [shapes[i] for i in covered], [workloads[i] for i in covered], hw,
                     how)  # fmt: skip
    return dict(zip(covered, totals, strict=True))


def _template(spec: ir.Spec, w: Workload, field: str, x0: int) -> tuple[OpGraph, Any, Watch] | None:
    """The workload lowered with its length a variable worth `x0`, its shape's
    instantiator (None: the shape does not depend on the length) and the decisions the
    length made; None when its value escaped (no guard says where the lowering holds),
    or lowering refuses it or fails on the variable (a skewed number read by C code
    past a bound): the points are then computed one by one, each as compile does."""
    try:
        # each symbolic value's own number off by SKEW: a read of it that nothing sees
        # gives a wrong op at x0 itself, which the real lowering at x0 then shows
        with skewed(SKEW):
            symbolic = replace(w, **{field: length(x0)})
            shape, notes = workload_shape(spec, symbolic)  # its checks decide: redone
            with watching() as watch:
                graph = lower(spec, symbolic, (shape, notes))
    except Exception:  # any failure here leaves the points to the exact path
        return None
    if watch.escaped:
        return None
    return graph, instantiator(shape), watch


def _nodes_at(nodes: tuple[Node, ...], node_at: list, x: int) -> tuple[Node, ...]:
    return tuple(f(x) if f is not None else n for n, f in zip(nodes, node_at, strict=True))


def _totals(
    graph: OpGraph,
    checked: OpGraph,
    node_at: list,
    facts_at: Any,
    lengths: list[int],
    shapes: list[Shape],
    workloads: list[Workload],
    hw: Hardware,
    how: Costing,
) -> list[tuple[Shape, Totals]]:
    """Each length's totals: the fixed nodes costed and timed once, the changing ones
    at each length, the sums over arrays of the lengths."""
    conventions, peak, bandwidth = how.conventions, how.peak, how.bandwidth
    train, again = checked.shape.train, checked.shape.par.recompute == "full"
    table = op_times(hw, peak, bandwidth)
    fixed: dict[int, NodeTime] = {}
    changing: dict[int, list[NodeTime]] = {}
    for k, (n, f) in enumerate(zip(graph.nodes, node_at, strict=True)):
        if f is None:
            fixed[k] = node_time(cost_node(n, conventions, train, again), hw, peak, bandwidth,
                                 table)  # fmt: skip
        else:
            changing[k] = [node_time(cost_node(f(x), conventions, train, again), hw, peak,
                                     bandwidth, table) for x in lengths]  # fmt: skip
    columns = [column(fixed[k]) if k in fixed else _lanes_column(changing[k])
               for k in range(len(graph.nodes))]  # fmt: skip
    sums = step_sums(columns)
    kernels = _estimated_sums(checked, fixed, changing, hw, how) if how.estimated else None
    main_peak = matrix_peak(checked, hw, peak)[0]
    # inference activations read only the nodes' sizes: the same at every length unless
    # a size changes; training's read the layout's geometry too (computed at each)
    fixed_sizes = not train and all(
        f is None or instantiator(n.out_bytes) is None
        for n, f in zip(graph.nodes, node_at, strict=True)
    )
    activations = activation_bytes(checked) if fixed_sizes else None
    out = []
    for i, (x, shape) in enumerate(zip(lengths, shapes, strict=True)):
        facts: ModelFacts = facts_at(x) if facts_at else checked.facts
        if activations is not None:
            acts = activations
        else:
            nodes = tuple(changing[k][i].costed.node if k in changing else n
                          for k, n in enumerate(graph.nodes))  # fmt: skip
            point = OpGraph(facts, workloads[i], shape, nodes, checked.groups, checked.notes)
            acts = activation_bytes(point)
        tot = assemble(_at(sums, i), shape, memory_parts(facts, acts), main_peak, hw)
        if kernels is not None:
            tot = with_estimate_step(tot, estimate_step(_at(kernels, i), shape.par))
        out.append((shape, tot))
    return out


def _at(sums: Sums, i: int) -> Sums:
    """The sums of the i-th length."""
    return Sums(*(v[i] if isinstance(v, Lanes) else v for v in sums))


def _estimated_sums(
    checked: OpGraph,
    fixed: dict[int, NodeTime],
    changing: dict[int, list[NodeTime]],
    hw: Hardware,
    how: Costing,
) -> Sums:
    """The step's sums as the kernels run it (roofline.estimated): each fixed node
    estimated once, each changing one at each length, added in node order."""
    engine = collectives_engine(checked, how.engine)

    def found(times: list[NodeTime]) -> list[NodeEstimate]:
        return estimate_nodes(times, hw, how.calibration, engine, how.moe_imbalance)

    once = dict(zip(fixed, found(list(fixed.values())), strict=True))
    columns = [
        column(fixed[k], once[k].total_s, once[k].held_s)
        if k in fixed
        else _lanes_column(changing[k], found(changing[k]))
        for k in range(len(checked.nodes))
    ]
    return step_sums(columns)


class Lanes(list):
    """A value at each length: + and − act element by element (with a plain number, on
    each), each element the Python number one point's sum would hold."""

    def __add__(self, other: Any) -> Lanes:
        return Lanes(map(operator.add, self, _each(other)))

    def __radd__(self, other: Any) -> Lanes:
        return Lanes(map(operator.add, _each(other), self))

    def __sub__(self, other: Any) -> Lanes:
        return Lanes(map(operator.sub, self, _each(other)))

    def __rsub__(self, other: Any) -> Lanes:
        return Lanes(map(operator.sub, _each(other), self))


def _each(value: Any) -> Any:
    return value if isinstance(value, Lanes) else repeat(value)


def _lanes_column(times: list[NodeTime], found: list[NodeEstimate] | None = None) -> Column:
    """A changing node's column: its figures at each length (its estimate `found` at
    each, default the roofline's time)."""
    cols = [column(t) if found is None else column(t, found[i].total_s, found[i].held_s)
            for i, t in enumerate(times)]  # fmt: skip
    first = cols[0]
    return Column(
        Lanes(c.seconds for c in cols),
        Lanes(c.flops for c in cols),
        Lanes(c.bytes for c in cols),
        Lanes(c.compute_bound_s for c in cols),
        Lanes(c.recomputed_flops for c in cols) if first.recomputed_flops is not None else None,
        first.step,
        first.network,
        first.beside,
        Lanes(c.held for c in cols),
    )
