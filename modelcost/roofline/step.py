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
from modelcost.ir.graph import OpGraph, Shape
from modelcost.ir.report import Memory, PeakMode, PerToken, Totals
from modelcost.targets.hardware import Hardware

from .cost import CostedGraph
from .footprint import footprint
from .timing import LINKS, NodeTime, _intensity


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


def _mfu(model_flops: float, step: float, peak: float) -> float:
    """Model FLOPs over what the peak does in the step: at most 1, a step being no
    shorter than its FLOPs at the peak (a sum of float quotients may round a hair past
    it, as 1.0000000000000002: that is 1)."""
    if not step:
        return 0.0
    mfu = model_flops / (step * peak)
    return 1.0 if 1.0 < mfu <= 1.0 + 1e-9 else mfu


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
    busy, compute_bound, model_flops = sums.busy, sums.compute_bound, sums.model_flops
    flops, nbytes, comm = sums.flops, sums.bytes, sums.comm
    step, exposed, bubble = step_time(busy, sums.once, comm, par.pp, par.microbatches,
                                      par.overlap, par.vpp, sums.beside)  # fmt: skip
    tokens = shape.T_job
    per_token = PerToken.trusted(
        tokens_per_step=tokens,
        ms_per_step=step * 1e3,
        ms_per_token=step * 1e3 / tokens,
        tokens_per_s=tokens / step if step else 0.0,
        tokens_per_s_device=tokens / step / par.devices if step else 0.0,
    )
    total_mem = add_up(mem.values())
    # fits(graph, hw), with the parts kept for the report; the capacity is the driver's
    # total where the hardware file gives it (hardware.Hardware.capacity)
    fits = total_mem <= hw.capacity
    warning = None
    if not fits:
        need = f"{total_mem / GIB:,.1f} GiB" + ("" if par.single else " per device")
        warning = (
            f"needs {need} but {hw.title} has {hw.capacity / GIB:,.1f} GiB "
            f"({hw.capacity_basis}): it does not fit"
            + (" on one device" if par.single else "")
            + (f"; {advice}" if advice else "")
        )
    return Totals.trusted(
        flops=flops,
        bytes=nbytes,
        intensity=_intensity(flops, nbytes),
        time_s=step,
        busy_s=busy,
        compute_bound_s=compute_bound,
        memory_bound_s=busy - compute_bound,
        compute_share=compute_bound / busy if busy else 0.0,
        comm_s=comm,
        comm_exposed_s=exposed,
        bubble_s=bubble,
        bound="compute" if compute_bound >= busy - compute_bound else "memory",
        per_token=per_token,
        mfu_bound=_mfu(model_flops, step, main_peak),
        memory=Memory.trusted(
            **mem, total=total_mem, capacity=hw.capacity, fits=fits, warning=warning
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
    """
    other = busy - comm
    if overlap == "none":
        exposed, hidden, tail = comm, 0.0, 0.0
    elif overlap == "megatron":
        tail = max(0.0, beside - other)  # the overlapped collectives past the compute
        exposed = comm - beside + tail
        hidden = min(beside, other) / beside if beside else 0.0
    else:
        exposed = tail = max(0.0, comm - other)
        hidden = (comm - exposed) / comm if comm else 0.0
    spent = other + exposed + max(0.0, held * hidden - tail)
    flowing = (busy - once) * (spent / busy) if busy else 0.0  # all microbatches' work
    bubble = flowing * (pp - 1) / (vpp * microbatches)
    return spent + bubble, exposed, bubble
