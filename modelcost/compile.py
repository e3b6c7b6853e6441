"""The pipeline in one call: spec → lower → cost → roofline → report model."""

from __future__ import annotations

from . import spec as ir
from .cost import cost
from .graph import Workload
from .hardware import Hardware
from .lower import lower
from .perfmodel import Conventions
from .report import Report
from .roofline import PeakMode, build_report


def compile_report(
    spec: ir.Spec,
    hw: Hardware,
    workload: Workload,
    conventions: Conventions = Conventions.modelcost,
    peak: PeakMode = "datasheet",
    bandwidth: PeakMode = "datasheet",
    only: frozenset[str] | None = None,
) -> Report:
    graph = lower(spec, workload)
    return build_report(spec, cost(graph, conventions), hw, peak, bandwidth, only)
