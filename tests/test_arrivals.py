"""Requests arriving over time (`serve --rate`, modelcost/analyses/arrivals.py): the scheduler
against traces worked by hand, the M/D/1 queue's closed form, percentiles by hand, the
caps, and the command line.

The scheduler tests use fake step-time providers (a constant D, or one that records the
steps it is asked for), so every figure is known without a compile."""

import itertools
import json
import math

import pytest
from conftest import MODELS, run_cli
from hypothesis import example, given, settings
from hypothesis import strategies as st

from modelcost.analyses import scheduler
from modelcost.analyses.arrivals import Stats, latencies, percentile, poisson, simulate
from modelcost.analyses.scheduler import (
    ClosedLoop,
    chunk_bucket,
    context_bucket,
    decodes_bucket,
    run,
)
from modelcost.analyses.serving_records import Engine
from modelcost.base.errors import SpecError
from modelcost.render.serving_format import render_arrivals

LLAMA8 = MODELS / "llama3-8b.model"


class Recorded:
    """A constant step time D, recording each step it is asked for."""

    def __init__(self, d: float) -> None:
        self.d, self.calls = d, []

    def __call__(self, decodes: int, context: int, chunk: int, isl: int) -> float:
        self.calls.append((decodes, context, chunk, isl))
        return self.d


def figures(trace, i):
    """Request i's (TTFT, end-to-end latency)."""
    return trace.first[i] - trace.arrival[i], trace.finish[i] - trace.arrival[i]


def test_deterministic_arrivals_with_a_constant_step_by_hand() -> None:
    # D = 0.25 s and arrivals at 0 and 0.125 s (binary fractions: exact sums), osl 3,
    # no budget. Step 1 [0, D]: r0's prompt (r1 not yet there) -> r0's first token at D.
    # Step 2 [D, 2D]: r0 decodes (token 2), r1's whole prompt -> r1's first token at 2D.
    # Step 3 [2D, 3D]: both decode: r0's third token, it finishes at 3D.
    # Step 4 [3D, 4D]: r1's third token: it finishes at 4D.
    d = 0.25
    trace = run([0.0, 0.125], isl=8, prompt=8, osl=3, step=Recorded(d), max_running=4)
    assert figures(trace, 0) == (d, 3 * d)
    assert figures(trace, 1) == (2 * d - 0.125, 4 * d - 0.125)  # 1.5 D and 3.5 D
    assert (trace.steps, trace.tokens, trace.end, trace.stopped) == (4, 6, 4 * d, False)
    f = latencies(trace, osl=3)
    # TPOT = (finish − first) / (osl − 1): (3D − D)/2 = D and (4D − 2D)/2 = D
    assert f.tpot == Stats(mean=d, p50=d, p90=d, p99=d)
    assert f.ttft.mean == (d + 1.5 * d) / 2
    # 6 output tokens from the first arrival (0) to the end (4D = 1 s)
    assert (f.output_tokens_per_s, f.requests_per_s) == (6.0, 2.0)


def test_chunked_prefill_decodes_first_then_prompts_within_the_budget() -> None:
    # budget 4, prompts of 3, osl 3, two requests at 0, D = 0.5:
    # step 1: no decodes; r0 takes 3 tokens, r1 the 1 left: chunk 4 -> r0's first at D
    # step 2: r0 decodes (1 token), r1 the rest of its prompt (2): chunk 2 -> r1's first
    #         at 2D; the context of the decode is isl + 1 token made = 4
    # step 3: both decode at contexts 3 + 2 and 3 + 1: their mean rounded up, 5; r0's
    #         third token: it finishes at 3D
    # step 4: r1 decodes at 3 + 2 = 5: it finishes at 4D
    # (each call's last figure: the chunk's input length, 0 without a chunk)
    d, step = 0.5, Recorded(0.5)
    trace = run([0.0, 0.0], isl=3, prompt=3, osl=3, step=step, max_running=2, budget=4)
    assert step.calls == [(0, 3, 4, 3), (1, 4, 2, 3), (2, 5, 0, 0), (1, 5, 0, 0)]
    assert [figures(trace, i) for i in (0, 1)] == [(d, 3 * d), (2 * d, 4 * d)]


def test_a_prompt_longer_than_the_budget_is_prefilled_in_chunks() -> None:
    # a 10-token prompt under a 4-token budget: chunks of 4, 4, 2 (the second 4 is the
    # memoized step, asked for once), the first token at 3D, then one decode at 10 + 1
    step = Recorded(1.0)
    trace = run([0.0], isl=10, prompt=10, osl=2, step=step, max_running=1, budget=4)
    assert step.calls == [(0, 10, 4, 10), (0, 10, 2, 10), (1, 11, 0, 0)]
    assert figures(trace, 0) == (3.0, 4.0)


