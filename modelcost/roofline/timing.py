"""An op's time on a target: the larger of its compute time at the peak of its unit and
precision and its memory time at the bandwidth (TraceLens's rule), forward and backward
passes, collectives on their links; every node of a costed graph timed once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from modelcost.base.memo import per_object
from modelcost.base.record import Record
from modelcost.base.settings import DEFAULT_PEAK
from modelcost.ir.report import Bound, PeakMode
from modelcost.perfmodel import CollectiveOp, Cost, OpRecord, Unit
from modelcost.targets.hardware import Hardware
from modelcost.targets.network import collective_time, link
from modelcost.targets.roofs import Roof, roof

from .cost import CostedGraph, CostedNode


class Timing(Record, frozen=True):
    compute_s: float
    memory_s: float
    peak_flops: float
    peak_precision: str
    peak_source: PeakMode

    @property
    def time_s(self) -> float:
        return max(self.compute_s, self.memory_s)


def time_op(c: Cost, op: OpRecord, hw: Hardware, peak: PeakMode, bandwidth: PeakMode) -> Timing:
    """Roofline of one pass of one op."""
    r = roof(op.unit, op.precision, hw, peak, bandwidth)
    compute_s, memory_s = c.flops / r.peak_flops, c.bytes / r.bytes_per_s
    return Timing(compute_s, memory_s, r.peak_flops, r.peak_precision, r.peak_source)


def _bound(compute_s: float, memory_s: float, unit: Unit) -> Bound:
    if compute_s >= memory_s:
        return "compute"
    return "network" if unit is Unit.network else "host" if unit is Unit.host else "memory"


def _intensity(flops: float, nbytes: float) -> float:
    return flops / nbytes if nbytes else 0.0


def _shape_params(op: OpRecord) -> dict:
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in op.shape().items()}


class NodeTime(Record, frozen=True):
    """One node's roofline: each pass's compute and memory (or link) time, and its
    all-copies, both-passes sums that the totals, layers and kinds add up."""

    costed: CostedNode
    roof: Roof
    compute_s: float
    memory_s: float
    time_s: float
    link: str | None
    back: tuple[float, float, float] | None  # backward (compute_s, memory_s, time_s)
    total_s: float  # count × (forward + backward)
    flops: float  # count × (forward + backward)
    bytes: float
    compute_bound_s: float  # the part of total_s in compute-bound passes


LINKS = (Unit.network, Unit.host)  # transfers a step can run beside its compute


MAX_TIMED = 65_536  # ops timed per target before the table is cleared (bounded memory)


@per_object
def op_times(hw: Hardware, peak: PeakMode, bandwidth: PeakMode) -> dict:  # noqa: ARG001
    """A table of one op's pass times on `hw` under `peak` and `bandwidth` (`op_passes`),
    kept while `hw` lives (per_object keys it by them): the roofline of an op is a pure
    function of the op, its costs and the target."""
    return {}


Passes = tuple[Roof, float, float, float, str | None, tuple[float, float, float] | None]


def op_passes(op: OpRecord, f: Cost, b: Cost | None, hw: Hardware, peak: PeakMode,
              bandwidth: PeakMode) -> Passes:  # fmt: skip
    """(roof, forward compute s, forward memory or link s, forward s, link, the
    backward's (compute, memory, time) or None) of one op."""
    precision = op.precision
    r = roof(op.unit, precision, hw, peak, bandwidth)
    fc, fm = f.flops / r.peak_flops, f.bytes / r.bytes_per_s
    dequant = op.vector_flops()
    if dequant:  # a third roof: the vector units' work beside the matrix math
        v = roof(Unit.vector, precision, hw, peak, bandwidth)
        fc = max(fc, dequant / v.peak_flops)
    lk: str | None = None
    if isinstance(op, CollectiveOp):  # on the links the group spans (network.py)
        fm, lk = collective_time(op, hw), link(op, hw)
    elif op.unit is Unit.host:
        lk = "host"
    back = None
    if b is not None:
        bc, bm = b.flops / r.peak_flops, b.bytes / r.bytes_per_s
        if isinstance(op, CollectiveOp):
            bm = collective_time(op.backward_op(), hw)
        back = (bc, bm, max(bc, bm))
    return r, fc, fm, max(fc, fm), lk, back


def time_nodes(
    costed: CostedGraph,
    hw: Hardware,
    peak: PeakMode = DEFAULT_PEAK,
    bandwidth: PeakMode = DEFAULT_PEAK,
    kept: frozenset[str] | None = None,
) -> list[NodeTime]:
    """The roofline of every node (of the kinds `kept`, when given); equal ops (a
    layer's repeats, a sweep's points sharing a shape) are timed once (`op_times`)."""
    table = op_times(hw, peak, bandwidth)
    return [node_time(cn, hw, peak, bandwidth, table) for cn in costed.nodes
            if kept is None or cn.node.op.kind in kept]  # fmt: skip


def node_time(
    cn: CostedNode, hw: Hardware, peak: PeakMode, bandwidth: PeakMode, table: dict | None = None
) -> NodeTime:
    """One node's roofline, its op's passes looked up in `table` (`op_times`)."""
    if table is None:
        table = op_times(hw, peak, bandwidth)
    op = cn.node.op
    f, b = cn.fwd, cn.bwd
    key = (op, f, b)
    found = table.get(key)
    if found is None:
        if len(table) >= MAX_TIMED:
            table.clear()
        found = table[key] = op_passes(op, f, b, hw, peak, bandwidth)
    return timed(cn, found)


def timed(cn: CostedNode, passes: Passes, real: Callable[[Any], Any] = float) -> NodeTime:
    """One node's roofline from its op's passes (`op_passes`), its FLOPs and bytes made
    `real` (floats; a sweep's node that is a function of its length keeps them so,
    grid.py)."""
    r, fc, fm, tf, lk, back = passes
    f, b, count = cn.fwd, cn.bwd, cn.node.count
    flops, nbytes = real(f.flops), real(f.bytes)
    bound_s = count * (tf if fc >= fm else 0)
    tb = 0.0
    if back is not None and b is not None:
        bc, bm, tb = back
        flops, nbytes = flops + real(b.flops), nbytes + real(b.bytes)
        bound_s += count * (tb if bc >= bm else 0)
    return NodeTime(
        costed=cn,
        roof=r,
        compute_s=fc,
        memory_s=fm,
        time_s=tf,
        link=lk,
        back=back,
        total_s=count * (tf + tb),
        flops=flops * count,
        bytes=nbytes * count,
        compute_bound_s=bound_s,
    )
