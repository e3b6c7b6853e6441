"""Many lengths at once: one layout and batch of a spec on a target, at every context (or
sequence length) a sweep asks for, lowered once and evaluated as arrays.

The workload is lowered with its length as a variable (symbolic.py), so the op records
that depend on it are functions of it and the others are the same at every length; the
checks that refuse a length (`workload_shape`) run on the variable too. The nodes that
do not change are costed and timed once for all the points; each changing node is
rebuilt at each length, costed and timed (the same tables as `compile_totals`: an equal
op is costed and timed once). The step's sums (roofline.step_sums) are then taken over
numpy arrays of the lengths, in node order, and the figures a sweep's row shows
(roofline.step_figures: step, per-token figures, MFU, memory, fit, the estimate's step)
computed from them by the same formulas a single point's totals take, on arrays
(`Arrays`): element by element the same IEEE operations on the same numbers, so each
point's figures are the very ones `compile_totals` gives. The model's facts (the KV
cache grows with the context) and the token counts are evaluated at every length at
once, as arrays of Python integers (dtype object: each element computed as Python
computes it, so no integer overflows or rounds differently).

A comparison the lowering or its checks make on the length is a guard
(symbolic.watching): the lowering serves the lengths where its guards come out alike
(evaluated over all the lengths at once), and the first other length takes a lowering
of its own (a sliding window: two). Where the length's value escapes (a hash, a name
that shows it), the lowering refuses the first length, or the rebuilt ops differ from
real lowerings (run skewed, symbolic.skewed, so that a read C code makes unseen shows
at the first length), `at_lengths` says so (None) and the caller computes each point on
its own. A length the checks refuse is found by the checks alone (`_screen`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, NamedTuple, cast

import modelcost.language.spec as ir
from modelcost.base.errors import SpecError
from modelcost.base.record import replace
from modelcost.base.symbolic import SKEW, Watch, instantiator, length, skewed, watching
from modelcost.estimate.costing import Costing
from modelcost.ir.graph import ModelFacts, Node, OpGraph, Shape, Workload, settled
from modelcost.ir.report import Totals
from modelcost.lowering.lower import lower
from modelcost.lowering.validate import workload_shape
from modelcost.roofline.compile import compile_totals
from modelcost.roofline.estimated import (
    NodeEstimate,
    collectives_engine,
    estimate_nodes,
    estimate_step,
)
from modelcost.roofline.footprint import activation_bytes, memory_parts
from modelcost.roofline.step import Sums, column, matrix_peak, step_figures, step_sums
from modelcost.roofline.timing import NodeTime
from modelcost.targets.hardware import Hardware

from .arrays import ARRAYS, each_point, lanes_column, spread
from .changing import changing_column, node_timed


class Figures(NamedTuple):
    """A point's figures, as a sweep's row shows them (besides what the points of one
    layout and batch share: the model, target, phase, batch, engine and layout)."""

    seq: int
    context: int
    step_ms: float
    ms_per_token: float
    tokens_per_s: float
    tokens_per_s_device: float
    bound: str
    mfu_bound: float
    memory: float  # bytes per device
    capacity: float
    fits: bool
    estimate_ms: float | None  # --estimate kernels: the step as the kernels run it


def figures_of(seq: int, context: int, t: Totals) -> Figures:
    """The figures of a point computed on its own, read off its totals."""
    return Figures(
        seq,
        context,
        t.per_token.ms_per_step,
        t.per_token.ms_per_token,
        t.per_token.tokens_per_s,
        t.per_token.tokens_per_s_device,
        t.bound,
        t.mfu_bound,
        t.memory.total,
        t.memory.capacity,
        t.memory.fits,
        t.estimate_s * 1e3 if t.estimate_s is not None else None,
    )


# a point's figures, or why not; the shape is one point's of the lowering that served it,
# whose fields but its length (in the figures) are every such point's
Point = tuple[Shape, Figures] | SpecError | ValueError


def length_field(w: Workload) -> str:
    """The workload's length that a sweep varies: decode's context, else the sequence."""
    return "context" if w.phase.value == "decode" else "seq"


MAX_TEMPLATES = 4  # lowerings one group's lengths may take (a sliding window: two)
_REFUSED = object()  # the checks refuse the template's own length


def at_lengths(
    spec: ir.Spec,
    hw: Hardware,
    base: Workload,
    lengths: Sequence[int],
    how: Costing,
    share: bool = False,
) -> list[Point] | None:
    """Each length's figures, or the error that refuses it, as `compile_totals` of
    `base` at that length gives them (its `length_field`); None when the lengths
    cannot share a lowering (the caller computes each on its own). Where a decision in
    the lowering splits them (`min(context, window)`), each side takes a lowering of its
    own, up to MAX_TEMPLATES; what is left is computed one by one. The batch is not such
    a variable: it changes every GEMM of the step, whose costs are computed anyway.
    Lowering reads neither the target nor the costing: with `share` (a sweep of several
    targets) the lowerings are kept for the next target to ask (`_planned`)."""
    if len(lengths) < 2:
        return None
    field = length_field(base)
    base = settled(base, how.conventions)
    key = tuple(lengths)
    plan = _planned(spec, base, key, field) if share else _plan(spec, base, key, field)
    if plan is None:
        return None
    found: dict[int, Point] = dict(plan.refused)
    for r in plan.regions:
        figures = _figures(r.points, [lengths[i] for i in r.covered], hw, how)
        shape = r.points.checked.shape
        found.update((i, (shape, f)) for i, f in zip(r.covered, figures, strict=True))
    for i in plan.rest:  # each on its own
        found[i] = _alone(spec, hw, base, field, lengths[i], how)
    return [found[i] for i in range(len(lengths))]


class _Region(NamedTuple):
    """The lengths one lowering serves (indices into a plan's lengths), and it."""

    covered: list[int]
    points: _Points


class _Plan(NamedTuple):
    """How a workload's lengths are computed: the regions lowerings serve, the lengths
    the checks refuse (with why), and the rest (each on its own)."""

    regions: list[_Region]
    refused: dict[int, SpecError | ValueError]
    rest: list[int]


# plans kept for a sweep's other targets, while they hold at most this many nodes and
# refusals in all (a Llama 3 70B decode lowering: 21 nodes; a spec of 1,000 distinct
# layers: 16,000; a kept node is about 1.8 kB, its instantiators with it)
MAX_PLANNED = 50_000
_PLANS: OrderedDict[tuple, tuple[ir.Spec, _Plan | None, int]] = OrderedDict()


def _planned(spec: ir.Spec, base: Workload, lengths: tuple[int, ...], field: str) -> _Plan | None:
    """`_plan`, kept for the latest (spec, workload, lengths) while the plans hold at
    most MAX_PLANNED nodes and refusals (each plan counting one at least)."""
    key = (id(spec), base, lengths)
    kept = _PLANS.get(key)
    if kept is not None and kept[0] is spec:
        _PLANS.move_to_end(key)
        return kept[1]
    plan = _plan(spec, base, lengths, field)
    size = 1 + (len(plan.refused) + sum(len(r.points.graph.nodes) + len(r.points.checked.nodes)
                                        for r in plan.regions) if plan else 0)  # fmt: skip
    _PLANS[key] = (spec, plan, size)  # the spec held, so its id names it while kept
    held = sum(entry[2] for entry in _PLANS.values())
    while held > MAX_PLANNED and len(_PLANS) > 1:
        held -= _PLANS.popitem(last=False)[1][2]
    return plan


def _plan(spec: ir.Spec, base: Workload, lengths: tuple[int, ...], field: str) -> _Plan | None:
    """Which lowering serves which lengths (None: the first cannot serve any)."""
    regions: list[_Region] = []
    refused: dict[int, SpecError | ValueError] = {}
    todo = list(range(len(lengths)))
    screened = False
    for attempt in range(MAX_TEMPLATES):
        if len(todo) < 2:
            break
        part = _region(spec, base, lengths, todo, field)
        if part is _REFUSED and not screened:  # some lengths are refused: which
            refused.update(_screen(spec, base, field, lengths, todo))
            todo, screened = [i for i in todo if i not in refused], True
            continue
        if not isinstance(part, _Region):
            if attempt == 0:
                return None
            break
        regions.append(part)
        served = set(part.covered)
        todo = [i for i in todo if i not in served]
    return _Plan(regions, refused, todo)


def _alone(spec: ir.Spec, hw: Hardware, base: Workload, field: str, x: int,
           how: Costing) -> Point:  # fmt: skip
    """The figures of `base` at length `x`, computed on its own (`compile_totals`), or
    why not."""
    try:
        graph, tot = compile_totals(spec, hw, replace(base, **{field: x}), how)
    except (SpecError, ValueError) as err:
        return err
    return graph.shape, figures_of(graph.shape.seq, graph.shape.n_kv, tot)


def _screen(spec: ir.Spec, base: Workload, field: str, lengths: Sequence[int],
            todo: list[int]) -> dict[int, SpecError | ValueError]:  # fmt: skip
    """The lengths of `todo` the checks refuse, with why (as `compile_totals` refuses
    them: its workload, its checks)."""
    refused: dict[int, SpecError | ValueError] = {}
    for i in todo:
        try:
            workload_shape(spec, replace(base, **{field: lengths[i]}))
        except (SpecError, ValueError) as err:
            refused[i] = err.with_traceback(None)  # kept without the frames it was raised in
    return refused


def _region(
    spec: ir.Spec, base: Workload, lengths: Sequence[int], todo: list[int], field: str
) -> _Region | object | None:
    """The points of `todo` that one lowering at the first of them serves (where its
    decisions come out alike); _REFUSED when the checks refuse the first length, None
    when the lowering serves none."""
    template = _template(spec, base, field, lengths[todo[0]])
    if template is None or template is _REFUSED:
        return template
    graph, shape_at, watch = cast(tuple[OpGraph, Any, Watch], template)
    import numpy as np

    xs = np.array([lengths[i] for i in todo], dtype=object)
    covered = [i for i, ok in zip(todo, watch.holding(xs).tolist(), strict=True) if ok]
    if not covered:  # the guards hold at the first length, where they were taken
        return None
    node_at = [instantiator(n) for n in graph.nodes]
    facts_at = instantiator(graph.facts)
    # values that C code reads without asking (a float raised to the length's power, an
    # index) were read off by SKEW: a real lowering at the first length shows any that
    # matters there; a read that saturates (the experts hit) may agree at the first
    # length yet not at others: real lowerings at the longest, middle and shortest
    # lengths catch one that rises or falls with the length
    for i in spread(covered, lambda i: lengths[i]):
        x = lengths[i]
        try:
            checked = lower(spec, replace(base, **{field: x}))
        except (SpecError, ValueError):  # refused at a length the template served
            return None
        if (
            _nodes_at(graph.nodes, node_at, x) != checked.nodes
            or (facts_at(x) if facts_at else graph.facts) != checked.facts
            or (shape_at(x) if shape_at else graph.shape) != checked.shape
        ):
            return None
    return _Region(covered, _Points(graph, checked, node_at, facts_at, shape_at, base, field))


def _template(spec: ir.Spec, w: Workload, field: str, x0: int) -> tuple | object | None:
    """The workload lowered with its length a variable worth `x0`, its shape's
    instantiator (None: the shape does not depend on the length) and the decisions the
    length made in the checks and the lowering; _REFUSED when the checks refuse `x0`;
    None when its value escaped (no guard says where the lowering holds), or lowering
    fails on the variable (a skewed number read by C code past a bound): the points are
    then computed one by one, each as compile does."""
    try:
        # each symbolic value's own number off by SKEW: a read of it that nothing sees
        # gives a wrong op at x0 itself, which the real lowering at x0 then shows
        with skewed(SKEW), watching() as watch:
            symbolic = replace(w, **{field: length(x0)})
            try:
                shape, notes = workload_shape(spec, symbolic)
            except (SpecError, ValueError):
                return _REFUSED
            graph = lower(spec, symbolic, (shape, notes))
    except Exception:  # any failure here leaves the points to the exact path
        return None
    if watch.escaped:
        return None
    return graph, instantiator(shape), watch


def _nodes_at(nodes: tuple[Node, ...], node_at: list, x: int) -> tuple[Node, ...]:
    return tuple(f(x) if f is not None else n for n, f in zip(nodes, node_at, strict=True))


class _Points(NamedTuple):
    """What a lowering shared by lengths gives to evaluate them: the lowering with the
    length a variable (`graph`), one real lowering (`checked`), and the instantiators
    of its nodes, facts and shape (None: the same at every length)."""

    graph: OpGraph
    checked: OpGraph
    node_at: list
    facts_at: Any
    shape_at: Any
    base: Workload
    field: str


def _figures(p: _Points, lengths: list[int], hw: Hardware, how: Costing) -> list[Figures]:
    """Each length's figures: the fixed nodes costed and timed once, the changing ones
    at each length, the sums and figures over arrays of the lengths."""
    import numpy as np

    graph, checked = p.graph, p.checked
    train, again = checked.shape.train, checked.shape.par.recompute == "full"
    fixed: dict[int, NodeTime] = {}
    changing: dict[int, list[NodeTime]] = {}  # a node's time at each length
    evaluated: dict = {}  # a node's column from its cost as a function
    for k, (n, f) in enumerate(zip(graph.nodes, p.node_at, strict=True)):
        if f is None:
            fixed[k] = node_timed(n, hw, how, train, again)
        elif how.estimated or not checked.shape.decode:
            # the estimate times each kernel at each length; prefill and training change
            # most ops with the sequence, each costing little at one length, which is
            # cheaper than costing it as a function (measured: Llama 3 8B at 64
            # sequences, training 0.86 s as functions against 0.38 s at each)
            changing[k] = [node_timed(f(x), hw, how, train, again) for x in lengths]
        else:  # a decode step's few changing ops (the attention over the cache)
            evaluated[k] = changing_column(f, lengths, hw, how, train, again)
    columns = [column(fixed[k]) if k in fixed
               else evaluated[k] if k in evaluated else lanes_column(changing[k])
               for k in range(len(graph.nodes))]  # fmt: skip
    sums = step_sums(columns)
    xs = np.array(lengths, dtype=object)
    shape = p.shape_at(xs) if p.shape_at else checked.shape  # arrays where it changes
    facts: ModelFacts = p.facts_at(xs) if p.facts_at else checked.facts
    par = checked.shape.par
    mem = memory_parts(facts, _activations(p, changing, lengths), ARRAYS.real)
    main_peak = matrix_peak(checked, hw, how.peak)[0]
    f = step_figures(sums, par, ARRAYS.real(shape.T_job), mem, main_peak, hw.capacity, ARRAYS)
    estimate: Any = None
    if how.estimated:
        estimate = estimate_step(_estimated_sums(checked, fixed, changing, hw, how), par,
                                 ARRAYS) * 1e3  # fmt: skip
    points = len(lengths)
    values = (shape.seq, shape.n_kv, f.ms_per_step, f.ms_per_token, f.tokens_per_s,
              f.tokens_per_s_device, f.bound, f.mfu_bound, f.memory, hw.capacity, f.fits,
              estimate)  # fmt: skip
    return list(map(Figures._make, zip(*(each_point(v, points) for v in values), strict=True)))


def _activations(p: _Points, changing: dict[int, list[NodeTime]], lengths: list[int]) -> Any:
    """The activations alive at each length: at inference they read only the nodes'
    sizes, the same at every length unless a size changes; training's read the
    layout's geometry too (computed at each)."""
    graph, checked = p.graph, p.checked
    if not checked.shape.train and all(
        f is None or instantiator(n.out_bytes) is None
        for n, f in zip(graph.nodes, p.node_at, strict=True)
    ):
        return activation_bytes(checked)
    out = []
    pairs = list(enumerate(zip(graph.nodes, p.node_at, strict=True)))
    for i, x in enumerate(lengths):
        nodes = tuple(changing[k][i].costed.node if k in changing else f(x) if f else n
                      for k, (n, f) in pairs)  # fmt: skip
        facts = p.facts_at(x) if p.facts_at else checked.facts
        shape = p.shape_at(x) if p.shape_at else checked.shape
        w = replace(p.base, **{p.field: x})
        out.append(activation_bytes(OpGraph(facts, w, shape, nodes, checked.groups,
                                            checked.notes)))  # fmt: skip
    return out


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
        else lanes_column(changing[k], found(changing[k]))
        for k in range(len(checked.nodes))
    ]
    return step_sums(columns)
