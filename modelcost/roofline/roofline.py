"""Stage 5, roofline: a costed graph on a hardware target → the report model.

time(op) = max(flops / peak(unit, precision), bytes / bandwidth); the op is compute-bound
when the compute time is at least the memory time (TraceLens's rule). A weight-only GEMM
also dequantizes its weights on the vector units: its compute time is the larger of its
matrix math and that work. Collectives move
their bytes at the scale-up bandwidth. Totals, layer groups, op kinds, per-token
figures, the MFU bound and the memory footprint are all computed here.
"""

from __future__ import annotations

import operator
from collections import defaultdict
from collections.abc import Iterable, Sequence
from functools import reduce
from typing import TYPE_CHECKING, Any, NamedTuple

from modelcost.base.dtypes import DTYPES
from modelcost.base.errors import SpecError
from modelcost.base.memo import per_object
from modelcost.base.record import Record, asdict, replace
from modelcost.base.settings import DEFAULT_PEAK, GIB
from modelcost.estimate.costing import DEFAULT_COSTING, Costing
from modelcost.estimate.engines import DEFAULT_ENGINE
from modelcost.estimate.kernels import serve
from modelcost.ir.graph import RECEIVED, ModelFacts, Node, OpGraph, Parallel, Shape
from modelcost.ir.report import (
    Bound,
    HardwareInfo,
    KernelChoice,
    KernelUse,
    KindEntry,
    LayerEntry,
    LayoutInfo,
    Memory,
    ModelInfo,
    OpEntry,
    PassTiming,
    PeakMode,
    PerToken,
    Report,
    Totals,
    WorkloadInfo,
)
from modelcost.lowering.memory import kept_activations, layer_sets, resident_bytes
from modelcost.perfmodel import (
    CollectiveOp,
    Cost,
    GemmOp,
    GroupedGemmOp,
    OpRecord,
    Unit,
    bpe,
)
from modelcost.targets.hardware import Hardware
from modelcost.targets.network import collective_time, link
from modelcost.targets.roofs import Roof, roof

from .cost import CostedGraph, CostedNode

if TYPE_CHECKING:
    from modelcost.estimate.calibration import Calibration
    from modelcost.estimate.estimate import Estimate


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
    """A table of one op's pass times on `hw` under `peak` and `bandwidth` (`_passes`),
    kept while `hw` lives (per_object keys it by them): the roofline of an op is a pure
    function of the op, its costs and the target."""
    return {}


_Passes = tuple[Roof, float, float, float, str | None, tuple[float, float, float] | None]


def _passes(op: OpRecord, f: Cost, b: Cost | None, hw: Hardware, peak: PeakMode,
            bandwidth: PeakMode) -> _Passes:  # fmt: skip
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
    f, b, count = cn.fwd, cn.bwd, cn.node.count
    key = (op, f, b)
    found = table.get(key)
    if found is None:
        if len(table) >= MAX_TIMED:
            table.clear()
        found = table[key] = _passes(op, f, b, hw, peak, bandwidth)
    r, fc, fm, tf, lk, back = found
    flops, nbytes = float(f.flops), float(f.bytes)
    bound_s = count * (tf if fc >= fm else 0)
    tb = 0.0
    if back is not None and b is not None:
        bc, bm, tb = back
        flops, nbytes = flops + float(b.flops), nbytes + float(b.bytes)
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


def _with_estimate(
    tot: Totals, graph: OpGraph, times: list[NodeTime], estimates: list[NodeEstimate]
) -> Totals:
    """The totals with the step as the kernels run it: the same composition as the
    roofline's step (overlap, bubble), from the estimated times, the compute beside a
    collective slowed by the SMs it holds."""
    sums = step_sums([column(t, e.total_s, e.held_s)
                      for t, e in zip(times, estimates, strict=True)])  # fmt: skip
    return with_estimate_step(tot, estimate_step(sums, graph.shape.par))


def estimate_step(sums: Sums, par: Parallel) -> float:
    """The step as the kernels run it, from the estimate's sums: the roofline's
    composition (overlap, bubble) with the compute the collectives' SMs take."""
    return step_time(sums.busy, sums.once, sums.comm, par.pp, par.microbatches, par.overlap,
                     par.vpp, sums.beside, sums.held)[0]  # fmt: skip


