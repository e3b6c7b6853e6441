"""Requests arriving over time: a discrete-event simulation of an engine's
iteration-level scheduler (continuous batching, as vLLM, SGLang and TensorRT-LLM run
it), giving each request's TTFT, TPOT and end-to-end latency and their mean, p50, p90
and p99, as Vidur (Agrawal et al., MLSys 2024) reports them.

Requests of `isl` input (of which a prefix-cache hit holds `cached`, leaving `prompt`
new tokens to prefill) and `osl` output tokens arrive as a Poisson process of `rate`
requests/s (exponential gaps from a seeded generator: the same seed, the same run).
Each step of the scheduler, one data-parallel replica's:

1. decodes every running sequence whose prompt is done, one token each, first (vLLM's
   chunked-prefill scheduler "prioritizes decode requests"; Sarathi-Serve's stall-free
   batching does the same);
2. continues the prompts of running requests still prefilling, then admits waiting
   requests first-come first-served while fewer than `max_running` sequences run, each
   taking prompt tokens while the step's token budget (`max_num_batched_tokens` /
   `max_num_tokens`) lasts: chunked prefill; without a budget, whole prompts;
3. takes the step time of (the decodes, their mean context, the chunk's prompt tokens)
   from a `StepTime` provider; at its end a request whose prompt is done has its first
   token (TTFT = that end − its arrival), a decoding request one more, and one with
   `osl` tokens finishes and leaves.

When nothing runs and nothing waits, time jumps to the next arrival. A request's TPOT
is (its finish − its first token) / (osl − 1), the mean gap between its tokens (none
when osl is 1). A run stops after MAX_EVENTS scheduler events or MAX_STEPS steps
(settings.py), saying so, its figures over the requests that finished.

Step times are memoized by (decodes, context, chunk, the chunk's input length) in
buckets: the decodes over 64 rounded up to 6 significant bits (less than 1/32 more), the
context up to a multiple of 1/CONTEXT_BUCKETS of the longest input + output, a chunk
over 32 tokens up to 5 significant bits (at most 1/16 more tokens), and the chunk's
requests' input length (weighted by the tokens each takes: every request's own when
they are all alike) up to a multiple of 1/CONTEXT_BUCKETS of the longest input. All
round up, so a bucket's step is never shorter than the step it stands for (a bound
read this way is that much above the roofline's own). `simulate` reads the steps from
the serving scenario's compiles (serving.Scenario, the figures `serve` reads) and runs
the same arrivals again on the roofline's step times: the bound beside the headline.
"""

from __future__ import annotations

import bisect
import heapq
import math
import random
import sys
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import modelcost.language.spec as ir
from modelcost.base.errors import SpecError
from modelcost.base.frozen import Frozen
from modelcost.base.hooks import shown
from modelcost.base.record import Record, replace
from modelcost.base.settings import (
    DEFAULT_REQUESTS,
    DEFAULT_SERVE_ESTIMATE,
    MAX_EVENTS,
    MAX_REQUESTS,
    MAX_STEPS,
    RATES,
    EstimateMode,
    estimate_mode,
)
from modelcost.base.tabular import Tabular
from modelcost.ir.graph import ONE_DEVICE, Parallel
from modelcost.roofline.compile import as_hardware, as_spec
from modelcost.targets.hardware import Hardware

from .scenario import Scenario, fitting
from .serving_records import STATIC, Engine, check_request

if TYPE_CHECKING:
    from modelcost.estimate.calibration import Calibration

CONTEXT_BUCKETS = 32  # context buckets over 0..isl + osl (each 1/32 of the longest)
PERCENTILES = (50, 90, 99)


class StepTime(Protocol):
    """A step's time in seconds: `decodes` sequences (0 or more) decoding one token each
    at a mean `context`, beside a prefill `chunk` of prompt tokens (0 or more) from
    requests of `isl` input tokens (0 when there is no chunk)."""

    def __call__(self, decodes: int, context: int, chunk: int, isl: int) -> float: ...


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


