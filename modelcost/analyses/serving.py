"""Serving a request mix: the largest concurrency that fits the KV cache, time to first
token, time per output token, request latency and throughput, from compiled totals.

For requests of `isl` input and `osl` output tokens on a layout (each data-parallel
replica serves its own requests), of whose input a `prefix_hit` share is already cached
(a prefix-cache hit: only the rest is prefilled, attending to the cached part too):

- concurrency: sequences per replica whose KV cache, at the full isl + osl, fits the
  memory the engine gives it beside the weights and activations (vLLM: floor((0.9 ×
  capacity − weights − activations) / KV per sequence)), solved (activations are
  those of the batch solved for);
- TPOT: one decode step of the whole batch at the mean context isl + osl/2.

How prefills and decodes share the device is the engine's scheduling:

- `static` (no token budget): a batch of N requests arrives together and is prefilled
  as the engine does it (whole prompts up to its prefill tokens a step, the steps one
  after another), then decoded for osl steps. TTFT is when a request's prefill step
  ends, the mean over the batch (the worst: the whole prefill); output tokens/s =
  N·osl / (the prefill steps + osl × TPOT), per replica.
- `chunked` (a token budget per step, as vLLM's max_num_batched_tokens and
  TensorRT-LLM's max_num_tokens): every step decodes the N running sequences and
  prefills a chunk of c new prompt tokens in the same GEMMs. In the steady state as
  many requests start as finish, N/osl = c/new, so c = ⌈N·new/osl⌉ and N + c must fit
  the budget. TPOT is that mixed step; output tokens/s = N / step per replica; TTFT is
  the ⌈new/c⌉ steps a prompt's chunks take.

The engine (`Engine.name`, engines.py and specs/kernels/engines.json) adds its host
share of a step and any extra decode steps to the headline, keeps back the memory it
does (which sets the concurrency) and caps the sequences an instance runs. The bound is
the roofline at the same concurrency: no host time, no extra step, one request's
prefill as its TTFT and the batch's prefill in one step.

Speculative decoding (`speculation`, speculative.py): each step a draft proposes k
tokens per sequence in k decode passes (a draft model, or the target's own
multi-token-prediction module) and the target verifies them in one decode step of
k + 1 tokens per sequence; a step yields E tokens (the acceptance's), so TPOT = (the
verify + k draft passes) / E, with the engine's host share taken once over the step.
The draft prefills the prompt beside the target (in TTFT); its weights and KV cache
join the memory the concurrency must fit, and the larger of the two steps'
activations. Static batches only: a verify beside a prefill chunk is not modelled.

Every figure is read off `compile_totals` (the totals `compile_report` reports);
targets (`tpot`, `ttft`) pick the largest concurrency meeting them, or say that none
does; `search` tries tensor-parallel sizes and picks the fewest devices that meet them.

The records it answers with are serving_records', the scenario it prices scenario's;
choosing a layout is serving_search, a request mix serving_mix.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import modelcost.language.spec as ir
from modelcost.base.errors import SpecError
from modelcost.base.settings import DEFAULT_SERVE_ESTIMATE, EstimateMode, estimate_mode
from modelcost.ir.graph import ONE_DEVICE, Parallel
from modelcost.roofline.compile import as_hardware, as_spec
from modelcost.targets.hardware import Hardware

from .scenario import Scenario, _last, fitting
from .serving_records import (
    STATIC,
    Bound,
    CurvePoint,
    Engine,
    Room,
    Serving,
    Speculative,
    check_request,
)
from .speculative import Speculation

if TYPE_CHECKING:
    from modelcost.estimate.calibration import Calibration


def serve(
    spec: ir.Spec | str | Path,
    hw: Hardware | str | Path,
    isl: int,
    osl: int,
    parallel: Parallel = ONE_DEVICE,
    concurrency: int | None = None,
    tpot: float | None = None,
    ttft: float | None = None,
    engine: Engine = STATIC,
    estimate: EstimateMode = DEFAULT_SERVE_ESTIMATE,
    calibration: Calibration | None = None,
    speculation: Speculation | None = None,
    moe_imbalance: float | None = None,
) -> Serving:
    """The serving figures of `isl`/`osl` requests; `concurrency` fixes the batch (else
    the largest that fits and meets `tpot`, `ttft` in seconds). `spec` and `hw` may be
    paths or a target's name, as for `compile_report`. The figures read step times as
    `estimate` says (`kernels`, the default: the kernel-aware estimate, with a
    `calibration` on top; `roofline`: the bound), and carry the bound beside them.
    `speculation` turns speculative decoding on (speculative.Speculation). With
    pipeline stages `concurrency` is one batch in flight, pp of them a replica
    (`Scenario.pipelined_step`);
    `moe_imbalance` the estimate's routed load on the hottest expert over the mean
    (costing.Costing; the bound keeps the mean)."""
    check_request(isl, osl, concurrency, tpot, ttft)
    spec, hw = as_spec(spec), as_hardware(hw)
    _check_speculation(speculation, engine, parallel)
    sc = Scenario(spec, hw, parallel, isl, osl, engine, estimate_mode(estimate), calibration,
                   speculation, moe_imbalance)  # fmt: skip
    room = fitting(sc)
    most = room.most

    def ok(n: int) -> bool:
        return (tpot is None or sc.tpot(n) <= tpot) and (ttft is None or sc.ttft(n) <= ttft)

    why = ""
    if concurrency is not None:
        n, met = concurrency, ok(concurrency)
        if not met:
            why = _why(sc, concurrency, tpot, ttft)
    else:
        best = largest_meeting(
            most, (lambda n: sc.tpot(n) <= tpot) if tpot is not None else None, ok
        )
        n, met = best or 1, best is not None
        if best is None:
            why = _why(sc, 1, tpot, ttft)
    return _figures(sc, room, n, met, why, tpot, ttft)


def _check_speculation(s: Speculation | None, engine: Engine, par: Parallel) -> None:
    """What speculative decoding is not modelled with."""
    if s is None:
        return
    if engine.budget:
        raise SpecError("speculative decoding is modelled with static batches: a verify "
                        "beside a prefill chunk is not", filename="modelcost",
                        hint="leave out --budget")  # fmt: skip
    if par.pp > 1:
        raise SpecError("speculative decoding is modelled without pipeline stages",
                        filename="modelcost", hint="leave out --pp")  # fmt: skip


def _why(sc: Scenario, n: int, tpot: float | None, ttft: float | None) -> str:
    """Why concurrency n (the smallest tried) misses the targets."""
    if tpot is not None and sc.tpot(n) > tpot:
        return (
            f"{'one sequence' if n == 1 else f'{n} sequences'} per replica already "
            f"take{'s' if n == 1 else ''} over {tpot * 1e3:g} ms a token"
        )
    assert ttft is not None  # only the two targets rule a concurrency out
    return f"TTFT is {sc.ttft(n) * 1e3:.1f} ms, over the {ttft * 1e3:g} ms target"


def largest_meeting(most: int, rising: Callable[[int], bool] | None, ok: Callable[[int], bool]):
    """The largest n in 1..most with ok(n). `rising` (TPOT within target: true up to some
    n, false after) bounds it by a binary search; below that bound ok is tried from the
    top down (TTFT need not be monotone under chunked prefill)."""
    hi = most
    if rising is not None:
        if not rising(1):
            return None
        hi = _last(1, hi, rising)
    for n in range(hi, 0, -1):
        if ok(n):
            return n
    return None


def _curve(sc: Scenario, most: int) -> tuple[CurvePoint, ...]:
    """The figures at concurrency 1, 2, 4, … and at the most that fit."""
    ns = sorted({*(2**k for k in range(most.bit_length()) if 2**k <= most), most})
    return tuple(
        CurvePoint.trusted(
            concurrency=n,
            ttft_s=sc.ttft(n),
            tpot_s=sc.tpot(n),
            output_tokens_per_s=sc.output_rate(n),
            output_tokens_per_s_device=sc.output_rate(n) / sc.par.devices,
        )
        for n in ns
    )


def _bound(sc: Scenario, n: int) -> Bound:
    """The same figures at the roofline: the bound beside the estimate."""
    isl, osl = sc.isl, sc.osl
    b_tpot, b_first, b_out = sc.tpot(n, bound=True), sc.ttft(n, bound=True), sc.output_rate(n, True)
    return Bound.trusted(
        ttft_s=b_first,
        ttft_worst_s=sc.ttft(n, bound=True, worst=True),
        tpot_s=b_tpot,
        latency_s=b_first + osl * b_tpot,
        output_tokens_per_s=b_out,
        total_tokens_per_s=b_out * (isl + osl) / osl,
        output_tokens_per_s_device=b_out / sc.par.devices,
    )


def _held(sc: Scenario, n: int) -> tuple[float, float]:
    """(the memory a device holds with `n` sequences at their full length, its
    capacity): with a draft, its weights and cache and any larger activations too."""
    at_full = sc.decode(n, sc.isl + sc.osl).memory
    memory = at_full.total
    if sc.draft is not None:
        d = sc.draft_decode(n, sc.isl + sc.osl).memory
        memory += d.weights + d.kv_cache + max(d.activations - at_full.activations, 0.0)
    return memory, at_full.capacity


def _figures(
    sc: Scenario,
    room: Room,
    n: int,
    met: bool,
    why: str,
    tpot_target: float | None,
    ttft_target: float | None,
) -> Serving:
    par, isl, osl = sc.par, sc.isl, sc.osl
    tpot, first, worst = sc.tpot(n), sc.ttft(n), sc.ttft(n, worst=True)
    out = sc.output_rate(n)
    memory, capacity = _held(sc, n)
    return Serving.trusted(
        model=sc.spec.name,
        model_title=sc.spec.title,
        hardware=sc.hw.name,
        hardware_title=sc.hw.title,
        layout=par.label,
        devices=par.devices,
        isl=isl,
        osl=osl,
        engine=sc.engine.label,
        engine_name=sc.engine.name,
        engine_reason=_reason(sc),
        memory_fraction=sc.profile.memory.fraction,
        cached=sc.cached,
        chunk=sc.chunk(n),
        max_concurrency=room.most,
        concurrency_in_memory=room.in_memory,
        engine_cap=room.cap,
        engine_cap_said=sc.profile.cap_said,
        concurrency_binds=room.binds,
        concurrency_said=room.said,
        concurrency=n,
        ttft_s=first,
        ttft_worst_s=worst,
        tpot_s=tpot,
        latency_s=first + (osl + sc.extra_steps()) * tpot,
        output_tokens_per_s=out,
        total_tokens_per_s=out * (isl + osl) / osl,
        output_tokens_per_s_device=out / par.devices,
        estimate="kernels" if sc.kernels else "roofline",
        bound=_bound(sc, n),
        memory=memory,
        capacity=capacity,
        fits=memory <= capacity,
        kv_per_sequence=room.per_sequence,
        meets_targets=met,
        why=why,
        tpot_target_s=tpot_target,
        ttft_target_s=ttft_target,
        curve=_curve(sc, room.most),
        speculative=_speculative(sc, n),
    )


def _speculative(sc: Scenario, n: int) -> Speculative | None:
    """Speculative decoding's figures at concurrency n, when on."""
    if sc.speculation is None or sc.draft is None:
        return None
    s, full = sc.speculation, sc.isl + sc.osl
    return Speculative.trusted(
        draft=sc.draft.name,
        draft_kind=sc.draft_kind,
        tokens=s.tokens,
        acceptance=s.acceptance,
        accepted_per_step=s.accepted_per_step,
        source=s.source,
        step_s=sc.step(n),
        bound_step_s=sc.step(n, bound=True),
        draft_weights=sc.draft_decode(n, full).memory.weights,
        draft_kv_per_sequence=sc.draft_decode(1, full).memory.kv_cache,
    )


def _reason(sc: Scenario) -> str:
    """What the engine adds to the kernels' step times and the schedule, in a line."""
    p = sc.profile
    if not sc.kernels:  # the headline is the bound: only the memory is the engine's
        return f"{p.label}; KV cache: {p.memory.said}; step times: the roofline"
    said = p.reason()
    if not sc.engine.budget:
        per = max(1, p.prefill_tokens // sc.new)
        said += (f"; static batches prefilled {per:,} prompt{'s' if per > 1 else ''} a step "
                 f"({p.prefill_tokens:,} tokens a step): TTFT is the batch's mean, the "
                 "worst is the whole prefill")  # fmt: skip
    return said