def with_estimate_step(tot: Totals, step: float) -> Totals:
    """The totals with `step`, the step as the kernels run it, beside the roofline's."""
    efficiency = tot.time_s / step if step else None
    return tot.model_copy(
        update={
            "estimate_s": step,
            "efficiency": efficiency,
            # the same model FLOPs in the longer time
            "mfu_estimate": tot.mfu_bound * efficiency if efficiency is not None else None,
        }
    )


def estimated(
    costed: CostedGraph,
    times: list[NodeTime],
    tot: Totals,
    hw: Hardware,
    calibration: Calibration | None = None,
    engine: str = DEFAULT_ENGINE,
    imbalance: float | None = None,
) -> Totals:
    """`tot` with the step as the kernels run it (a calibration on top, collectives as
    `engine` runs them, MoE's routed load at `imbalance`): what a sweep row or a serving
    figure reads, the same figure `build_report` puts in its totals."""
    estimates = estimate_nodes(
        times, hw, calibration, collectives_engine(costed.graph, engine), imbalance
    )
    return _with_estimate(tot, costed.graph, times, estimates)


class StageStep(Record, frozen=True):
    """A pipeline stage's share of a served decode step (`served_stage`): the stage's
    own work (its layers, and the head on the last, collectives composed as the
    layout's overlap says) and the p2p receive of the previous stage's activations,
    each at the roofline and, where the kernels' estimate is asked for, as the kernels
    run it (None without)."""

    stage_s: float
    p2p_s: float
    stage_estimate_s: float | None = None
    p2p_estimate_s: float | None = None


def _is_recv(t: NodeTime) -> bool:
    op = t.costed.node.op
    return isinstance(op, CollectiveOp) and op.collective == "p2p"


def served_stage(
    costed: CostedGraph,
    times: list[NodeTime],
    hw: Hardware,
    how: Costing = DEFAULT_COSTING,
) -> StageStep:
    """A decode step of the report's pipeline stage split into its own work and its
    receive, without a training step's fill and drain: what a serving engine's
    pipeline (one batch in flight per stage) composes into a TPOT (scenario.py
    `Scenario.pipelined_step`)."""
    par = costed.graph.shape.par

    def split(seconds: list[float]) -> tuple[float, float]:
        pairs = list(zip(times, seconds, strict=True))
        mine = [(t, x) for t, x in pairs if not _is_recv(t)]
        busy = sum(x for _, x in mine)
        comm = sum(x for t, x in mine if t.costed.node.op.unit in LINKS)
        beside = sum(x for t, x in mine if t.costed.node.beside)
        stage = step_time(busy, 0.0, comm, 1, 1, par.overlap, 1, beside)[0]
        return stage, sum(x for t, x in pairs if _is_recv(t))

    stage_s, p2p_s = split([t.total_s for t in times])
    if not how.estimated:
        return StageStep(stage_s, p2p_s)
    estimates = estimate_nodes(
        times, hw, how.calibration, collectives_engine(costed.graph, how.engine),
        how.moe_imbalance,
    )  # fmt: skip
    stage_e, p2p_e = split([e.total_s for e in estimates])
    return StageStep(stage_s, p2p_s, stage_e, p2p_e)


def collectives_engine(graph: OpGraph, engine: str) -> str | None:
    """Whose all-reduce a step's collectives run as: a serving engine's (its custom
    all-reduce) for inference steps; NCCL/RCCL's alone (None) for a training step,
    which no serving engine runs."""
    return None if graph.shape.train else engine


def matrix_peak(graph: OpGraph, hw: Hardware, peak: PeakMode) -> tuple[float, str]:
    """The matrix peak at the precision the model's GEMMs are fed (its activations', or
    its recipe's): the MFU's denominator and the knee's."""
    flops, precision, _ = hw.peak("matrix", DTYPES[graph.facts.compute].precision, peak)
    return flops, precision


def _layout_info(par: Parallel) -> LayoutInfo:
    """The report's layout: the axes as given, with the expert tensor-parallel size
    resolved (`Parallel.expert_tp`)."""
    fields = {k: v for k, v in asdict(par).items() if k not in ("etp",)}
    return LayoutInfo.trusted(**fields, devices=par.devices, label=par.label,
                              etp=par.expert_tp)  # fmt: skip