def context_bucket(context: int, longest: int) -> int:
    """`context` rounded up to a multiple of ⌈longest / CONTEXT_BUCKETS⌉, at most
    `longest`."""
    q = -(-longest // CONTEXT_BUCKETS)
    return min(-(-context // q) * q, longest)


def decodes_bucket(decodes: int) -> int:
    """`decodes` rounded up to 6 significant bits (a multiple of 2^(bits − 6)): exact up
    to 64 sequences, less than 1/32 more above, as the context's bucket."""
    step = 1 << max(decodes.bit_length() - 6, 0)
    return -(-decodes // step) * step


def chunk_bucket(chunk: int) -> int:
    """`chunk` rounded up to 5 significant bits (a multiple of 2^(bits − 5)): exact up to
    32 tokens, at most 1/16 more above."""
    step = 1 << max(chunk.bit_length() - 5, 0)
    return -(-chunk // step) * step


@dataclass(frozen=True)
class Trace:
    """What a run did to each request (NaN where a stopped run left it unfinished)."""

    arrival: tuple[float, ...]
    first: tuple[float, ...]  # when its first token came out
    finish: tuple[float, ...]
    end: float  # the time the run stopped
    steps: int
    shapes: int  # distinct (decodes, context, chunk) buckets timed
    max_waiting: int  # the longest the queue grew
    tokens: int  # output tokens made
    stopped: bool  # at a cap, before every request finished
    events: int = 0  # scheduler events: steps taking prompt tokens, stretches of decodes


def cap_note(trace: Trace, finished: int, requests: int) -> str:
    """What a stopped run says (nothing when every request finished)."""
    if not trace.stopped:
        return ""
    cap = (f"{MAX_EVENTS:,}-event" if trace.events >= MAX_EVENTS and trace.steps < MAX_STEPS
           else f"{MAX_STEPS:,}-step")  # fmt: skip
    return (
        f"stopped at the {cap} cap: {finished:,} of {requests:,} requests finished; "
        "the figures are theirs"
    )


class ClosedLoop(Record, frozen=True):
    """A benchmark client's load (vLLM's and SGLang's `bench_serving` with
    `--max-concurrency C` and no request rate): `requests` requests, the first
    `clients` sent at time 0 and each later one sent the moment a request finishes, so
    `clients` are in flight until the last are sent."""

    requests: int
    clients: int


Load = Sequence[float] | ClosedLoop  # arrival times (ascending), or a closed loop


def _each(value: int | Sequence[int], n: int, name: str) -> tuple[int, ...]:
    """A length per request: one for all, or one each (as many as the requests)."""
    if isinstance(value, int):
        return (value,) * n
    if len(value) != n:
        raise ValueError(f"{len(value)} {name} lengths for {n} requests")
    return tuple(value)


def run(
    load: Load,
    isl: int | Sequence[int],
    prompt: int | Sequence[int],
    osl: int | Sequence[int],
    step: StepTime,
    max_running: int,
    budget: int = 0,
    max_steps: int | None = None,
    max_events: int | None = None,
) -> Trace:
    """Serve the requests of `load` (arrival times, or a closed loop of clients), each
    of `prompt` new prompt tokens (of `isl`) and `osl` output tokens (one length for
    all, or one a request), at most `max_running` running, `budget` tokens a step (0:
    no budget, whole prompts), stopping after `max_steps` steps or `max_events` events
    (default MAX_STEPS, MAX_EVENTS).

    A step that takes no prompt tokens repeats until something changes: a request
    finishes, the decodes' context crosses into the next bucket (it rises by one token
    a step), the step cap, or (with room to admit it) the next arrival. Such a stretch
    of k steps is taken at once, its end at k × the step's time after its start: the
    run's work grows with its events (arrivals, prompt chunks, finishes, buckets), not
    its steps. Each decoding request's tokens are the steps since its first, so the
    decodes' context and their finishes are kept as sums and a heap, not per step."""
    if budget and max_running > budget:
        raise ValueError(f"{max_running} running sequences need a budget of as many tokens")
    max_steps = MAX_STEPS if max_steps is None else max_steps
    max_events = MAX_EVENTS if max_events is None else max_events
    closed = isinstance(load, ClosedLoop)
    n = load.requests if isinstance(load, ClosedLoop) else len(load)
    isls, news, osls = _each(isl, n, "input"), _each(prompt, n, "prompt"), _each(osl, n, "output")
    if isinstance(load, ClosedLoop):
        sent = min(load.clients, n)  # requests whose arrival is known
        arrival = [0.0] * sent + [math.nan] * (n - sent)
    else:
        arrival, sent = list(load), n
    first, finish = [math.nan] * n, [math.nan] * n
    prefilled = [0] * n
    base = [0] * n  # a decoding request has made T − base[r] tokens after T steps
    waiting: deque[int] = deque()
    prefilling: list[int] = []  # running, prompt not done, in the order admitted
    finishing: list[tuple[int, int]] = []  # (the step it finishes at, request): a heap
    memo: dict[tuple[int, int, int, int], float] = {}
    longest, top_isl = max(isls) + max(osls), max(isls)
    now, arrived, done, steps, most_waiting, tokens, events = 0.0, 0, 0, 0, 0, 0, 0
    d = spread = 0  # decoding requests; the sum over them of isl − base
    while done < n:
        while arrived < sent and arrival[arrived] <= now:
            waiting.append(arrived)
            arrived += 1
        if not d and not prefilling and not waiting:
            now = arrival[arrived]  # idle: on to the next arrival
            continue
        if steps >= max_steps or events >= max_events:
            break
        events += 1
        most_waiting = max(most_waiting, len(waiting))
        left = budget - d if budget else sys.maxsize  # no budget: whole prompts
        takes: list[tuple[int, int]] = []
        for r in prefilling:
            if left <= 0:
                break
            takes.append((r, min(news[r] - prefilled[r], left)))
            left -= takes[-1][1]
        while waiting and d + len(prefilling) < max_running and left > 0:
            r = waiting.popleft()
            prefilling.append(r)
            takes.append((r, min(news[r], left)))
            left -= takes[-1][1]
        chunk = sum(t for _, t in takes)
        # the decodes' mean context, rounded up: ⌈Σ (isl + made) / d⌉ = T + ⌈spread / d⌉
        context = steps + -(-spread // d) if d else top_isl
        # the chunk's requests: their input length weighted by the tokens each takes
        length = -(-sum(t * isls[r] for r, t in takes) // chunk) if chunk else 0
        key = (decodes_bucket(d), context_bucket(context, longest),
               chunk_bucket(chunk) if chunk else 0,
               context_bucket(length, top_isl) if chunk else 0)  # fmt: skip
        if budget and key[2] > budget:
            key = (key[0], key[1], budget, key[3])
        seconds = memo.get(key)
        if seconds is None:
            seconds = memo[key] = step(*key)
            if not (seconds > 0 and math.isfinite(seconds)):
                raise ValueError(f"step {key}: a time must be positive, got {seconds!r}")
        k = 1
        if not takes:  # decodes alone: the same step until something changes
            k = min(finishing[0][0] - steps, max_steps - steps)
            if key[1] < longest:
                k = min(k, key[1] - context + 1)
            room = d < max_running and (not budget or budget > d)
            if k > 1 and arrived < sent:
                if room:  # stop where a step would start at or after the next arrival
                    k = min(k, _steps_until(now, seconds, arrival[arrived], k))
                else:  # the queue grows: its longest at the last step's start
                    last = now + (k - 1) * seconds
                    queued = bisect.bisect_right(arrival, last, arrived, sent) - arrived
                    most_waiting = max(most_waiting, len(waiting) + queued)
        now = now + k * seconds if k > 1 else now + seconds
        steps += k
        tokens += d * k
        started = []
        for r, t in takes:
            prefilled[r] += t
            if prefilled[r] == news[r]:
                first[r] = now
                started.append(r)
        if started:
            tokens += len(started)
            prefilling = [r for r in prefilling if prefilled[r] < news[r]]
        for r in started:
            if osls[r] == 1:
                finish[r], done = now, done + 1
                if closed and sent < n:
                    arrival[sent], sent = now, sent + 1
            else:
                base[r] = steps - 1
                heapq.heappush(finishing, (base[r] + osls[r], r))
                d, spread = d + 1, spread + isls[r] - base[r]
        while finishing and finishing[0][0] == steps:
            r = heapq.heappop(finishing)[1]
            finish[r], done = now, done + 1
            d, spread = d - 1, spread - (isls[r] - base[r])
            if closed and sent < n:
                arrival[sent], sent = now, sent + 1
    return Trace(tuple(arrival), tuple(first), tuple(finish), now, steps, len(memo),
                 most_waiting, tokens, done < n, events)  # fmt: skip


def _steps_until(start: float, seconds: float, arrival: float, most: int) -> int:
    """The steps from `start` before one that would start at or after `arrival`: the
    least j ≥ 1 with start + j × seconds ≥ arrival, at most `most`."""
    j = max(1, min(most, math.ceil((arrival - start) / seconds)))
    while j > 1 and start + (j - 1) * seconds >= arrival:
        j -= 1
    while j < most and start + j * seconds < arrival:
        j += 1
    return j


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
    mode = estimate_mode(estimate)
    # the memory's limit alone, as the engine keeps it: serve's, without a budget
    memory = Scenario(spec, hw, parallel, isl, osl, replace(engine, budget=0))
    room = fitting(memory)
    fit = room.most
    if concurrency is not None and concurrency > fit:
        raise SpecError(f"--concurrency {concurrency:,}: at most {room.said}",
                        filename="modelcost")  # fmt: skip
    most = concurrency or fit
    if engine.budget:  # a step decodes every running sequence: the budget must hold them
        most = min(most, engine.budget)
    sc = Scenario(spec, hw, parallel, isl, osl, engine, mode, calibration,
                   moe_imbalance=moe_imbalance)  # fmt: skip
    try:  # a step carries prompts beside its decodes: the model must have such a step
        sc.decode(1, isl + osl, sc.new, timed=True)
    except SpecError as err:
        raise SpecError(
            f"--rate runs prompts beside decodes in one step, and {err.message}",
            filename="modelcost",
            hint="serve it without --rate (static batches)",
        ) from None
    arrivals = poisson(rate / parallel.dp, requests, seed)

    def figures(bound: bool) -> tuple[Latencies, Trace]:
        steps = ScenarioSteps(sc, bound)
        trace = run(arrivals, isl, sc.new, osl, steps, most, engine.budget)
        return latencies(trace, osl, parallel.dp), trace

    head, trace = figures(False)
    bound = figures(True)[0] if sc.kernels else head
    note = cap_note(trace, head.finished, requests)
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
        bound=bound,
        note=note,
    )
