"""Stage 5, roofline: a costed graph on a hardware target → the report model.

time(op) = max(flops / peak(unit, precision), bytes / bandwidth); the op is compute-bound
when the compute time is at least the memory time (TraceLens's rule). Collectives move
their bytes at the scale-up bandwidth. Totals, layer groups, op kinds, per-token
figures, the MFU bound and the memory footprint are all computed here.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Literal

from .cost import CostedGraph
from .dtypes import DTYPES
from .errors import SpecError
from .graph import OpGraph
from .hardware import Hardware
from .kernels import serve
from .options import DEFAULT_PEAK
from .perfmodel import Cost, GemmOp, GroupedGemmOp, OpRecord, Unit
from .report import (
    Bound,
    HardwareInfo,
    KernelUse,
    KindEntry,
    LayerEntry,
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


@dataclass(frozen=True, slots=True)
class Timing:
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
    if op.unit is Unit.network:
        flops, used, source = hw.peak("vector", op.precision, peak)
        return Timing(c.flops / flops, c.bytes / hw.scaleup_per_direction, flops, used, source)
    unit: Literal["matrix", "vector"] = "matrix" if op.unit is Unit.matrix else "vector"
    flops, used, source = hw.peak(unit, op.precision, peak)
    return Timing(c.flops / flops, c.bytes / hw.bandwidth(bandwidth), flops, used, source)


def _bound(t: Timing, op: OpRecord) -> Bound:
    if t.compute_s >= t.memory_s:
        return "compute"
    return "network" if op.unit is Unit.network else "memory"


def _intensity(flops: float, nbytes: float) -> float:
    return flops / nbytes if nbytes else 0.0


def _pass(c: Cost, t: Timing, op: OpRecord) -> PassTiming:
    return PassTiming(
        flops=float(c.flops),
        bytes=float(c.bytes),
        intensity=_intensity(c.flops, c.bytes),
        compute_s=t.compute_s,
        memory_s=t.memory_s,
        time_s=t.time_s,
        bound=_bound(t, op),
    )


def _shape_params(op: OpRecord) -> dict:
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in op.shape().items()}


def build_report(
    costed: CostedGraph,
    hw: Hardware,
    peak: PeakMode = DEFAULT_PEAK,
    bandwidth: PeakMode = DEFAULT_PEAK,
    only: frozenset[str] | None = None,
) -> Report:
    """The report model of one workload on one target. `only` keeps the ops of these
    perf-model kinds (e.g. GEMM and SDPA, as TraceLens's notebook counts)."""
    graph = costed.graph
    w = graph.workload
    groups = {g.name: g for g in graph.groups}
    kept = _only_kinds(costed, only) if only is not None else None
    rows = []
    for cn in costed.nodes:
        op = cn.node.op
        if kept is not None and op.kind not in kept:
            continue
        tf = time_op(cn.fwd, op, hw, peak, bandwidth)
        back = None
        tb_time = 0.0
        if cn.bwd is not None:
            tb = time_op(cn.bwd, op, hw, peak, bandwidth)
            back, tb_time = _pass(cn.bwd, tb, op), tb.time_s
        rows.append((cn, tf, back, cn.node.count * (tf.time_s + tb_time)))
    step = sum(r[3] for r in rows)

    def share(t: float) -> float:
        return t / step if step else 0.0

    ops = []
    for cn, tf, back, total in rows:
        n, op = cn.node, cn.node.op
        ops.append(
            OpEntry(
                name=n.name,
                layer=groups[n.group].layers[0]
                if n.group in groups and groups[n.group].layers
                else None,
                group=n.group,
                layers=groups[n.group].layer_label if n.group in groups else "",
                kind=op.kind,
                count=n.count,
                shape=_shape_params(op),
                shape_label=op.describe(),
                dtype=op.precision,
                dtypes={k: v.value for k, v in op.operand_dtypes().items()},
                unit=op.unit.value,
                peak_flops=tf.peak_flops,
                peak_precision=tf.peak_precision,
                peak_source=tf.peak_source,
                flops=float(cn.fwd.flops),
                bytes=float(cn.fwd.bytes),
                intensity=_intensity(cn.fwd.flops, cn.fwd.bytes),
                compute_s=tf.compute_s,
                memory_s=tf.memory_s,
                time_s=tf.time_s,
                bound=_bound(tf, op),
                attained_flops=cn.fwd.flops / tf.time_s if tf.time_s else 0.0,
                kernel=serve(op, hw.arch, hw.compute_units)
                if isinstance(op, GemmOp | GroupedGemmOp)
                else None,
                backward=back,
                total_time_s=total,
                share=share(total),
            )
        )
    costs = [_step_cost(o) for o in ops]  # each op's cost summed once, used thrice
    everything = sum(costs, Cost())
    flops, nbytes = everything.flops, everything.bytes
    compute_bound = sum(
        o.count * (o.time_s if o.bound == "compute" else 0)
        + o.count * (o.backward.time_s if o.backward and o.backward.bound == "compute" else 0)
        for o in ops
    )
    shape = graph.shape
    tokens = shape.T
    per_token = PerToken(
        tokens_per_step=tokens,
        ms_per_step=step * 1e3,
        ms_per_token=step * 1e3 if shape.decode else step * 1e3 / tokens,
        tokens_per_s=tokens / step if step else 0.0,
    )
    facts = graph.facts
    main_peak, main_precision, _ = hw.peak("matrix", DTYPES[facts.activations].precision, peak)
    mem = footprint(graph)
    total_mem = sum(mem.values())
    fits = total_mem <= hw.memory
    warning = None
    if not fits:
        warning = (
            f"needs {total_mem / 1e9:,.1f} GB but {hw.title} has {hw.memory / 1e9:,.0f} GB: "
            "it does not fit on one device"
        )
    return Report(
        model=ModelInfo(
            name=facts.name,
            title=facts.title,
            params_total=facts.params_total,
            params_active=facts.params_active,
        ),
        hardware=HardwareInfo(
            name=hw.name,
            title=hw.title,
            vendor=hw.vendor,
            arch=hw.arch,
            peak=peak,
            bandwidth=bandwidth,
            memory_bandwidth=hw.bandwidth(bandwidth),
            memory_capacity=hw.memory,
            scaleup_bandwidth=hw.scaleup_per_direction,
            knee=main_peak / hw.bandwidth(bandwidth),
            knee_precision=main_precision,
        ),
        workload=WorkloadInfo(
            phase=w.phase.value,
            batch=shape.B,
            seq=shape.S,
            context=shape.n_kv,
            logits=None if shape.decode else ("all" if shape.logits_all else "last"),
            tokens=tokens,
            label=shape.label,
            conventions=costed.conventions.value,
        ),
        totals=Totals(
            flops=flops,
            bytes=nbytes,
            intensity=_intensity(flops, nbytes),
            time_s=step,
            compute_bound_s=compute_bound,
            memory_bound_s=step - compute_bound,
            compute_share=compute_bound / step if step else 0.0,
            bound="compute" if compute_bound >= step - compute_bound else "memory",
            per_token=per_token,
            mfu_bound=flops / (step * main_peak) if step else 0.0,
            memory=Memory(**mem, total=total_mem, capacity=hw.memory, fits=fits, warning=warning),
        ),
        layers=_layers(ops, costs, graph, share),
        kinds=_kinds(ops, costs, share),
        kernels=_kernels(ops, share),
        ops=tuple(ops),
        notes=graph.notes,
    )


def footprint(graph: OpGraph) -> dict[str, float]:
    """Memory by kind: the model's (sized by lowering) and the activations the graph
    keeps alive; docs/report.md says what each counts."""
    facts = graph.facts
    produced = {n.name: n.out_bytes for n in graph.nodes}
    if graph.shape.train:  # everything the backward needs is kept (no recomputation)
        activations = sum(n.out_bytes * n.count for n in graph.nodes)
    else:  # the largest op's inputs and output alive at once
        activations = max(
            (n.out_bytes + sum(produced.get(i, 0) for i in set(n.inputs)) for n in graph.nodes),
            default=0.0,
        )
    return {
        "weights": facts.weight_bytes,
        "kv_cache": facts.cache_bytes,
        "activations": activations,
        "gradients": facts.gradient_bytes,
        "optimizer_states": facts.optimizer_bytes,
    }


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


def _step_cost(o: OpEntry) -> Cost:
    """All copies of an op, both passes."""
    back = Cost(o.backward.flops, o.backward.bytes) if o.backward else Cost()
    return (Cost(o.flops, o.bytes) + back) * o.count


def _aggregate(ops: list[OpEntry], costs: list[Cost], key) -> dict[str, tuple[Cost, float]]:
    """Cost and time summed by `key(op)`, in first-seen order."""
    acc: dict[str, tuple[Cost, float]] = {}
    for o, cost in zip(ops, costs, strict=True):
        k = key(o)
        c, t = acc.get(k, (Cost(), 0.0))
        acc[k] = (c + cost, t + o.total_time_s)
    return acc


def _layers(ops: list[OpEntry], costs: list[Cost], graph, share) -> tuple[LayerEntry, ...]:
    acc = _aggregate(ops, costs, lambda o: o.group)
    return tuple(
        LayerEntry(
            group=g.name,
            block=g.block,
            layers=g.layer_label,
            count=g.count,
            flops=acc[g.name][0].flops,
            bytes=acc[g.name][0].bytes,
            intensity=_intensity(acc[g.name][0].flops, acc[g.name][0].bytes),
            time_s=acc[g.name][1],
            share=share(acc[g.name][1]),
        )
        for g in graph.groups
        if g.name in acc
    )


def _kinds(ops: list[OpEntry], costs: list[Cost], share) -> tuple[KindEntry, ...]:
    ranked = sorted(
        _aggregate(ops, costs, lambda o: o.kind).items(), key=lambda kv: (-kv[1][1], kv[0])
    )
    return tuple(
        KindEntry(kind=k, flops=c.flops, bytes=c.bytes, time_s=t, share=share(t))
        for k, (c, t) in ranked
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
            KernelUse(
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