class NodeEstimate(Record, frozen=True):
    """A node's kernel-aware estimate (estimate.py): each pass, and all copies."""

    forward: Estimate
    backward: Estimate | None
    total_s: float  # count × (forward + backward)
    # the compute time the SMs it holds take from compute beside it (all copies): a
    # data-parallel sync's NCCL channels (`held`)
    held_s: float = 0.0


def estimate_nodes(
    times: list[NodeTime],
    hw: Hardware,
    calibration: Calibration | None = None,
    engine: str | None = DEFAULT_ENGINE,
    imbalance: float | None = None,
) -> list[NodeEstimate]:
    """Every node's estimate, pass by pass, never below its roofline time (collectives
    as `engine` runs them, MoE's routed load at `imbalance` × the mean: None, the
    documented default); a calibration's measured factors or times on top
    (calibration.py)."""
    from modelcost.estimate.estimate import (
        estimate,  # only `--estimate kernels` reads it: loaded then
    )

    out = []
    for t in times:
        cn = t.costed
        op, f, b = cn.node.op, cn.fwd, cn.bwd
        fwd = estimate(op, f.flops, f.bytes, t.time_s, hw, "fwd", engine, imbalance)
        if calibration is not None:
            fwd = calibration.apply(op, fwd, t.time_s)
        bwd = None
        if t.back is not None and b is not None:
            bwd = estimate(op, b.flops, b.bytes, t.back[2], hw, "bwd", engine, imbalance)
        both = fwd.time_s + (bwd.time_s if bwd is not None else 0.0)
        share, fwd = held_share(cn.node, fwd, hw)
        total = cn.node.count * both
        out.append(NodeEstimate(fwd, bwd, total, total * share))
    return out


def held_share(node: Node, fwd: Estimate, hw: Hardware) -> tuple[float, Estimate]:
    """(the share of the SMs `node` holds while it runs, its forward estimate saying
    so): a training step's data-parallel sync (gradients, the updated weights), which
    Megatron-Core runs through NCCL beside compute, holds NCCL's channels, one SM each
    (collectives_achieved.ctas); the compute beside it runs on the rest. Nothing else
    is counted: tensor-parallel overlap's ring exchange moves its data by copy engine
    (Transformer Engine's userbuffers, use_ce), and no channel count is sourced for the
    pipeline's and ring attention's sends, nor for RCCL."""
    from modelcost.estimate.collectives_achieved import (
        ctas,  # the estimate's own: loaded when it runs
    )

    op = node.op
    if not (node.step and isinstance(op, CollectiveOp)):
        return 0.0, fwd
    found = ctas(op, hw)
    if found is None:
        return 0.0, fwd
    n, said = found
    share = n / hw.compute_units
    said = f"{said}: compute overlapping it does {share:.0%} less work meanwhile"
    return share, replace(fwd, reason=f"{fwd.reason}; {said}")


class _OpFacts(Record, frozen=True):
    """What an op entry shows of the op alone, on one target: equal ops (the norms and
    residuals of every layer) share it, built once per report."""

    shape: dict
    shape_label: str
    dtype: str
    dtypes: dict
    unit: str
    kernel: KernelChoice | None


def _op_facts(op: OpRecord, hw: Hardware) -> _OpFacts:
    return _OpFacts(
        shape=_shape_params(op),
        shape_label=op.describe(),
        dtype=op.precision,
        dtypes={k: v.value for k, v in op.operand_dtypes().items()},
        unit=op.unit.value,
        kernel=serve(op, hw.arch, hw.compute_units)
        if isinstance(op, GemmOp | GroupedGemmOp)
        else None,
    )


