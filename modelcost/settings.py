"""The settings the domain reads, declared once: which peaks a roofline uses, how step
times are read (and their defaults), how a count is written, and the bounds of a sweep,
a request mix and an arrival run. The Python API reads them here; options.py (the
command line's flag table) takes its defaults, choices and bounds from here too.
"""

from __future__ import annotations

from typing import Literal

PeakMode = Literal["datasheet", "achievable"]  # which figures a roofline uses
PEAK_MODES: tuple[PeakMode, ...] = ("datasheet", "achievable")
DEFAULT_PEAK: PeakMode = "datasheet"
# what a device's capacity rests on (hardware.Hardware.capacity_basis)
CapacityBasis = Literal["driver-reported", "datasheet"]
# how a step's time is read: the roofline (a bound) alone, or the kernels' estimate
# (estimate.py) beside it; `serve` plans with the estimate, `compile` shows the bound
EstimateMode = Literal["roofline", "kernels"]
ESTIMATE_MODES: tuple[EstimateMode, ...] = ("roofline", "kernels")
DEFAULT_ESTIMATE: EstimateMode = "roofline"  # compile, diff, sweep, site: the bound
DEFAULT_SERVE_ESTIMATE: EstimateMode = "kernels"  # serve plans with what it will get
# what `serve --search` optimises over the layouts meeting the targets: the most output
# tokens/s per device (NVIDIA AIConfigurator's objective), the fewest devices, or the
# lowest TPOT (the most output tokens/s per user)
Objective = Literal["throughput-per-device", "devices", "latency"]
OBJECTIVES: tuple[Objective, ...] = ("throughput-per-device", "devices", "latency")
DEFAULT_OBJECTIVE: Objective = "throughput-per-device"


def estimate_mode(mode: object, calibration: object = None) -> EstimateMode:
    """`mode` if it is one of ESTIMATE_MODES (the API's check; argparse has choices);
    a `calibration` sits on the kernels' estimate, so it implies `kernels`."""
    if calibration is not None and mode in ESTIMATE_MODES:
        return "kernels"
    if mode == "roofline" or mode == "kernels":
        return mode
    raise ValueError(f"estimate must be one of {', '.join(ESTIMATE_MODES)}, got {mode!r}")


SUFFIXES = {"K": 1024, "M": 1024**2}  # binary, as context lengths are quoted (128K)


def count(text: str) -> int:
    """A count: `8`, `2048`, `128_000`, `128K` (= 131,072), `1M`; a ValueError saying
    what was expected if `text` is not a positive integer."""
    body = text.strip().replace("_", "")
    scale = SUFFIXES.get(body[-1:].upper(), 1) if body else 1
    if scale > 1:
        body = body[:-1]
    try:
        value = int(body) * scale
    except ValueError:
        raise ValueError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise ValueError(f"expected a positive integer, got {value}")
    return value


# points one sweep may have (so also values one option may take). Each point is about
# 0.4–1 ms of work and a row of about 3.6 kB held until the sweep is written (measured
# with tracemalloc on llama3-8b decode rows): 100,000 points is a minute or two and
# under 400 MB.
MAX_POINTS = 100_000
# A sweep written as it runs (--format csv, jsonl, parquet) holds no row after writing
# it and makes its points one chunk at a time, so its memory does not grow with its size
# (benchmarks/bench.py measures a 1,000,000-point one); 10,000,000 points is a few hours
# of work: the bound on how long one command may run.
MAX_STREAMED = 10_000_000

MAX_MIX_CLASSES = 1_000  # request classes in one mix: each is a serving search (~4 ms)
SHARES = (1e-9, 1e9)  # a class's share: a weight, normalised over the mix


# ---- `serve --rate`: requests arriving over time (arrivals.py)

DEFAULT_REQUESTS = 1_000  # requests one `--rate` run simulates
MAX_REQUESTS = 100_000  # the most one run takes
# A run's bookkeeping (measured, arrivals.run with a constant step time): about 6 µs a
# step plus 0.3 µs per running sequence a step, and `serve --rate` runs twice (the
# estimate, then the bound). Two caps hold a run to a few seconds: requests × osl (the
# sequence-steps) is refused above MAX_OUTPUT_TOKENS before it starts, and a run that
# reaches MAX_STEPS steps (few sequences at once, long outputs) stops there and says so,
# its figures over the requests that finished.
MAX_OUTPUT_TOKENS = 5_000_000
MAX_STEPS = 500_000
# arrival rates (requests/s) a run takes: below 1e-3/s arrival times reach 1e6 s for a
# thousand requests, where a float still resolves a microsecond step (2^-52 × 1e6 s ≈
# 0.2 ns); above 1e6/s every request arrives at once, as it would at any higher rate
RATES = (1e-3, 1e6)
