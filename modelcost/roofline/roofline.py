"""Stage 5, roofline: a costed graph on a hardware target → the report model.

time(op) = max(flops / peak(unit, precision), bytes / bandwidth); the op is compute-bound
when the compute time is at least the memory time (TraceLens's rule). A weight-only GEMM
also dequantizes its weights on the vector units: its compute time is the larger of its
matrix math and that work. Collectives move
their bytes at the scale-up bandwidth. Totals, layer groups, op kinds, per-token
figures, the MFU bound and the memory footprint are all computed here.

Its parts: timing.py (an op's time), footprint.py (what a device holds), step.py (a
step's time and totals) and estimated.py (the kernel-aware estimate beside it); this
module builds the report model from them.
"""

from __future__ import annotations

from collections import defaultdict

from modelcost.base.errors import SpecError
from modelcost.base.record import Record
from modelcost.estimate.costing import DEFAULT_COSTING, Costing
from modelcost.estimate.kernels import serve
from modelcost.ir.graph import OpGraph
from modelcost.ir.report import (
    HardwareInfo,
    KernelChoice,
    KernelUse,
    KindEntry,
    LayerEntry,
    ModelInfo,
    OpEntry,
    PassTiming,
    Report,
    WorkloadInfo,
)
from modelcost.perfmodel import GemmOp, GroupedGemmOp, OpRecord
from modelcost.targets.hardware import Hardware

from .cost import CostedGraph
from .estimated import (
    NodeEstimate,
    _layout_info,
    _with_estimate,
    collectives_engine,
    estimate_nodes,
)
from .step import matrix_peak, totals
from .timing import NodeTime, _bound, _intensity, _shape_params, time_nodes


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


def _backward(t: NodeTime, e: NodeEstimate | None) -> PassTiming | None:
    """An op's backward pass as the report says it, where it has one."""
    cn = t.costed
    if t.back is None or cn.bwd is None:
        return None
    bc, bm, tb = t.back
    estimated = e.backward if e is not None else None
    return PassTiming.trusted(
        flops=float(cn.bwd.flops),
        bytes=float(cn.bwd.bytes),
        intensity=_intensity(cn.bwd.flops, cn.bwd.bytes),
        compute_s=bc,
        memory_s=bm,
        time_s=tb,
        bound=_bound(bc, bm, cn.node.op.unit),
        estimate_s=estimated.time_s if estimated is not None else None,
        estimate_reason=estimated.reason if estimated is not None else None,
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
        backward=_backward(t, e),
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
    facts = graph.facts
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
    return Report.trusted(
        model=ModelInfo.trusted(
            name=facts.name,
            title=facts.title,
            params_total=facts.params_total,
            params_active=facts.params_active,
            params_device=facts.device_dense + facts.device_experts,
        ),
        hardware=_hardware_info(graph, hw, how),
        workload=_workload_info(costed),
        totals=tot,
        layers=_layers(ops, times, graph, share),
        kinds=_kinds(ops, times, share),
        kernels=_kernels(ops, share),
        ops=tuple(ops),
        notes=graph.notes,
    )


def _hardware_info(graph: OpGraph, hw: Hardware, how: Costing) -> HardwareInfo:
    """The target as the report says it: its figures at the peaks `how` reads, and the
    knee of the graph's main matrix precision."""
    peak, bandwidth = how.peak, how.bandwidth
    main_peak, main_precision = matrix_peak(graph, hw, peak)
    return HardwareInfo.trusted(
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
    )


def _workload_info(costed: CostedGraph) -> WorkloadInfo:
    """The workload as lowered: its token geometry, conventions and layout."""
    w, shape = costed.graph.workload, costed.graph.shape
    return WorkloadInfo.trusted(
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
        layout=_layout_info(shape.par),
    )


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