def test_md1_mean_wait_matches_the_closed_form() -> None:
    # One sequence at a time (max_running 1), osl 4 and a constant step D: each request
    # holds the device for S = 4 D (its prompt's step gives token 1, three decodes the
    # rest), first come first served, Poisson arrivals: an M/D/1 queue. Its mean wait is
    # ρS / (2(1 − ρ)) (Pollaczek–Khinchine with a deterministic service), ρ = λS; a
    # share 1 − ρ of requests find it idle. At ρ = 0.5 over 50,000 requests the sample
    # mean is within 1 % of it for seeds 0 to 4 (+0.3 % for seed 0): 5 % is the
    # tolerance, the idle share within 0.02 (0.497 to 0.503 over those seeds).
    d, osl, rho, n = 0.01, 4, 0.5, 50_000
    service = osl * d
    trace = run(poisson(rho / service, n, seed=0), 16, 16, osl, Recorded(d), max_running=1)
    f = latencies(trace, osl)
    wait = rho * service / (2 * (1 - rho))
    assert f.ttft.mean - d == pytest.approx(wait, rel=0.05)
    assert f.latency.mean - service == pytest.approx(wait, rel=0.05)
    idle = sum(math.isclose(figures(trace, i)[0], d) for i in range(n)) / n
    assert idle == pytest.approx(1 - rho, abs=0.02)
    assert (f.tpot.mean, f.tpot.p50, f.tpot.p99) == pytest.approx((d, d, d), rel=1e-9)


