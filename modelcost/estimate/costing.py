"""How a workload is costed, beside what it is: one record carried from an entry point
(the API, a command, the site) through compile, sweep and serve, instead of the same
settings passed one by one down every call.

`conventions` are the counting conventions (perfmodel.Conventions); `peak` and
`bandwidth` the peaks the roofline reads; `kernels` adds the kernel-aware estimate
beside the roofline, with a `calibration` on top and collectives as `engine` runs them;
`moe_imbalance` is the hottest expert's (and expert rank's) routed load over the mean
the estimate takes (None: the documented default, specs/kernels/library.json `moe`);
the roofline, a bound, keeps the mean (docs/conventions.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelcost.base.record import Record
from modelcost.base.settings import (
    DEFAULT_ESTIMATE,
    DEFAULT_PEAK,
    EstimateMode,
    PeakMode,
    estimate_mode,
)
from modelcost.perfmodel import Conventions

from .engines import DEFAULT_ENGINE

if TYPE_CHECKING:
    from .calibration import Calibration


class Costing(Record, frozen=True):
    """The settings every stage after lowering reads, said once."""

    conventions: Conventions = Conventions.modelcost
    peak: PeakMode = DEFAULT_PEAK
    bandwidth: PeakMode = DEFAULT_PEAK
    kernels: bool = False
    calibration: Calibration | None = None
    engine: str = DEFAULT_ENGINE
    moe_imbalance: float | None = None

    def __post_init__(self) -> None:
        x = self.moe_imbalance
        if x is not None and not (isinstance(x, int | float) and 1 <= x < float("inf")):
            raise ValueError(f"moe_imbalance is a load over the mean, at least 1: got {x!r}")

    @property
    def estimated(self) -> bool:
        """Whether the kernel-aware estimate joins the roofline (a calibration implies it)."""
        return self.kernels or self.calibration is not None

    def on(self, hw_name: str) -> Costing:
        """This costing for one target: a calibration applies to its own target only."""
        cal = self.calibration
        if cal is None or cal.hardware == hw_name:
            return self
        return Costing(self.conventions, self.peak, self.bandwidth, self.kernels, None,
                       self.engine, self.moe_imbalance)  # fmt: skip


def costing(
    conventions: Conventions | str = Conventions.modelcost,
    peak: PeakMode = DEFAULT_PEAK,
    bandwidth: PeakMode = DEFAULT_PEAK,
    estimate: EstimateMode = DEFAULT_ESTIMATE,
    calibration: Calibration | None = None,
    engine: str = DEFAULT_ENGINE,
    moe_imbalance: float | None = None,
) -> Costing:
    """An entry point's options as one Costing: `estimate` (and a calibration, which
    implies the kernels' estimate: settings.estimate_mode) decide `kernels`."""
    kernels = estimate_mode(estimate, calibration) == "kernels"
    return Costing(
        Conventions(conventions), peak, bandwidth, kernels, calibration, engine, moe_imbalance
    )


# modelcost's conventions, datasheet peaks, the roofline alone: what an unset option means
DEFAULT_COSTING = Costing()
