"""An engine's iteration-level scheduler, step by step (continuous batching, as vLLM,
SGLang and TensorRT-LLM run it), serving requests that arrive at given times or from a
closed loop of clients. Each step of the scheduler, one data-parallel replica's:

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
read this way is that much above the roofline's own).
"""

from __future__ import annotations

import bisect
import heapq
import math
import sys
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from modelcost.base.record import Record
from modelcost.base.settings import MAX_EVENTS, MAX_STEPS

CONTEXT_BUCKETS = 32  # context buckets over 0..isl + osl (each 1/32 of the longest)


class StepTime(Protocol):
    """A step's time in seconds: `decodes` sequences (0 or more) decoding one token each
    at a mean `context`, beside a prefill `chunk` of prompt tokens (0 or more) from
    requests of `isl` input tokens (0 when there is no chunk)."""

    def __call__(self, decodes: int, context: int, chunk: int, isl: int) -> float: ...


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
    r = _Run(load, isl, prompt, osl, max_running, budget)
    busy, plan, stretch, advance = r.busy, r.plan, r.stretch, r.advance
    memo: dict[tuple[int, int, int, int], float] = {}
    while r.done < r.n:
        if not busy():  # idle: on to the next arrival
            continue
        if r.steps >= max_steps or r.events >= max_events:
            break
        r.events += 1
        r.most_waiting = max(r.most_waiting, len(r.waiting))  # a step starts: its queue
        takes, key, context = plan()
        seconds = memo.get(key)
        if seconds is None:
            seconds = memo[key] = step(*key)
            if not (seconds > 0 and math.isfinite(seconds)):
                raise ValueError(f"step {key}: a time must be positive, got {seconds!r}")
        k = 1 if takes else stretch(key[1], context, seconds, max_steps)
        advance(takes, k, seconds)
    return Trace(tuple(r.arrival), tuple(r.first), tuple(r.finish), r.now, r.steps, len(memo),
                 r.most_waiting, r.tokens, r.done < r.n, r.events)  # fmt: skip