def _op_entry(
    t: NodeTime,
    groups: dict,
    hw: Hardware,
    busy: float,
    e: NodeEstimate | None,
    facts: dict[OpRecord, _OpFacts],
) -> OpEntry:
    cn, r = t.costed, t.roof
    n, op = cn.node, cn.node.op
    g = groups.get(n.group)
    f = facts.get(op)
    if f is None:
        f = facts[op] = _op_facts(op, hw)
    back = None
    if t.back is not None and cn.bwd is not None:
        bc, bm, tb = t.back
        back = PassTiming.trusted(
            flops=float(cn.bwd.flops),
            bytes=float(cn.bwd.bytes),
            intensity=_intensity(cn.bwd.flops, cn.bwd.bytes),
            compute_s=bc,
            memory_s=bm,
            time_s=tb,
            bound=_bound(bc, bm, op.unit),
            estimate_s=e.backward.time_s if e is not None and e.backward is not None else None,
            estimate_reason=e.backward.reason if e is not None and e.backward is not None else None,
        )
    return OpEntry.trusted(
        name=n.name,
        layer=g.layers[0] if g is not None and g.layers else None,
        group=n.group,
        layers=g.layer_label if g is not None else "",
        kind=op.kind,
        count=n.count,
        shape=f.shape,
        shape_label=f.shape_label,
        dtype=f.dtype,
        dtypes=f.dtypes,
        unit=f.unit,
        link=t.link,
        peak_flops=r.peak_flops,
        peak_precision=r.peak_precision,
        peak_source=r.peak_source,
        flops=float(cn.fwd.flops),
        bytes=float(cn.fwd.bytes),
        intensity=_intensity(cn.fwd.flops, cn.fwd.bytes),
        compute_s=t.compute_s,
        memory_s=t.memory_s,
        time_s=t.time_s,
        bound=_bound(t.compute_s, t.memory_s, op.unit),
        attained_flops=cn.fwd.flops / t.time_s if t.time_s else 0.0,
        kernel=f.kernel,
        backward=back,
        total_time_s=t.total_s,
        share=t.total_s / busy if busy else 0.0,
        estimate_s=e.forward.time_s if e is not None else None,
        efficiency=t.time_s / e.forward.time_s if e is not None else None,
        estimate_reason=e.forward.reason if e is not None else None,
        total_estimate_s=e.total_s if e is not None else None,
    )


def build_report(
    costed: CostedGraph,
    hw: Hardware,
    how: Costing = DEFAULT_COSTING,
    only: frozenset[str] | None = None,
    advice: str | None = None,
) -> Report:
    """The report model of one workload on one target, costed `how` says (its peaks;
    with `how.kernels`, the kernel-aware estimate beside the roofline, estimate.py, a
    calibration on top). `only` keeps the ops of these perf-model kinds (e.g. GEMM and
    SDPA, as TraceLens's notebook counts); `advice` follows the warning when the model
    does not fit (compile.py finds a layout)."""
    peak, bandwidth = how.peak, how.bandwidth
    graph = costed.graph
    w, shape, facts = graph.workload, graph.shape, graph.facts
    par = shape.par
    groups = {g.name: g for g in graph.groups}
    kept = _only_kinds(costed, only) if only is not None else None
    shared: dict[OpRecord, _OpFacts] = {}  # equal ops share their shape, dtypes, kernel
    times = time_nodes(costed, hw, peak, bandwidth, kept)
    tot = totals(costed, times, hw, peak, advice)
    busy = tot.busy_s

    def share(t: float) -> float:
        return t / busy if busy else 0.0

    if how.estimated:
        engine = collectives_engine(graph, how.engine)
        estimates = estimate_nodes(times, hw, how.calibration, engine, how.moe_imbalance)
        tot = _with_estimate(tot, graph, times, estimates)
        ops = [
            _op_entry(t, groups, hw, busy, e, shared) for t, e in zip(times, estimates, strict=True)
        ]
    else:
        ops = [_op_entry(t, groups, hw, busy, None, shared) for t in times]
    main_peak, main_precision = matrix_peak(graph, hw, peak)
    return Report.trusted(
        model=ModelInfo.trusted(
            name=facts.name,
            title=facts.title,
            params_total=facts.params_total,
            params_active=facts.params_active,
            params_device=facts.device_dense + facts.device_experts,
        ),
        hardware=HardwareInfo.trusted(
            name=hw.name,
            title=hw.title,
            vendor=hw.vendor,
            arch=hw.arch,
            peak=peak,
            bandwidth=bandwidth,
            memory_bandwidth=hw.bandwidth(bandwidth),
            memory_capacity=hw.capacity,
            memory_basis=hw.capacity_basis,
            scaleup_bandwidth=hw.scaleup_per_direction,
            scaleup_domain=hw.scaleup_domain,
            scaleout_bandwidth=hw.scaleout_bandwidth,
            knee=main_peak / hw.bandwidth(bandwidth),
            knee_precision=main_precision,
        ),
        workload=WorkloadInfo.trusted(
            phase=w.phase.value,
            batch=shape.batch,
            seq=shape.seq,
            context=shape.n_kv,
            logits=None if shape.decode else ("all" if shape.logits_all else "last"),
            tokens=shape.T_job,
            prefix=shape.prefix,
            chunk=shape.chunk,
            prompt=shape.prompt,
            streams=dict(shape.streams),
            joined=shape.joined,
            label=shape.label,
            conventions=costed.conventions.value,
            layout=_layout_info(par),
        ),
        totals=tot,
        layers=_layers(ops, times, graph, share),
        kinds=_kinds(ops, times, share),
        kernels=_kernels(ops, share),
        ops=tuple(ops),
        notes=graph.notes,
    )


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


