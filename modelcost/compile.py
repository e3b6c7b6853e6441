"""The pipeline in one call: spec → lower → cost → roofline → report model."""

from __future__ import annotations

from pathlib import Path

from . import spec as ir
from .bulk import in_bulk
from .cost import cost
from .graph import Phase, Workload
from .hardware import Hardware, load_hardware
from .lower import lower
from .options import DEFAULT_PEAK
from .perfmodel import Conventions
from .report import PeakMode, Report
from .resolve import load_spec
from .roofline import build_report


@in_bulk
def compile_report(
    spec: ir.Spec | str | Path,
    hw: Hardware | str | Path,
    workload: Workload | Phase | str = Phase.prefill,
    conventions: Conventions | str = Conventions.modelcost,
    peak: PeakMode = DEFAULT_PEAK,
    bandwidth: PeakMode = DEFAULT_PEAK,
    only: frozenset[str] | None = None,
) -> Report:
    """The report of `spec` (a Spec, or the path of a `.model` file) on `hw` (a Hardware,
    a shipped target's name such as `"h100"`, or a `.hw` file) for `workload` (a
    Workload, or a phase name for its defaults: `"decode"` is batch 1, context 2048)."""
    if not isinstance(spec, ir.Spec):
        spec = load_spec(spec)
    if not isinstance(hw, Hardware):
        hw = load_hardware(hw)
    if not isinstance(workload, Workload):
        workload = Workload(Phase(workload))
    graph = lower(spec, workload)
    return build_report(cost(graph, Conventions(conventions)), hw, peak, bandwidth, only)