def test_percentiles_of_a_small_trace_by_hand() -> None:
    # Five requests at 0, one at a time, one-token outputs, D = 1 s: their TTFTs are
    # 1, 2, 3, 4, 5 s. Linear interpolation between ranks (numpy's default): p50 at rank
    # 2 = 3; p90 at rank 3.6 = 4.6; p99 at rank 3.96 = 4.96.
    trace = run([0.0] * 5, 1, 1, 1, Recorded(1.0), max_running=1)
    f = latencies(trace, osl=1)
    assert f.tpot is None  # one token: no gaps between tokens
    assert f.ttft == f.latency
    assert (f.ttft.mean, f.ttft.p50) == (3.0, 3.0)
    assert (f.ttft.p90, f.ttft.p99) == pytest.approx((4.6, 4.96), rel=1e-12)
    # [1, 2, 3, 4, 10]: p90 at rank 3.6 = 4 + 0.6 × 6 = 7.6; p99 = 4 + 0.96 × 6 = 9.76
    ordered = [1.0, 2.0, 3.0, 4.0, 10.0]
    assert [percentile(ordered, p) for p in (0, 50, 100)] == [1.0, 3.0, 10.0]
    assert percentile(ordered, 90) == pytest.approx(7.6, rel=1e-12)
    assert percentile(ordered, 99) == pytest.approx(9.76, rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(
    gaps=st.lists(st.floats(0, 4), min_size=1, max_size=12),
    prompt=st.integers(1, 12),
    osl=st.integers(1, 6),
    running=st.integers(1, 4),
    budget=st.sampled_from([0, 4, 7, 16]),
)
def test_every_run_finishes_each_request_with_its_own_tokens(
    gaps, prompt, osl, running, budget
) -> None:
    # over any arrivals, prompt, output, running limit and budget, with D = 1: every
    # request finishes; its first token at least one step after its arrival and its
    # prompt's steps, its last osl − 1 steps after that at least; percentiles ordered
    if budget:
        running = min(running, budget)
    times = [sum(gaps[: i + 1]) for i in range(len(gaps))]
    trace = run(times, prompt, prompt, osl, Recorded(1.0), running, budget)
    least = -(-prompt // budget) if budget else 1  # steps a prompt takes, alone
    for i in range(len(times)):  # whole steps, to the rounding of arrival + k·D − arrival
        assert trace.first[i] - trace.arrival[i] >= least - 1e-9
        assert trace.finish[i] - trace.first[i] >= osl - 1 - 1e-9
    assert trace.tokens == len(times) * osl and not trace.stopped
    f = latencies(trace, osl)
    for s in (f.ttft, f.latency, *([f.tpot] if f.tpot else [])):
        assert s.p50 <= s.p90 <= s.p99


def test_the_step_cap_stops_a_run_and_says_so(monkeypatch) -> None:
    # 2 requests of 5 tokens, one at a time: 10 steps in all; a cap of 6 finishes r0
    # (steps 1-5) and stops; nothing finished at all is an error, not empty figures
    trace = run([0.0, 0.0], 1, 1, 5, Recorded(1.0), max_running=1, max_steps=6)
    assert (trace.stopped, trace.steps, trace.tokens) == (True, 6, 6)
    assert latencies(trace, 5).finished == 1
    with pytest.raises(SpecError, match=r"no request finished within 3 steps \(the cap\)"):
        latencies(run([0.0], 1, 1, 5, Recorded(1.0), max_running=1, max_steps=3), 5)
    monkeypatch.setattr(scheduler, "MAX_STEPS", 300)
    a = simulate(LLAMA8, "h100", 128, 256, rate=1000, requests=4, concurrency=1)
    # 256 steps a request, one at a time: the first finishes at step 256, the cap at 300
    assert a.note == "stopped at the 300-step cap: 1 of 4 requests finished; the figures are theirs"
    assert a.figures.finished == 1 and a.figures.steps == 300
    assert "note             stopped at the 300-step cap" in render_arrivals(a, "text")


def test_the_event_cap_stops_a_run_and_says_so(monkeypatch) -> None:
    # one request at a time, isl 1, osl 5: the context bucket (⌈6/32⌉ = 1 token) moves
    # every step, so each step is an event: 2 requests are 10 events, a cap of 7 finishes
    # r0 (events 1-5) and stops two events into r1
    trace = run([0.0, 0.0], 1, 1, 5, Recorded(1.0), max_running=1, max_events=7)
    assert (trace.stopped, trace.events, trace.steps) == (True, 7, 7)
    assert latencies(trace, 5).finished == 1
    # decodes alone are one event a stretch: 1,000 requests of 1,000 + 1,000 tokens one
    # at a time are a million steps in 18 events a request: its prompt's step, then its
    # decodes at contexts 1,001 to 1,999 across the buckets of ⌈2,000/32⌉ = 63 tokens
    # that end at 1,008, 1,071, …, 2,016 (held to 2,000): (2,016 − 1,008)/63 + 1 = 17
    long = run(ClosedLoop(requests=1000, clients=1), 1000, 1000, 1000, Recorded(1.0), 1)
    assert (long.steps, long.events, long.stopped) == (1_000_000, 18_000, False)
    assert long.end == 1_000_000.0  # a request's 1,000 steps of D = 1 s, back to back
    monkeypatch.setattr(scheduler, "MAX_EVENTS", 40)
    a = simulate(LLAMA8, "h100", 128, 256, rate=1000, requests=4, concurrency=1)
    assert a.note == "stopped at the 40-event cap: 1 of 4 requests finished; the figures are theirs"


def test_buckets_round_up_by_at_most_their_stated_share() -> None:
    # context: a multiple of ⌈(isl + osl)/32⌉, never past isl + osl; chunk: exact to 32,
    # then 5 significant bits (a multiple of 2^(bits − 5)): at most 1/16 more
    assert [context_bucket(c, 320) for c in (1, 10, 11, 315, 320)] == [10, 10, 20, 320, 320]
    # ⌈101/32⌉ = 4: 99 -> 100; 101 -> 104, held to the longest, 101
    assert (context_bucket(99, 101), context_bucket(101, 101)) == (100, 101)
    assert [chunk_bucket(c) for c in (1, 31, 32, 33, 63, 64, 65, 1000)] == [
        1, 31, 32, 34, 64, 64, 68, 1024,
    ]  # fmt: skip
    for c in range(1, 5000):
        assert c <= chunk_bucket(c) <= c * 17 / 16
    # decodes: exact to 64, then 6 significant bits: less than 1/32 more
    assert [decodes_bucket(d) for d in (1, 64, 65, 127, 128, 129, 500)] == [
        1, 64, 66, 128, 128, 132, 504,
    ]  # fmt: skip
    for d in range(1, 5000):
        assert d <= decodes_bucket(d) < d * 33 / 32


def test_poisson_arrivals_are_seeded_and_ascending() -> None:
    a, b = poisson(2.0, 1000, seed=7), poisson(2.0, 1000, seed=7)
    assert a == b != poisson(2.0, 1000, seed=8)
    assert all(x < y for x, y in itertools.pairwise(a))
    # mean gap 1/λ = 0.5 s; over 1,000 gaps the standard error is 0.5/√1000 ≈ 3 %
    assert a[-1] / 1000 == pytest.approx(0.5, rel=0.1)


def test_the_scenario_steps_are_serves_compiles_and_the_bound_is_below() -> None:
    a = simulate(LLAMA8, "h100", 512, 64, rate=5, requests=30, engine=Engine(2048))
    b = a.bound
    assert a.estimate == "kernels" and a.figures.finished == b.finished == 30
    assert b.ttft.mean < a.figures.ttft.mean and b.tpot.mean < a.figures.tpot.mean
    assert a.engine == "in-flight batching, chunked prefill, 2,048 tokens a step"
    roof = simulate(LLAMA8, "h100", 512, 64, rate=5, requests=30, engine=Engine(2048),
                    estimate="roofline")  # fmt: skip
    assert roof.figures == roof.bound == a.bound  # the same arrivals, the roofline's steps


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rate", "0"], "argument --rate: expected requests per second from 0.001 to 1e+06"),
        (["--rate", "nan"], "argument --rate: expected requests per second"),
        (["--rate", "1", "--requests", "100001"], "at most 100,000 requests a run, got 100,001"),
        (["--rate", "1", "--seed", "-1"], "argument --seed: expected a whole number from 0"),
        (["--requests", "5"], "--requests and --seed go with --rate"),
        (["--rate", "1", "--search"], "--rate simulates one request class: leave out --search"),
        (["--rate", "1", "--tpot", "5ms"], "leave out --tpot"),
        # a serving pipeline keeps a batch in flight a stage; the simulation runs one
        (["--rate", "1", "--pp", "2"], "pipeline stages (pp 2): the step-by-step simulation"),
        # the most that fit in what vLLM (the default engine) leaves the cache:
        # gpu_memory_utilization 0.9 of the device (specs/kernels/engines.json)
        (["--rate", "1", "--concurrency", "100000"], "--concurrency 100,000: at most 362"),
    ],
)
def test_bad_rate_flags_exit_2_saying_why(args, message) -> None:
    r = run_cli("serve", str(LLAMA8), "--hw", "h100", "--isl", "1024", "--osl", "256", *args)
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr
    assert r.stdout == ""


