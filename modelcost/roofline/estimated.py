"""The kernel-aware estimate beside the roofline: each node at the rate its kernel or
collective reaches on the part, the share of the SMs a data-parallel sync holds, the
step's totals with the estimate in them, and a served pipeline stage split into its work
and its receive.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from modelcost.base.record import Record, asdict, replace
from modelcost.estimate.costing import DEFAULT_COSTING, Costing
from modelcost.estimate.engines import DEFAULT_ENGINE
from modelcost.ir.graph import Node, OpGraph, Parallel
from modelcost.ir.report import LayoutInfo, Totals
from modelcost.perfmodel import CollectiveOp
from modelcost.targets.hardware import Hardware

from .cost import CostedGraph
from .step import SCALARS, Scalars, Sums, column, step_sums, step_time
from .timing import LINKS, NodeTime

if TYPE_CHECKING:
    from modelcost.estimate.calibration import Calibration
    from modelcost.estimate.estimate import Estimate


def _with_estimate(
    tot: Totals, graph: OpGraph, times: list[NodeTime], estimates: list[NodeEstimate]
) -> Totals:
    """The totals with the step as the kernels run it: the same composition as the
    roofline's step (overlap, bubble), from the estimated times, the compute beside a
    collective slowed by the SMs it holds."""
    sums = step_sums([column(t, e.total_s, e.held_s)
                      for t, e in zip(times, estimates, strict=True)])  # fmt: skip
    return with_estimate_step(tot, estimate_step(sums, graph.shape.par))


def estimate_step(sums: Sums, par: Parallel, xp: Scalars = SCALARS) -> Any:
    """The step as the kernels run it, from the estimate's sums: the roofline's
    composition (overlap, bubble) with the compute the collectives' SMs take (arrays of
    a sweep's points, with `xp` their operations: grid.py)."""
    return step_time(sums.busy, sums.once, sums.comm, par.pp, par.microbatches, par.overlap,
                     par.vpp, sums.beside, sums.held, xp)[0]  # fmt: skip


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