def fits(graph: OpGraph, hw: Hardware) -> bool:
    """Whether one device of the graph's layout holds everything the footprint counts."""
    return sum(footprint(graph).values()) <= hw.capacity


def footprint(graph: OpGraph) -> dict[str, float]:
    """Memory by kind: the model's (sized by lowering) and the activations the graph
    keeps alive; docs/report.md says what each counts."""
    return memory_parts(graph.facts, activation_bytes(graph))


def memory_parts(facts: ModelFacts, activations: float) -> dict[str, float]:
    """The footprint's parts: the model's facts, and the activations kept alive."""
    return {
        "weights": float(facts.weight_bytes),
        "kv_cache": float(facts.cache_bytes),
        "activations": float(activations),
        "gradients": float(facts.gradient_bytes),
        "optimizer_states": float(facts.optimizer_bytes),
    }


def activation_bytes(graph: OpGraph) -> float:
    """The activations alive at once: what training's backward keeps
    (`_training_activations`), or at inference the largest op's inputs and output."""
    if graph.shape.train:
        return _training_activations(graph)
    produced = {n.name: n.out_bytes for n in graph.nodes}
    activations = 0.0
    for n in graph.nodes:
        inputs = 0.0
        for i in set(n.inputs) if len(n.inputs) > 1 else n.inputs:
            inputs += produced.get(i, 0)
        alive = n.out_bytes + inputs
        if alive > activations:
            activations = alive
    return activations


def kept_for_backward(graph: OpGraph) -> dict[str, float]:
    """The bytes of the tensors the backward reads, by layer group, for every
    microbatch of the step (memory.kept_activations says which)."""
    return kept_activations(graph.nodes)


def _training_activations(graph: OpGraph) -> float:
    """What the backward needs kept (`kept_for_backward`), or under full recomputation
    each layer's input plus one layer's outputs, rebuilt during its backward
    (Korthikanti et al. 2022: 2·s·b·h per layer in 16-bit; 1/tp under sequence
    parallelism), of the microbatches in flight on the pipeline stage that holds the
    most: the first (`microbatches_in_flight`: it runs the most forwards before its
    first backward) or the last, which holds the head and its logits. The first stage is
    taken to hold as many layers as this (the last) stage, keeping what its layers keep
    on average, and one received residual a chunk as the last does (the embedding's
    output on its first chunk); its weights are in `model_facts`'s figures."""
    shape, facts = graph.shape, graph.facts
    par = shape.par
    m = par.microbatches
    last = microbatches_in_flight(m, par.pp, par.vpp, par.pp - 1)
    first = microbatches_in_flight(m, par.pp, par.vpp)
    kept = kept_for_backward(graph)
    model_level = kept.pop("model", 0.0) / m  # a microbatch's, as each below
    inputs = sum(n.out_bytes * n.count for n in graph.nodes if n.name == RECEIVED) / m
    if par.recompute != "full":
        stage = sum(kept.values()) / m  # the stage's layers, a microbatch
        if par.offload:  # the layers' sets a device holds while the rest are on the host
            stage = resident_bytes(layer_sets(graph.nodes, graph.groups, m), par.offload)
        return max((stage + model_level) * last, (stage + inputs) * first)
    counts = {g.name: g.count for g in graph.groups}
    layers = sum(counts[g] for g in kept)
    stream = layers * shape.T_seq * facts.width * float(bpe(facts.activations))
    one_layer = max((t / m / counts[g] for g, t in kept.items()), default=0.0)
    return max((stream + model_level) * last, (stream + inputs) * first) + one_layer


