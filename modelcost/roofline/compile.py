"""The pipeline in one call: spec → lower → cost → roofline → report model."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import modelcost.language.spec as ir
from modelcost.base.bulk import in_bulk
from modelcost.base.settings import DEFAULT_ESTIMATE, DEFAULT_PEAK, EstimateMode, PeakMode
from modelcost.estimate.costing import DEFAULT_COSTING, Costing, costing
from modelcost.ir.graph import OpGraph, Phase, Workload, settled
from modelcost.ir.report import Report, Totals
from modelcost.language.resolve import load_spec
from modelcost.lowering.lower import lower
from modelcost.lowering.params import ParamCount
from modelcost.lowering.params import count_params as parameters
from modelcost.lowering.validate import check_imbalance
from modelcost.perfmodel import Conventions
from modelcost.targets.hardware import Hardware, load_hardware

from .advice import fitting_advice
from .cost import cost
from .estimated import StageStep, estimated, served_stage
from .footprint import fits
from .roofline import build_report
from .step import totals
from .timing import time_nodes

if TYPE_CHECKING:
    from modelcost.estimate.calibration import Calibration


@in_bulk
def compile_report(
    spec: ir.Spec | str | Path,
    hw: Hardware | str | Path,
    workload: Workload | Phase | str = Phase.prefill,
    conventions: Conventions | str = Conventions.modelcost,
    peak: PeakMode = DEFAULT_PEAK,
    bandwidth: PeakMode = DEFAULT_PEAK,
    only: frozenset[str] | None = None,
    advise: bool = True,
    calibration: Calibration | None = None,
    estimate: EstimateMode = DEFAULT_ESTIMATE,
    how: Costing | None = None,
) -> Report:
    """The report of `spec` (a Spec, or the path of a `.model` file) on `hw` (a Hardware,
    a shipped target's name such as `"h100"`, or a `.hw` file) for `workload` (a
    Workload, or a phase name for its defaults: `"decode"` is batch 1, context 2048).
    With `advise`, a model that does not fit is told what would make it fit
    (fitting_advice);
    `estimate="kernels"` adds the kernel-aware estimate beside the roofline; a
    `calibration` (calibration.py) applies a machine's measurements on top of it (and
    implies the estimate). `how`, a Costing, says all of these at once (in their place)."""
    spec, hw = as_spec(spec), as_hardware(hw)
    if not isinstance(workload, Workload):
        workload = Workload(Phase(workload))
    if how is None:
        how = costing(conventions, peak, bandwidth, estimate, calibration)
    workload = settled(workload, how.conventions)
    check_imbalance(spec, how.moe_imbalance)
    graph = lower(spec, workload)
    advice = None if not advise or fits(graph, hw) else fitting_advice(spec, hw, workload, how)
    return build_report(cost(graph, how.conventions), hw, how, only, advice)


def as_spec(spec: ir.Spec | str | Path) -> ir.Spec:
    """The one rule of every entry point of the API: a Spec, or the path of a `.model`
    file (its errors are SpecErrors, as on the command line)."""
    if isinstance(spec, ir.Spec):
        return spec
    if isinstance(spec, str | Path):
        return load_spec(spec)
    raise TypeError(f"expected a Spec or the path of a .model file, got {type(spec).__name__}")


def as_hardware(hw: Hardware | str | Path) -> Hardware:
    """A Hardware, a shipped target's name (`"h100"`) or the path of a `.hw` file."""
    if isinstance(hw, Hardware):
        return hw
    if isinstance(hw, str | Path):
        return load_hardware(hw)
    raise TypeError(f"expected a Hardware, a target's name or a .hw path, got {type(hw).__name__}")


def count_params(spec: ir.Spec | str | Path) -> ParamCount:
    """The model's parameters (params.count_params) of a Spec or a `.model` path."""
    return parameters(as_spec(spec))


@in_bulk
def compile_totals(
    spec: ir.Spec, hw: Hardware, workload: Workload, how: Costing = DEFAULT_COSTING
) -> tuple[OpGraph, Totals]:
    """The same pipeline as `compile_report`, stopping at the totals: what a sweep row
    or a serving figure reads, without the report's per-op, layer and kind entries
    (the totals are the very ones `compile_report` puts in its report, the kernels'
    estimate among them with `how.kernels` or a calibration)."""
    check_imbalance(spec, how.moe_imbalance)
    costed = cost(lower(spec, settled(workload, how.conventions)), how.conventions)
    times = time_nodes(costed, hw, how.peak, how.bandwidth)
    tot = totals(costed, times, hw, how.peak)
    if how.estimated:
        tot = estimated(costed, times, tot, hw, how.calibration, how.engine, how.moe_imbalance)
    return costed.graph, tot


def compile_stage(
    spec: ir.Spec, hw: Hardware, workload: Workload, how: Costing = DEFAULT_COSTING
) -> StageStep:
    """The same pipeline as `compile_totals`, stopping at the report's pipeline stage
    split into its own work and its p2p receive (estimated.served_stage): what a served
    decode pipeline's TPOT is composed from."""
    check_imbalance(spec, how.moe_imbalance)
    costed = cost(lower(spec, settled(workload, how.conventions)), how.conventions)
    times = time_nodes(costed, hw, how.peak, how.bandwidth)
    return served_stage(costed, times, hw, how)