def test_serve_rate_json_carries_both_and_is_deterministic(tmp_path) -> None:
    args = ("serve", str(LLAMA8), "--hw", "h100", "--isl", "256", "--osl", "32", "--rate",
            "20", "--requests", "40", "--seed", "3", "--format", "json")  # fmt: skip
    r = run_cli(*args, "-o", str(tmp_path / "a.json"))
    assert r.returncode == 0, r.stderr
    again = run_cli(*args)
    text = (tmp_path / "a.json").read_text()
    assert text == again.stdout
    out = json.loads(text)
    assert (out["requests"], out["seed"], out["rate"], out["estimate"]) == (40, 3, 20.0, "kernels")
    assert set(out["figures"]["ttft"]) == {"mean", "p50", "p90", "p99"}
    assert out["bound"]["ttft"]["p99"] <= out["figures"]["ttft"]["p99"]
    md = run_cli(*args[:-1], "md")
    assert "| TTFT, bound |" in md.stdout and "| requests | 40 arriving at 20/s" in md.stdout


def test_serve_rate_html_escapes_what_comes_from_files() -> None:
    a = simulate(LLAMA8, "h100", 128, 8, rate=5, requests=5)
    page = render_arrivals(a.model_copy(update={"model_title": "a<b>&"}), "html")
    assert "<h1>a&lt;b&gt;&amp; on NVIDIA H100 SXM5 80GB: requests arriving over time</h1>" in page
    assert "<b>" not in page and "<td>TTFT, bound</td>" in page
    assert a._repr_html_() == render_arrivals(a, "html")