def microbatches_in_flight(m: int, pp: int, vpp: int, stage: int = 0) -> float:
    """The microbatches' activations pipeline `stage` (0 the first) holds at its peak,
    in microbatches of the whole stage. 1F1B (Megatron-LM's
    forward_backward_pipelining_without_interleaving): pp − stage − 1 warm-up forwards
    and one more before its first backward, min(m, pp − stage). Interleaved (vpp > 1,
    forward_backward_pipelining_with_interleaving): 2·(pp − stage − 1) + (vpp − 1)·pp
    warm-up chunk forwards and one more, at most all m·vpp of them (every forward first
    when m = pp), a chunk 1/vpp of the stage's layers: on the first stage
    min(m·vpp, vpp·pp + pp − 1)/vpp, pp + (pp − 1)/vpp once m > pp."""
    if vpp == 1:
        return min(m, pp - stage)
    if m == pp:  # Megatron-LM runs all warm-up forwards then
        return m
    return min(m * vpp, 2 * (pp - stage - 1) + (vpp - 1) * pp + 1) / vpp


def _only_kinds(costed: CostedGraph, only: frozenset[str]) -> frozenset[str]:
    """The op kinds `only` names, matched case-insensitively; a name that matches no op
    of this graph is an error naming the kinds present."""
    present = sorted({cn.node.op.kind for cn in costed.nodes})
    by_folded = {k.casefold(): k for k in present}
    unknown = sorted(k for k in only if k.casefold() not in by_folded)
    if unknown or not only:
        raise SpecError(
            f"--only names {', '.join(f'`{k}`' for k in unknown) or 'no kind'}, "
            "which matches no op of this workload",
            filename="modelcost",
            hint=f"kinds present: {', '.join(present)}",
        )
    return frozenset(by_folded[k.casefold()] for k in only)


def _aggregate(ops: list[OpEntry], times: list[NodeTime], key) -> dict[str, list[float]]:
    """[FLOPs, bytes, time] summed by `key(op)`, in first-seen order."""
    acc: dict[str, list[float]] = {}
    for o, t in zip(ops, times, strict=True):
        a = acc.get(key(o))
        if a is None:
            acc[key(o)] = [t.flops, t.bytes, t.total_s]
        else:
            a[0] += t.flops
            a[1] += t.bytes
            a[2] += t.total_s
    return acc


def _layers(ops: list[OpEntry], times: list[NodeTime], graph, share) -> tuple[LayerEntry, ...]:
    acc = _aggregate(ops, times, lambda o: o.group)
    return tuple(
        LayerEntry.trusted(
            group=g.name,
            block=g.block,
            layers=g.layer_label,
            count=g.count,
            flops=acc[g.name][0],
            bytes=acc[g.name][1],
            intensity=_intensity(acc[g.name][0], acc[g.name][1]),
            time_s=acc[g.name][2],
            share=share(acc[g.name][2]),
        )
        for g in graph.groups
        if g.name in acc
    )


def _kinds(ops: list[OpEntry], times: list[NodeTime], share) -> tuple[KindEntry, ...]:
    ranked = sorted(
        _aggregate(ops, times, lambda o: o.kind).items(), key=lambda kv: (-kv[1][2], kv[0])
    )
    return tuple(
        KindEntry.trusted(kind=k, flops=f, bytes=nb, time_s=t, share=share(t))
        for k, (f, nb, t) in ranked
    )


def _kernels(ops: list[OpEntry], share) -> tuple[KernelUse, ...]:
    """GEMMs grouped by the kernel that would serve them (none last), by time."""
    groups: dict[str | None, list[OpEntry]] = defaultdict(list)
    for o in ops:
        if o.kernel is not None:
            groups[o.kernel.id].append(o)
    rows = []
    for kid, members in groups.items():
        k = members[0].kernel
        assert k is not None  # grouped above by their kernel
        t = sum(o.total_time_s for o in members)
        rows.append(
            KernelUse.trusted(
                id=kid,
                title=k.title,
                url=k.url,
                tflops=k.tflops,
                measured=k.measured,
                ops=tuple(o.name for o in members),
                time_s=t,
                share=share(t),
            )
        )
    rows.sort(key=lambda r: (r.id is None, -r.time_s, r.id or ""))
    return tuple(rows)
