"""The two roofs one op runs under on a device: its compute peak (for its unit and
precision) and its bytes/s. One rule for the roofline, the calibration and the measured
files, which read a measurement against the same roofs."""

from __future__ import annotations

from typing import Literal

from modelcost.base.errors import SpecError
from modelcost.base.record import Record
from modelcost.base.settings import PeakMode
from modelcost.perfmodel import Unit

from .hardware import Hardware


class Roof(Record, frozen=True):
    """The two roofs one op runs under: its compute peak and its bytes/s."""

    peak_flops: float
    peak_precision: str
    peak_source: PeakMode
    bytes_per_s: float


def roof(unit: Unit, precision: str, hw: Hardware, peak: PeakMode, bandwidth: PeakMode) -> Roof:
    """Math on `unit` at `precision`; network ops move their bytes at the scale-up
    bandwidth and do their (reduction) math on the vector units; host copies move
    theirs at the host link's."""
    if unit is Unit.network:
        flops, used, source = hw.peak("vector", precision, peak)
        return Roof(flops, used, source, hw.scaleup_per_direction)
    if unit is Unit.host:  # activation offloading's copies: the link to host memory
        if hw.host_bandwidth is None:
            raise SpecError(
                f"activation offloading copies over the host link, and {hw.name} states "
                "no `host_bandwidth`",
                filename="modelcost",
                hint="add `host_bandwidth` (per direction) to the hardware file, or leave "
                "--offload out",
            )
        flops, used, source = hw.peak("vector", precision, peak)
        return Roof(flops, used, source, hw.host_bandwidth)
    kind: Literal["matrix", "vector"] = "matrix" if unit is Unit.matrix else "vector"
    flops, used, source = hw.peak(kind, precision, peak)
    return Roof(flops, used, source, hw.bandwidth(bandwidth))
