"""Requests arriving over time: a discrete-event simulation of an engine's
iteration-level scheduler (continuous batching, as vLLM, SGLang and TensorRT-LLM run
it), giving each request's TTFT, TPOT and end-to-end latency and their mean, p50, p90
and p99, as Vidur (Agrawal et al., MLSys 2024) reports them.

Requests of `isl` input (of which a prefix-cache hit holds `cached`, leaving `prompt`
new tokens to prefill) and `osl` output tokens arrive as a Poisson process of `rate`
requests/s (exponential gaps from a seeded generator: the same seed, the same run).
The scheduler that serves them, step by step, is scheduler.py's. `simulate` reads the
steps from the serving scenario's compiles (serving.Scenario, the figures `serve`
reads) and runs the same arrivals again on the roofline's step times: the bound beside
the headline.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import modelcost.language.spec as ir
from modelcost.base.errors import SpecError
from modelcost.base.frozen import Frozen
from modelcost.base.hooks import shown
from modelcost.base.record import replace
from modelcost.base.settings import (
    DEFAULT_REQUESTS,
    DEFAULT_SERVE_ESTIMATE,
    MAX_REQUESTS,
    RATES,
    EstimateMode,
    estimate_mode,
)
from modelcost.base.tabular import Tabular
from modelcost.ir.graph import ONE_DEVICE, Parallel
from modelcost.roofline.compile import as_hardware, as_spec
from modelcost.targets.hardware import Hardware

from .scenario import Scenario, fitting
from .scheduler import Trace, _each, cap_note, run
from .serving_records import STATIC, Engine, check_request

if TYPE_CHECKING:
    from modelcost.estimate.calibration import Calibration


PERCENTILES = (50, 90, 99)


def poisson(rate: float, n: int, seed: int) -> tuple[float, ...]:
    """n arrival times of a Poisson process of `rate` per second from time 0: gaps
    −ln(1 − U)/rate, U uniform on [0, 1) from random.Random(seed) (the formula written
    out, so a run does not depend on how a Python version draws exponentials)."""
    rng = random.Random(seed)
    t, out = 0.0, []
    for _ in range(n):
        t += -math.log(1.0 - rng.random()) / rate
        out.append(t)
    return tuple(out)


def percentile(ordered: Sequence[float], p: float) -> float:
    """The p-th percentile of ascending values, interpolating linearly between the
    closest ranks (Hyndman and Fan's type 7: numpy's and pandas' default)."""
    pos = (len(ordered) - 1) * p / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


class Stats(Frozen):
    """A figure over the finished requests: its mean and percentiles, in seconds."""

    mean: float
    p50: float
    p90: float
    p99: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Stats:
        ordered = sorted(values)
        p50, p90, p99 = (percentile(ordered, p) for p in PERCENTILES)
        return cls.trusted(mean=math.fsum(ordered) / len(ordered), p50=p50, p90=p90, p99=p99)


class Latencies(Frozen):
    """A run's figures: each request's TTFT, TPOT (none when osl is 1) and end-to-end
    latency over the finished requests; the whole job's output tokens/s and finished
    requests/s from the first arrival to the end of the run."""

    ttft: Stats
    tpot: Stats | None
    latency: Stats
    output_tokens_per_s: float
    requests_per_s: float
    steps: int
    step_shapes: int  # distinct step buckets timed: the compiles the run needed
    max_waiting: int
    finished: int


def latencies(trace: Trace, osl: int | Sequence[int], replicas: int = 1) -> Latencies:
    """The figures of a run of one replica, `replicas` serving alike; `osl` the
    requests' output lengths (one for all, or one each): a request's TPOT is
    (finish − first) / (osl − 1), none for one-token outputs."""
    done = [i for i, f in enumerate(trace.finish) if not math.isnan(f)]
    if not done:
        raise SpecError(
            f"no request finished within {trace.steps:,} steps (the cap)",
            filename="modelcost",
            hint="fewer --requests, shorter requests or a lower --rate",
        )
    a, first, finish = trace.arrival, trace.first, trace.finish
    outs = _each(osl, len(a), "output")
    gaps = [(finish[i] - first[i]) / (outs[i] - 1) for i in done if outs[i] > 1]
    span = trace.end - a[0]
    return Latencies.trusted(
        ttft=Stats.of([first[i] - a[i] for i in done]),
        tpot=Stats.of(gaps) if gaps else None,
        latency=Stats.of([finish[i] - a[i] for i in done]),
        output_tokens_per_s=trace.tokens * replicas / span,
        requests_per_s=len(done) * replicas / span,
        steps=trace.steps,
        step_shapes=trace.shapes,
        max_waiting=trace.max_waiting,
        finished=len(done),
    )


class Arrivals(Tabular, Frozen):
    """A request class arriving at `rate` requests/s on one layout under one engine:
    the headline figures as `estimate` reads step times, and `bound`, the same
    arrivals on the roofline's step times. Each data-parallel replica receives
    rate / replicas (random routing splits a Poisson stream into Poisson streams) and
    is simulated once with `requests` requests; throughputs are the whole job's."""

    model: str
    model_title: str  # the spec's title, as compile's header says it
    hardware: str
    hardware_title: str  # the target's title, as compile's header says it
    layout: str
    devices: int
    isl: int
    osl: int
    engine: str  # the scheduling, as `schedule` says it
    cached: int  # prompt tokens a prefix-cache hit saves per request
    rate: float  # requests/s, the whole job's
    requests: int
    seed: int
    max_running: int  # sequences per replica at once
    budget: int  # tokens a step (0: none, whole prompts)
    estimate: EstimateMode
    figures: Latencies
    bound: Latencies
    note: str = ""  # when the run stopped at the step cap

    def records(self) -> list[dict]:
        return [self.row()]

    def row(self) -> dict:
        """The figures as one flat row: `ttft_p99_s`, …, and the bound's `bound_…`."""
        head = self.model_dump(exclude={"figures", "bound"})
        return head | flat(self.figures, "") | flat(self.bound, "bound_")

    def _repr_html_(self) -> str:
        return shown(self, "html")


def flat(f: Latencies, prefix: str) -> dict:
    """A run's figures as flat fields: `ttft_mean_s`, …, each name after `prefix`."""
    out: dict = {}
    for name in ("ttft", "tpot", "latency"):
        stats: Stats | None = getattr(f, name)
        for k in ("mean", "p50", "p90", "p99"):
            out[f"{prefix}{name}_{k}_s"] = getattr(stats, k) if stats else None
    rest = f.model_dump(exclude={"ttft", "tpot", "latency"})
    return out | {f"{prefix}{k}": v for k, v in rest.items()}


class ScenarioSteps:
    """The steps of a serving scenario as a StepTime: each a decode step's compile,
    read as the estimate or (`bound`) the roofline. A step of no decodes (a prompt
    alone) is costed as one decode beside it: one token more through the GEMMs, whose
    weights the chunk reads anyway."""

    def __init__(self, sc: Scenario, bound: bool) -> None:
        self.sc, self.bound = sc, bound

    def __call__(self, decodes: int, context: int, chunk: int, isl: int) -> float:
        t = self.sc.decode(max(decodes, 1), context, chunk, True, isl or None)
        return self.sc.seconds(t, self.bound)


def one_batch(par: Parallel, hint: str) -> None:
    """SpecError for pipeline stages: the simulation runs one batch at a time, where a
    serving pipeline keeps a batch in flight a stage (serving.Scenario.pipelined_step)."""
    if par.pp > 1:
        raise SpecError(f"pipeline stages ({par.label}): the step-by-step simulation runs one "
                        "batch at a time, not a batch in flight a stage", filename="modelcost",
                        hint=hint)  # fmt: skip


def schedule(engine: Engine) -> str:
    """How a run schedules: `in-flight batching, chunked prefill, 8,192 tokens a step`."""
    what = (f"chunked prefill, {engine.budget:,} tokens a step" if engine.budget
            else "whole prompts, no token budget")  # fmt: skip
    hits = f", {engine.prefix_hit:.0%} prefix hits" if engine.prefix_hit else ""
    return f"in-flight batching, {what}{hits}"


def _check(rate: object, requests: object, seed: object) -> None:
    """The API refuses what the flags cannot say, with the same limits."""
    if not (isinstance(rate, int | float) and not isinstance(rate, bool)
            and RATES[0] <= rate <= RATES[1]):  # fmt: skip
        raise SpecError(f"rate must be from {RATES[0]:g} to {RATES[1]:g} requests/s, got "
                        f"{rate!r}", filename="modelcost")  # fmt: skip
    if not (isinstance(requests, int) and not isinstance(requests, bool)
            and 1 <= requests <= MAX_REQUESTS):  # fmt: skip
        raise SpecError(f"requests must be from 1 to {MAX_REQUESTS:,}, got {requests!r}",
                        filename="modelcost")  # fmt: skip
    if not (isinstance(seed, int) and not isinstance(seed, bool) and 0 <= seed < 2**63):
        raise SpecError(f"seed must be a whole number from 0, got {seed!r}",
                        filename="modelcost")  # fmt: skip


def simulate(
    spec: ir.Spec | str | Path,
    hw: Hardware | str | Path,
    isl: int,
    osl: int,
    rate: float,
    requests: int = DEFAULT_REQUESTS,
    seed: int = 0,
    parallel: Parallel = ONE_DEVICE,
    engine: Engine = STATIC,
    concurrency: int | None = None,
    estimate: EstimateMode = DEFAULT_SERVE_ESTIMATE,
    calibration: Calibration | None = None,
    moe_imbalance: float | None = None,
) -> Arrivals:
    """`requests` requests of `isl`/`osl` tokens arriving at `rate` requests/s (Poisson,
    `seed`), served by in-flight batching with `engine`'s token budget (none: whole
    prompts), at most `concurrency` sequences per replica running (default: the most
    the memory holds at isl + osl). SpecError for values out of range, a layout that
    holds no sequence, or a run whose step cap passes before any request finishes."""
    check_request(isl, osl, concurrency, None, None)
    _check(rate, requests, seed)
    one_batch(parallel, "serve it without --rate (a pipeline's figures, static batches)")
    spec, hw = as_spec(spec), as_hardware(hw)
    most = _max_running(spec, hw, parallel, isl, osl, engine, concurrency)
    sc = Scenario(spec, hw, parallel, isl, osl, engine, estimate_mode(estimate), calibration,
                  moe_imbalance=moe_imbalance)  # fmt: skip
    _check_mixed_step(sc, isl + osl)
    arrivals = poisson(rate / parallel.dp, requests, seed)

    def figures(bound: bool) -> tuple[Latencies, Trace]:
        steps = ScenarioSteps(sc, bound)
        trace = run(arrivals, isl, sc.new, osl, steps, most, engine.budget)
        return latencies(trace, osl, parallel.dp), trace

    head, trace = figures(False)
    return Arrivals.trusted(
        model=spec.name,
        model_title=spec.title,
        hardware=hw.name,
        hardware_title=hw.title,
        layout=parallel.label,
        devices=parallel.devices,
        isl=isl,
        osl=osl,
        engine=schedule(engine),
        cached=sc.cached,
        rate=float(rate),
        requests=requests,
        seed=seed,
        max_running=most,
        budget=engine.budget,
        estimate="kernels" if sc.kernels else "roofline",
        figures=head,
        bound=figures(True)[0] if sc.kernels else head,
        note=cap_note(trace, head.finished, requests),
    )


def _check_mixed_step(sc: Scenario, length: int) -> None:
    """A step carries prompts beside its decodes: the model must have such a step."""
    try:
        sc.decode(1, length, sc.new, timed=True)
    except SpecError as err:
        raise SpecError(
            f"--rate runs prompts beside decodes in one step, and {err.message}",
            filename="modelcost",
            hint="serve it without --rate (static batches)",
        ) from None


def _max_running(spec: ir.Spec, hw: Hardware, parallel: Parallel, isl: int, osl: int,
                 engine: Engine, concurrency: int | None) -> int:  # fmt: skip
    """The sequences a replica runs at most: `concurrency`, or the most its memory holds
    as the engine keeps it (serve's limit, without a budget), and no more than the
    token budget, since a step decodes every running sequence."""
    room = fitting(Scenario(spec, hw, parallel, isl, osl, replace(engine, budget=0)))
    if concurrency is not None and concurrency > room.most:
        raise SpecError(f"--concurrency {concurrency:,}: at most {room.said}",
                        filename="modelcost")  # fmt: skip
    most = concurrency or room.most
    return min(most, engine.budget) if engine.budget else most