class _Run:
    """One run's state between events: each request's lengths and times, the queue,
    the prompts being prefilled (in the order admitted), the decodes and the counts.
    A decoding request `q` has made T − base[q] tokens after T steps, so the decodes
    are kept as sums and a heap, not per step: how many (`d`), the sum over them of
    isl − base (`spread`: their mean context after T steps is T + spread / d), and a
    heap of (the step each finishes at, request)."""

    __slots__ = ("arrival", "arrived", "base", "budget", "closed", "d", "done", "events",
                 "finish", "finishing", "first", "isls", "longest", "max_running",
                 "most_waiting", "n", "news", "now", "osls", "prefilled", "prefilling",
                 "sent", "spread", "steps", "tokens", "top_isl", "waiting")  # fmt: skip

    def __init__(self, load: Load, isl: int | Sequence[int], prompt: int | Sequence[int],
                 osl: int | Sequence[int], max_running: int, budget: int) -> None:  # fmt: skip
        self.closed = isinstance(load, ClosedLoop)
        n = self.n = load.requests if isinstance(load, ClosedLoop) else len(load)
        self.isls, self.news = _each(isl, n, "input"), _each(prompt, n, "prompt")
        self.osls = _each(osl, n, "output")
        if isinstance(load, ClosedLoop):
            self.sent = min(load.clients, n)  # requests whose arrival is known
            self.arrival = [0.0] * self.sent + [math.nan] * (n - self.sent)
        else:
            self.arrival, self.sent = list(load), n
        self.first, self.finish = [math.nan] * n, [math.nan] * n
        self.prefilled, self.base = [0] * n, [0] * n
        self.waiting: deque[int] = deque()
        self.prefilling: list[int] = []
        self.finishing: list[tuple[int, int]] = []
        self.max_running, self.budget = max_running, budget
        self.longest, self.top_isl = max(self.isls) + max(self.osls), max(self.isls)
        self.now, self.d, self.spread = 0.0, 0, 0
        self.arrived = self.done = self.steps = self.most_waiting = self.tokens = 0
        self.events = 0

    def busy(self) -> bool:
        """Queue what has arrived by now; with nothing running or waiting, move the
        clock to the next arrival and say so (False). The queue counts toward the longest
        only where a step starts (`run`), not where the run stops at a cap."""
        arrival, waiting, arrived, sent, now = (self.arrival, self.waiting, self.arrived,
                                                self.sent, self.now)  # fmt: skip
        while arrived < sent and arrival[arrived] <= now:
            waiting.append(arrived)
            arrived += 1
        self.arrived = arrived
        if not self.d and not self.prefilling and not waiting:
            self.now = arrival[arrived]
            return False
        return True

    def plan(self) -> tuple[list[tuple[int, int]], tuple[int, int, int, int], int]:
        """The step's (request, prompt tokens) within the budget left by the decodes:
        the prompts already started first, then waiting requests admitted while fewer
        than `max_running` run; its bucketed shape (decodes, their context, the chunk,
        the chunk's input length weighted by the tokens each takes); the decodes' mean
        context, rounded up: ⌈Σ (isl + made) / d⌉ = T + ⌈spread / d⌉."""
        d, prefilling, waiting = self.d, self.prefilling, self.waiting
        full = d >= self.max_running or (self.budget and self.budget <= d)
        if not prefilling and (not waiting or full):  # decodes alone, most events
            context = self.steps + -(-self.spread // d)
            return [], (decodes_bucket(d), context_bucket(context, self.longest), 0, 0), context
        news, prefilled, isls = self.news, self.prefilled, self.isls
        left = self.budget - d if self.budget else sys.maxsize  # no budget: whole prompts
        takes: list[tuple[int, int]] = []
        for q in prefilling:
            if left <= 0:
                break
            takes.append((q, min(news[q] - prefilled[q], left)))
            left -= takes[-1][1]
        while waiting and d + len(prefilling) < self.max_running and left > 0:
            q = waiting.popleft()
            prefilling.append(q)
            takes.append((q, min(news[q], left)))
            left -= takes[-1][1]
        chunk = sum(t for _, t in takes)
        context = self.steps + -(-self.spread // d) if d else self.top_isl
        length = -(-sum(t * isls[q] for q, t in takes) // chunk) if chunk else 0
        key = (decodes_bucket(d), context_bucket(context, self.longest),
               chunk_bucket(chunk) if chunk else 0,
               context_bucket(length, self.top_isl) if chunk else 0)  # fmt: skip
        if self.budget and key[2] > self.budget:
            key = (key[0], key[1], self.budget, key[3])
        return takes, key, context

    def stretch(self, bucket: int, context: int, seconds: float, max_steps: int) -> int:
        """The steps decodes alone repeat from here: until the next request finishes,
        the step cap, the decodes' context passing its bucket's top, or (with room to
        admit it) the next arrival; where there is no room, the queue's longest is at
        the last step's start."""
        k = min(self.finishing[0][0] - self.steps, max_steps - self.steps)
        if bucket < self.longest:
            k = min(k, bucket - context + 1)
        if k > 1 and self.arrived < self.sent:
            d, budget = self.d, self.budget
            if d < self.max_running and (not budget or budget > d):
                k = min(k, _steps_until(self.now, seconds, self.arrival[self.arrived], k))
            else:
                last = self.now + (k - 1) * seconds
                queued = bisect.bisect_right(self.arrival, last, self.arrived, self.sent)
                self.most_waiting = max(self.most_waiting,
                                        len(self.waiting) + queued - self.arrived)  # fmt: skip
        return k

    def advance(self, takes: list[tuple[int, int]], k: int, seconds: float) -> None:
        """Run k steps of `seconds` each: the prompts' tokens taken, a first token for
        each prompt done (one output token: it finishes), a token for each decode, and
        the decodes that reach their last token finish."""
        now = self.now = self.now + k * seconds if k > 1 else self.now + seconds
        steps = self.steps = self.steps + k
        self.tokens += self.d * k
        isls, base = self.isls, self.base
        started = self._prefilled(takes, now) if takes else ()
        for q in started:
            if self.osls[q] == 1:
                self._finished(q)
            else:
                base[q] = steps - 1
                heapq.heappush(self.finishing, (base[q] + self.osls[q], q))
                self.d, self.spread = self.d + 1, self.spread + isls[q] - base[q]
        finishing = self.finishing
        while finishing and finishing[0][0] == steps:
            q = heapq.heappop(finishing)[1]
            self.d, self.spread = self.d - 1, self.spread - (isls[q] - base[q])
            self._finished(q)

    def _prefilled(self, takes: list[tuple[int, int]], now: float) -> list[int]:
        """Add the step's prompt tokens: the requests whose prompt it completes, each with
        its first token `now` (and a token made)."""
        prefilled, news = self.prefilled, self.news
        started = []
        for q, t in takes:
            prefilled[q] += t
            if prefilled[q] == news[q]:
                self.first[q] = now
                started.append(q)
        if started:
            self.tokens += len(started)
            self.prefilling = [q for q in self.prefilling if prefilled[q] < news[q]]
        return started

    def _finished(self, q: int) -> None:
        """Request q is done now; in a closed loop its client sends the next request."""
        self.finish[q], self.done = self.now, self.done + 1
        if self.closed and self.sent < self.n:
            self.arrival[self.sent], self.sent = self.now, self.sent + 1


def _steps_until(start: float, seconds: float, arrival: float, most: int) -> int:
    """The steps from `start` before one that would start at or after `arrival`: the
    least j ≥ 1 with start + j × seconds ≥ arrival, at most `most`."""
    j = max(1, min(most, math.ceil((arrival - start) / seconds)))
    while j > 1 and start + (j - 1) * seconds >= arrival:
        j -= 1
    while j < most and start + j * seconds < arrival:
        j += 1
    return j
