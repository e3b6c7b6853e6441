"""A step's time and totals from its nodes' times: the columns summed once, the pipeline's
bubble and the communication left exposed, tokens per second, the MFU bound and the
memory footprint.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from functools import reduce
from typing import Any, NamedTuple

from modelcost.base.dtypes import DTYPES
from modelcost.base.settings import DEFAULT_PEAK, GIB
from modelcost.ir.graph import OpGraph, Parallel, Shape
from modelcost.ir.report import Memory, PeakMode, PerToken, Totals
from modelcost.targets.hardware import Hardware

from .cost import CostedGraph
from .footprint import footprint
from .timing import LINKS, NodeTime, _intensity


class Scalars:
    """The few operations a step's figures take besides + − × ÷ and comparisons, on
    plain numbers. A sweep passes the same operations on arrays of its points
    (grid.py's `Arrays`), so both compute a figure by the one formula written here."""

    @staticmethod
    def above_zero(x: Any) -> Any:
        """max(0.0, x), as Python's max picks it (x only when x > 0.0)."""
        return x if x > 0.0 else 0.0

    @staticmethod
    def smaller(a: Any, b: Any) -> Any:
        """min(a, b), as Python's min picks it (b only when b < a)."""
        return b if b < a else a

    @staticmethod
    def ratio(a: Any, b: Any) -> Any:
        """a / b, and 0.0 where b is 0."""
        return a / b if b else 0.0

    @staticmethod
    def pick(test: Any, a: Any, b: Any) -> Any:
        """a where `test` holds, else b."""
        return a if test else b

    real = float  # a float (an int converted as float() converts it)


SCALARS = Scalars()


def add_up(values: Iterable) -> Any:
    """The sum, one after another from 0 (what `sum` does on Python 3.11; 3.12's `sum`
    of floats compensates its rounding, which would make reports differ between Python
    versions in their last digits): floats, ints, or arrays of them over a sweep's
    lengths, added in the same order, give the same numbers."""
    return reduce(operator.add, values, 0)


class Column(NamedTuple):
    """One node's part of the step's sums (`step_sums`): floats, or arrays of them over
    a sweep's lengths (grid.py)."""

    seconds: Any  # all copies, both passes
    flops: Any
    bytes: Any
    compute_bound_s: Any
    recomputed_flops: Any  # a recomputed forward's (count × forward FLOPs), or None
    step: bool  # once per step (optimizer, gradient sync)
    network: bool  # a collective
    beside: bool  # a collective Megatron-Core runs beside compute (graph.Node.beside)
    held: Any = 0.0  # the compute time its SMs take while it runs (NodeEstimate.held_s)


def column(t: NodeTime, seconds: Any = None, held: Any = 0.0) -> Column:
    """A node's column, its time `seconds` (default: the roofline's) and the compute
    time `held` its SMs take (the estimate's; the roofline's is none)."""
    cn = t.costed
    return Column(
        t.total_s if seconds is None else seconds,
        t.flops,
        t.bytes,
        t.compute_bound_s,
        cn.node.count * cn.fwd.flops if cn.recomputed else None,
        cn.node.step,
        cn.node.op.unit in LINKS,  # a collective's, or a host copy's
        cn.node.beside,  # set on collectives only (kinds/emit.py, lower.py)
        held,
    )


class Sums(NamedTuple):
    """A step's sums over its nodes, in node order (`add_up`)."""

    busy: Any
    once: Any  # the once-per-step part (optimizer, gradient sync)
    comm: Any  # the collectives'
    beside: Any  # the collectives' Megatron-Core runs beside compute (overlap megatron)
    flops: Any
    model_flops: Any  # without a recomputed forward: work, not model progress (MFU)
    bytes: Any
    compute_bound: Any
    held: Any = 0.0  # the compute time collectives' SMs take while they run


def step_sums(columns: Sequence[Column]) -> Sums:
    """The sums the totals are made of, every column added in node order."""
    busy = add_up(c.seconds for c in columns)
    once = add_up(c.seconds for c in columns if c.step)
    comm = add_up(c.seconds for c in columns if c.network)
    beside = add_up(c.seconds for c in columns if c.beside)
    flops = add_up(c.flops for c in columns)
    model_flops = flops - add_up(c.recomputed_flops for c in columns
                                 if c.recomputed_flops is not None)  # fmt: skip
    nbytes = add_up(c.bytes for c in columns)
    compute_bound = add_up(c.compute_bound_s for c in columns)
    held = add_up(c.held for c in columns)
    return Sums(busy, once, comm, beside, flops, model_flops, nbytes, compute_bound, held)


def totals(
    costed: CostedGraph,
    times: list[NodeTime],
    hw: Hardware,
    peak: PeakMode = DEFAULT_PEAK,
    advice: str | None = None,
) -> Totals:
    """The step of one device: its time (overlap and bubble applied), FLOPs, bytes,
    per-token figures, MFU bound and memory footprint. `advice` follows the warning
    when the model does not fit."""
    graph = costed.graph
    sums = step_sums([column(t) for t in times])
    return assemble(sums, graph.shape, footprint(graph), matrix_peak(graph, hw, peak)[0], hw,
                    advice)  # fmt: skip


def _mfu(model_flops: Any, step: Any, peak: float, xp: Scalars = SCALARS) -> Any:
    """Model FLOPs over what the peak does in the step (0 for no step): at most 1, a
    step being no shorter than its FLOPs at the peak (a sum of float quotients may round
    a hair past it, as 1.0000000000000002: that is 1)."""
    mfu = xp.ratio(model_flops, step * peak)
    return xp.pick((mfu > 1.0) & (mfu <= 1.0 + 1e-9), 1.0, mfu)


class StepFigures(NamedTuple):
    """A point's step, its per-token figures, MFU bound, bound and memory total: plain
    numbers, or arrays of a sweep's points (`step_figures`'s `xp`)."""

    step: Any
    exposed: Any
    bubble: Any
    ms_per_step: Any
    ms_per_token: Any
    tokens_per_s: Any
    tokens_per_s_device: Any
    mfu_bound: Any
    bound: Any  # "compute" where compute-bound passes take at least half the busy time
    memory: Any  # the footprint's total, bytes per device
    fits: Any


def step_figures(
    sums: Sums,
    par: Parallel,
    tokens: Any,
    mem: dict[str, Any],
    main_peak: float,
    capacity: float,
    xp: Scalars = SCALARS,
) -> StepFigures:
    """What `assemble` and a sweep's row read of a point's sums (`step_sums`), its job's
    tokens a step and its footprint's parts `mem`."""
    busy, compute_bound = sums.busy, sums.compute_bound
    step, exposed, bubble = step_time(busy, sums.once, sums.comm, par.pp, par.microbatches,
                                      par.overlap, par.vpp, sums.beside, xp=xp)  # fmt: skip
    tokens_per_s = xp.ratio(tokens, step)
    total_mem = add_up(mem.values())
    return StepFigures(
        step,
        exposed,
        bubble,
        step * 1e3,
        step * 1e3 / tokens,
        tokens_per_s,
        tokens_per_s / par.devices,
        _mfu(sums.model_flops, step, main_peak, xp),
        xp.pick(compute_bound >= busy - compute_bound, "compute", "memory"),
        total_mem,
        total_mem <= capacity,  # the capacity: the driver's total where the file gives it
    )


def assemble(
    sums: Sums,
    shape: Shape,
    mem: dict[str, float],
    main_peak: float,
    hw: Hardware,
    advice: str | None = None,
) -> Totals:
    """The totals of one point from its sums (`step_sums`), its token geometry, its
    memory footprint and the matrix peak its MFU is taken against."""
    par = shape.par
    busy, compute_bound = sums.busy, sums.compute_bound
    f = step_figures(sums, par, shape.T_job, mem, main_peak, hw.capacity)
    per_token = PerToken.trusted(
        tokens_per_step=shape.T_job,
        ms_per_step=f.ms_per_step,
        ms_per_token=f.ms_per_token,
        tokens_per_s=f.tokens_per_s,
        tokens_per_s_device=f.tokens_per_s_device,
    )
    warning = None
    if not f.fits:  # fits(graph, hw), with the parts kept for the report
        need = f"{f.memory / GIB:,.1f} GiB" + ("" if par.single else " per device")
        warning = (
            f"needs {need} but {hw.title} has {hw.capacity / GIB:,.1f} GiB "
            f"({hw.capacity_basis}): it does not fit"
            + (" on one device" if par.single else "")
            + (f"; {advice}" if advice else "")
        )
    return Totals.trusted(
        flops=sums.flops,
        bytes=sums.bytes,
        intensity=_intensity(sums.flops, sums.bytes),
        time_s=f.step,
        busy_s=busy,
        compute_bound_s=compute_bound,
        memory_bound_s=busy - compute_bound,
        compute_share=compute_bound / busy if busy else 0.0,
        comm_s=sums.comm,
        comm_exposed_s=f.exposed,
        bubble_s=f.bubble,
        bound=f.bound,
        per_token=per_token,
        mfu_bound=f.mfu_bound,
        memory=Memory.trusted(
            **mem, total=f.memory, capacity=hw.capacity, fits=f.fits, warning=warning
        ),
    )


def matrix_peak(graph: OpGraph, hw: Hardware, peak: PeakMode) -> tuple[float, str]:
    """The matrix peak at the precision the model's GEMMs are fed (its activations', or
    its recipe's): the MFU's denominator and the knee's."""
    flops, precision, _ = hw.peak("matrix", DTYPES[graph.facts.compute].precision, peak)
    return flops, precision


def step_time(
    busy: float,
    once: float,
    comm: float,
    pp: int,
    microbatches: int,
    overlap: str,
    vpp: int = 1,
    beside: float = 0.0,
    held: float = 0.0,
    xp: Scalars = SCALARS,
) -> tuple[float, float, float]:
    """(step, exposed collective time, pipeline bubble) of one device.

    `busy` is every op's time end to end, `once` the part that runs once per step
    (optimizer, gradient sync), `comm` the part in collectives. With overlap `full`
    collectives hide behind the step's other work as far as it lasts (an upper bound on
    overlap); with `megatron` only `beside`, the part Megatron-Core runs beside compute
    (graph.Node.beside), does, and the rest is exposed. A pipeline of pp stages and m
    microbatches idles pp − 1 microbatch times (1F1B: the bubble is (pp − 1)/m of the
    ideal time, (pp − 1)/(m + pp − 1) of the step, once-per-step work aside). With vpp
    virtual stages (interleaved 1F1B) a stage idles pp − 1 chunk times, each 1/vpp of a
    microbatch time: (pp − 1)/(vpp · m) of the ideal time (Narayanan et al. 2021,
    §2.2.2).

    `held` is the compute time the overlapped collectives' SMs take while they run (the
    estimate's, `NodeEstimate.held_s`): compute on the SMs a collective leaves does its
    share less work while they overlap, for the part of them hidden (all of it when
    compute outlasts them). That work is made up after them, past their end, unless
    they outlast the compute: then it runs inside their exposed tail, and only what
    does not fit there lengthens the step.

    Every figure may be an array of a sweep's points instead, with `xp` their
    operations (grid.py).
    """
    other = busy - comm
    if overlap == "none":
        exposed, hidden, tail = comm, 0.0, 0.0
    elif overlap == "megatron":
        tail = xp.above_zero(beside - other)  # the overlapped collectives past the compute
        exposed = comm - beside + tail
        hidden = xp.ratio(xp.smaller(beside, other), beside)
    else:
        exposed = tail = xp.above_zero(comm - other)
        hidden = xp.ratio(comm - exposed, comm)
    spent = other + exposed + xp.above_zero(held * hidden - tail)
    flowing = (busy - once) * xp.ratio(spent, busy)  # all microbatches' work
    bubble = flowing * (pp - 1) / (vpp * microbatches)
    return spent + bubble, exposed, bubble
