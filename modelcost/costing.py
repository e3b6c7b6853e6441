"""How a workload is costed, beside what it is: one record carried from an entry point
(the API, a command, the site) through compile, sweep and serve, instead of the same
settings passed one by one down every call.

`conventions` are the counting conventions (perfmodel.Conventions); `peak` and
`bandwidth` the peaks the roofline reads; `kernels` adds the kernel-aware estimate
beside the roofline, with a `calibration` on top and collectives as `engine` runs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .engines import DEFAULT_ENGINE
from .perfmodel import Conventions
from .record import Record
from .settings import DEFAULT_ESTIMATE, DEFAULT_PEAK, EstimateMode, PeakMode, estimate_mode

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

    @property
    def estimated(self) -> bool:
        """Whether the kernel-aware estimate joins the roofline (a calibration implies it)."""
        return self.kernels or self.calibration is not None

    def on(self, hw_name: str) -> Costing:
        """This costing for one target: a calibration applies to its own target only."""
        cal = self.calibration
        if cal is None or cal.hardware == hw_name:
            return self
        return Costing(self.conventions, self.peak, self.bandwidth, self.kernels, None, self.engine)


def costing(
    conventions: Conventions | str = Conventions.modelcost,
    peak: PeakMode = DEFAULT_PEAK,
    bandwidth: PeakMode = DEFAULT_PEAK,
    estimate: EstimateMode = DEFAULT_ESTIMATE,
    calibration: Calibration | None = None,
    engine: str = DEFAULT_ENGINE,
) -> Costing:
    """An entry point's options as one Costing: `estimate` (and a calibration, which
    implies the kernels' estimate: settings.estimate_mode) decide `kernels`."""
    kernels = estimate_mode(estimate, calibration) == "kernels"
    return Costing(Conventions(conventions), peak, bandwidth, kernels, calibration, engine)


# modelcost's conventions, datasheet peaks, the roofline alone: what an unset option means
DEFAULT_COSTING = Costing()
