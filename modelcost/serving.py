"""Serving one request mix: the largest concurrency that fits the KV cache, time to first
token, time per output token, request latency and throughput, from compiled reports.

For requests of `isl` input and `osl` output tokens on a layout (each data-parallel
replica serves its own requests):

- concurrency: sequences per replica whose KV cache, at the full isl + osl, fits each
  device beside the weights and activations: floor((capacity − weights − activations) /
  KV per sequence), solved (activations are those of the batch solved for);
- TTFT: the prefill of one request, isl tokens (no queueing, no batching with others);
- TPOT: one decode step of the whole batch at the mean context isl + osl/2;
- request latency: TTFT + osl × TPOT;
- throughput: continuous batching admits a batch's worth of prefills per osl decode
  steps: output tokens/s = N·osl / (prefill of N requests + osl × TPOT), per replica.

Every figure is read off `compile_totals` (the totals `compile_report` reports);
targets (`tpot`, `ttft`) pick the largest concurrency meeting them, or say that none
does.
"""

from __future__ import annotations

from . import spec as ir
from .compile import compile_totals
from .errors import SpecError
from .frozen import Frozen
from .graph import ONE_DEVICE, Parallel, Phase, Workload
from .hardware import Hardware
from .report import Totals


class Serving(Frozen):
    model: str
    hardware: str
    layout: str
    devices: int
    isl: int
    osl: int
    max_concurrency: int  # sequences per replica the memory holds
    concurrency: int  # the one chosen (the largest meeting the targets)
    ttft_s: float
    tpot_s: float
    latency_s: float
    output_tokens_per_s: float  # the whole job's
    total_tokens_per_s: float  # input and output
    output_tokens_per_s_device: float
    memory: float  # bytes per device at the chosen concurrency, at isl + osl
    capacity: float
    fits: bool
    kv_per_sequence: float  # bytes per device at isl + osl
    meets_targets: bool
    why: str = ""  # when no concurrency meets the targets


def _decode(spec, hw, par: Parallel, n: int, context: int) -> Totals:
    w = Workload(Phase.decode, n * par.dp, context=context, parallel=par)
    return compile_totals(spec, hw, w)[1]


def _prefill(spec, hw, par: Parallel, n: int, isl: int) -> Totals:
    return compile_totals(spec, hw, Workload(Phase.prefill, n * par.dp, isl, parallel=par))[1]


def max_concurrency(spec: ir.Spec, hw: Hardware, par: Parallel, context: int) -> tuple[int, float]:
    """(the most sequences per replica whose cache at `context` fits each device, the KV
    bytes one sequence takes per device)."""
    one = _decode(spec, hw, par, 1, context).memory
    per_seq = one.kv_cache  # one sequence per replica: its cache, per device
    n = 1
    while True:  # activations grow with the batch: solve again until it holds
        m = _decode(spec, hw, par, n, context).memory
        free = m.capacity - m.weights - m.activations - m.gradients - m.optimizer_states
        solved = int(free // per_seq) if per_seq else 0
        if solved <= n:
            return (solved if solved >= 1 else 0), per_seq
        n = solved


def serve(
    spec: ir.Spec,
    hw: Hardware,
    isl: int,
    osl: int,
    parallel: Parallel = ONE_DEVICE,
    concurrency: int | None = None,
    tpot: float | None = None,
    ttft: float | None = None,
) -> Serving:
    """The serving figures of `isl`/`osl` requests; `concurrency` fixes the batch (else
    the largest that fits and meets `tpot`, `ttft` in seconds)."""
    if isl <= 0 or osl <= 0:
        raise SpecError("--isl and --osl must be positive", filename="modelcost")
    full, mean = isl + osl, isl + osl // 2
    most, per_seq = max_concurrency(spec, hw, parallel, full)
    if most == 0:
        raise SpecError(
            f"not one {full}-token sequence fits beside the weights on {hw.title}",
            filename="modelcost",
            hint="split the model over more devices (--tp, --pp) or shorten the requests",
        )
    first = _prefill(spec, hw, parallel, 1, isl).time_s

    def tpot_ok(n: int) -> bool:
        return tpot is None or _decode(spec, hw, parallel, n, mean).time_s <= tpot

    why = ""
    if concurrency is not None:
        n, met = concurrency, tpot_ok(concurrency) and (ttft is None or first <= ttft)
    elif ttft is not None and first > ttft:
        n, met = most, False
        why = f"TTFT is {first * 1e3:.1f} ms at any batch, over the {ttft * 1e3:g} ms target"
    else:
        best = _largest(most, tpot_ok)
        n, met = best or 1, best is not None
        if best is None:
            assert tpot is not None  # only a TPOT target can rule out every batch
            why = f"one sequence per replica already takes over {tpot * 1e3:g} ms a token"
    return _figures(spec, hw, parallel, isl, osl, most, n, first, per_seq, met, why)


def _largest(most: int, ok) -> int | None:
    """The largest n in 1..most with ok(n), ok being true up to some n and false after
    (TPOT grows with the batch): a binary search, a dozen compiles at most."""
    if not ok(1):
        return None
    lo, hi = 1, most
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _figures(spec, hw, par, isl, osl, most, n, first, per_seq, met, why) -> Serving:
    mean = isl + osl // 2
    decode = _decode(spec, hw, par, n, mean)
    tpot = decode.time_s
    prefills = _prefill(spec, hw, par, n, isl).time_s
    out = n * par.dp * osl / (prefills + osl * tpot)
    at_full = _decode(spec, hw, par, n, isl + osl).memory
    return Serving.trusted(
        model=spec.name,
        hardware=hw.name,
        layout=par.label,
        devices=par.devices,
        isl=isl,
        osl=osl,
        max_concurrency=most,
        concurrency=n,
        ttft_s=first,
        tpot_s=tpot,
        latency_s=first + osl * tpot,
        output_tokens_per_s=out,
        total_tokens_per_s=out * (isl + osl) / osl,
        output_tokens_per_s_device=out / par.devices,
        memory=at_full.total,
        capacity=at_full.capacity,
        fits=at_full.fits,
        kv_per_sequence=per_seq,
        meets_targets=met,
        why=why,
    )