def stepwise(load, isl, prompt, osl, step, max_running, budget=0, max_steps=10**9):
    """The scheduler as the module docstring says it, one step at a time, every
    running sequence visited each step: what `run` (stretches of decodes at once, sums
    and a heap) must equal. Returns (arrival, first, finish, end, steps, tokens, the
    longest queue, the step keys asked for)."""
    closed = isinstance(load, ClosedLoop)
    n = load.requests if closed else len(load)
    each = lambda v: [v] * n if isinstance(v, int) else list(v)  # noqa: E731
    isls, news, osls = each(isl), each(prompt), each(osl)
    if closed:
        sent = min(load.clients, n)
        arrival = [0.0] * sent + [math.nan] * (n - sent)
    else:
        arrival, sent = list(load), n
    first, finish, prefilled, made = [math.nan] * n, [math.nan] * n, [0] * n, [0] * n
    waiting, running, keys = [], [], []
    longest = max(isls) + max(osls)
    now, arrived, done, steps, most, tokens = 0.0, 0, 0, 0, 0, 0
    while done < n:
        while arrived < sent and arrival[arrived] <= now:
            waiting.append(arrived)
            arrived += 1
        if not running and not waiting:
            now = arrival[arrived]
            continue
        if steps == max_steps:
            break
        most = max(most, len(waiting))
        decoding = [r for r in running if prefilled[r] == news[r]]
        left = budget - len(decoding) if budget else 10**18
        takes = []
        for r in running:
            if prefilled[r] < news[r] and left > 0:
                takes.append((r, min(news[r] - prefilled[r], left)))
                left -= takes[-1][1]
        while waiting and len(running) < max_running and left > 0:
            r = waiting.pop(0)
            running.append(r)
            takes.append((r, min(news[r], left)))
            left -= takes[-1][1]
        chunk, d = sum(t for _, t in takes), len(decoding)
        context = -(-sum(isls[r] + made[r] for r in decoding) // d) if d else max(isls)
        length = -(-sum(t * isls[r] for r, t in takes) // chunk) if chunk else 0
        key = (
            decodes_bucket(d),
            context_bucket(context, longest),
            chunk_bucket(chunk) if chunk else 0,
            context_bucket(length, max(isls)) if chunk else 0,
        )
        if budget and key[2] > budget:
            key = (key[0], key[1], budget, key[3])
        keys.append(key)
        now += step(*key)
        steps += 1
        for r in decoding:
            made[r] += 1
        for r, t in takes:
            prefilled[r] += t
            if prefilled[r] == news[r]:
                made[r], first[r] = 1, now
        tokens += d + sum(1 for r, _ in takes if prefilled[r] == news[r])
        still = []
        for r in running:
            if made[r] == osls[r]:
                finish[r], done = now, done + 1
                if closed and sent < n:
                    arrival[sent], sent = now, sent + 1
            else:
                still.append(r)
        running = still
    return arrival, first, finish, now, steps, tokens, most, keys


class Timed:
    """A step time that depends on the step's shape (so a wrong shape shows), in
    binary fractions of a second, recording the distinct shapes asked for."""

    def __init__(self) -> None:
        self.asked: set = set()

    def __call__(self, decodes: int, context: int, chunk: int, isl: int) -> float:
        self.asked.add((decodes, context, chunk, isl))
        return 0.25 + decodes / 64 + context / 1024 + chunk / 256 + isl / 4096


def same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9)


@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(1, 14),
    gaps=st.lists(st.sampled_from([0.0, 0.125, 0.5, 3.0, 40.0]), min_size=14, max_size=14),
    isls=st.lists(st.integers(1, 40), min_size=14, max_size=14),
    osls=st.lists(st.integers(1, 60), min_size=14, max_size=14),
    hit=st.sampled_from([0, 0.5]),
    running=st.integers(1, 5),
    budget=st.sampled_from([0, 5, 9, 64]),
    clients=st.sampled_from([0, 1, 3, 8]),
    cap=st.sampled_from([10**9, 7, 50]),
)
# the step cap reached just as two requests arrive (t = 40 s after 50 steps): the queue
# at the stop is no step's, so it is not the longest (a regression of this stop's split
# of run into _Run's parts, found by the property)
@example(n=3, gaps=[0.0, 40.0] + [0.0] * 12, isls=[1] * 14, osls=[50] + [1] * 13, hit=0,
         running=1, budget=0, clients=0, cap=50)  # fmt: skip
def test_the_run_equals_the_scheduler_step_by_step(
    n, gaps, isls, osls, hit, running, budget, clients, cap
) -> None:
    # over any arrivals (or a closed loop of clients), lengths a request, prefix hits,
    # running limit, budget and step cap: `run`'s stretches, sums and heap give the
    # same steps, tokens, queue and step shapes as the scheduler visiting every
    # sequence each step, and the same times to the rounding of k × D against k
    # additions of D
    if budget:
        running = min(running, budget)
    isl, osl = isls[:n], osls[:n]
    new = [i - math.floor(i * hit) for i in isl]
    load = ClosedLoop(requests=n, clients=clients) if clients else (
        [sum(gaps[: i + 1]) for i in range(n)])  # fmt: skip
    fast, slow = Timed(), Timed()
    trace = run(load, isl, new, osl, fast, running, budget, cap)
    arrival, first, finish, end, steps, tokens, most, keys = stepwise(
        load, isl, new, osl, slow, running, budget, cap
    )
    assert (trace.steps, trace.tokens, trace.max_waiting) == (steps, tokens, most)
    assert fast.asked == slow.asked == set(keys) and trace.shapes == len(fast.asked)
    assert trace.stopped == any(math.isnan(f) for f in finish)
    for got, want in ((trace.arrival, arrival), (trace.first, first), (trace.finish, finish)):
        assert all(same(a, b) for a, b in zip(got, want, strict=True))
    assert same(trace.end, end)
