"""The settings the domain reads, declared once: which peaks a roofline uses, how step
times are read (and their defaults), how a count is written, how memory held is said
(in GiB, as drivers and datasheets count it), and the bounds of a sweep,
a request mix and an arrival run. The Python API reads them here; options.py (the
command line's flag table) takes its defaults, choices and bounds from here too.
"""

from __future__ import annotations

import re
from fractions import Fraction
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
DEFAULT_SERVE_ESTIMATE: EstimateMode = "kernels"  # serve and train plan with what they will get
# `modelcost train`: the micro-batch sizes (sequences a microbatch, per replica) its
# search tries unless given, and the layouts its table shows
TRAIN_MICRO_BATCHES: tuple[int, ...] = (1, 2, 4)
TRAIN_TOP = 10
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


# The bound on a size or count anywhere: the language's on a dimension (expressions.MAX_DIM)
# and the command line's and the API's on a count (batch, lengths, ranks, microbatches):
# 2**40 = 1,099,511,627,776, beyond any model or workload, and far from where a
# product of a few such numbers leaves a float's exact integers behind.
MAX_SIZE = 2**40

# Memory held (weights, KV cache, activations, a device's capacity) is said in binary
# units, as the drivers (nvidia-smi, rocm-smi: MiB) and the vendors' capacities count it:
# an H100 "80GB" is 80 GiB of HBM of which nvidia-smi reports 81,559 MiB, more than 80e9
# bytes. Bytes moved stay decimal (TB), as bandwidths are quoted (TB/s).
_BINARY = ((2**60, "Ei"), (2**50, "Pi"), (2**40, "Ti"), (2**30, "Gi"), (2**20, "Mi"),
           (2**10, "Ki"))  # fmt: skip
GIB = 2**30


def held(nbytes: float, digits: int = 3) -> str:
    """Memory held, binary-prefixed: `107 GiB`, `512 KiB`, `140.4 GiB` (digits=4)."""
    for scale, prefix in _BINARY:
        if abs(nbytes) >= scale:
            return f"{nbytes / scale:.{digits}g} {prefix}B"
    return f"{nbytes:.{digits}g} B"


# Size suffixes, one meaning everywhere: a `.model` file's numbers (parse.number_value)
# and every count on the command line (`count`). K, M, G, T are powers of 1000; Ki, Mi,
# Gi, Ti of 1024 (`--context 128Ki` is 131,072; `128K` is 128,000). Longest first.
SIZE_SUFFIXES = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "K": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
}


def bounded(name: str, value: object, least: int = 1) -> int:
    """`value` if it is a whole number from `least` to MAX_SIZE, else a ValueError
    naming `name` and the bound (the API's check of a count)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        what = "a positive integer" if least == 1 else "a whole number"
        raise ValueError(f"{name} must be {what}, got {value!r}")
    if value > MAX_SIZE:
        raise ValueError(f"{name} must be at most {MAX_SIZE:,} (2**40, the bound on a size), "
                         f"got {value:,}")  # fmt: skip
    return value


def count(text: str) -> int:
    """A count: `8`, `2048`, `128_000`, `4K` (= 4,000), `128Ki` (= 131,072), `1.5M`,
    the suffixes meaning what they mean in a `.model` file (SIZE_SUFFIXES); a
    ValueError saying what was expected if `text` is not a positive integer up to
    MAX_SIZE."""
    if text.isdigit() and text.isascii() and len(text) < 13:  # the common case, at once
        plain = int(text)
        if 0 < plain <= MAX_SIZE:
            return plain
    body, scale = text.strip().replace("_", ""), 1
    for suffix, factor in SIZE_SUFFIXES.items():  # Ki before K
        if body.endswith(suffix):
            body, scale = body[: -len(suffix)], factor
            break
    expected = (f"expected a positive integer (K, M, G, T: 10**3, 10**6, ...; Ki, Mi, Gi, "
                f"Ti: 2**10, 2**20, ...), got {text!r}")  # fmt: skip
    if not re.fullmatch(r"[0-9]+(\.[0-9]+)?" if scale > 1 else r"[+-]?[0-9]+", body):
        if re.fullmatch(r"[0-9]+[kmgt]i?", body):  # `4k`: say what each spelling means
            n, up = body.rstrip("kmgti"), body.lstrip("0123456789").capitalize()
            dec, binary = up.rstrip("i"), up.rstrip("i") + "i"
            expected += (f": did you mean {n}{dec} ({int(n) * SIZE_SUFFIXES[dec]:,}) or "
                         f"{n}{binary} ({int(n) * SIZE_SUFFIXES[binary]:,})?")  # fmt: skip
        raise ValueError(expected)
    value = Fraction(body) * scale
    if value.denominator != 1:
        raise ValueError(f"expected a whole number, got {text!r} = {float(value):g}")
    if value <= 0:
        raise ValueError(f"expected a positive integer, got {int(value)}")
    if value > MAX_SIZE:
        raise ValueError(f"expected at most {MAX_SIZE:,} (2**40, the bound on a size), "
                         f"got {_said(int(value))}")  # fmt: skip
    return int(value)


def _said(value: int) -> str:
    """A count as the error shows it: its digits, or their number past 30 of them."""
    digits = str(value)
    return f"{value:,}" if len(digits) <= 30 else f"a {len(digits)}-digit number"


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
# A run's work grows with its scheduler events (a step taking prompt tokens, or a
# stretch of identical decode steps taken at once: scheduler.run), not its steps: about
# 2.3 µs an event (measured, scheduler.run with a constant step time: 20,000 requests of
# 1,000 + 1,000 tokens one at a time, 360,000 events and 20 million steps, in 0.82 s).
# A run stops after MAX_EVENTS events or MAX_STEPS steps, saying so, its figures over
# the requests that finished: a few seconds at most, and the steps far beyond any
# benchmark's.
MAX_EVENTS = 2_000_000
MAX_STEPS = 10**9
# arrival rates (requests/s) a run takes: below 1e-3/s arrival times reach 1e6 s for a
# thousand requests, where a float still resolves a microsecond step (2^-52 × 1e6 s ≈
# 0.2 ns); above 1e6/s every request arrives at once, as it would at any higher rate
RATES = (1e-3, 1e6)

# ---- `serve --concurrency a,b,…`: curves under a benchmark client's load (curve.py)

# requests a curve's client sends at each concurrency: vLLM's `benchmark_serving.py` and
# SGLang's `bench_serving` both default --num-prompts to 1,000
DEFAULT_PROMPTS = 1_000
MAX_CURVE_POINTS = 64  # concurrencies one curve takes (1..2**40 doubling is 41)
