"""Serving curves under a benchmark client's load (`serve --concurrency a,b,…`,
modelcost/analyses/curve.py): the closed loop worked by hand, SGLang's length draw, a curve equal
to the simulation it is made of, the front, and the command line's formats and errors."""

import csv
import io
import json
import random

import pytest
from conftest import MODELS, run_cli

from modelcost.analyses.arrivals import ScenarioSteps, latencies
from modelcost.analyses.curve import BenchLoad, bench_lengths, curves
from modelcost.analyses.scenario import Scenario
from modelcost.analyses.scheduler import ClosedLoop, run
from modelcost.analyses.serving_records import Engine
from modelcost.analyses.serving_search import pareto_front
from modelcost.base.errors import SpecError
from modelcost.ir.graph import Parallel
from modelcost.render.curve_format import render_curves

LLAMA8 = MODELS / "llama3-8b.model"


def constant(d: float):
    """A step of D seconds, whatever its shape."""

    def step(*_shape: int) -> float:
        return d

    return step


def test_a_closed_loop_by_hand() -> None:
    # 6 requests, 2 clients, prompts of 8, osl 4, D = 0.25 s, no budget: requests 0 and
    # 1 are sent at 0, prefilled together in step 1 (first tokens at D), decode 3 steps
    # and finish at 4D = 1 s, when requests 2 and 3 are sent; and so on: three waves of
    # 4 steps, every TTFT D, every latency 4D, every TPOT D, and 2 clients making
    # 2 tokens a step: 2 / D = 8 tokens/s over the 3 s
    trace = run(ClosedLoop(requests=6, clients=2), 8, 8, 4, constant(0.25), 4)
    assert trace.arrival == (0.0, 0.0, 1.0, 1.0, 2.0, 2.0)
    assert trace.first == (0.25, 0.25, 1.25, 1.25, 2.25, 2.25)
    assert trace.finish == (1.0, 1.0, 2.0, 2.0, 3.0, 3.0)
    f = latencies(trace, 4)
    assert (f.ttft.mean, f.tpot.mean, f.latency.mean) == (0.25, 0.25, 1.0)
    assert (f.output_tokens_per_s, trace.steps, trace.end) == (8.0, 12, 3.0)


def test_clients_beyond_what_runs_wait_in_the_queue() -> None:
    # 2 clients, one sequence at a time, osl 2, D = 1: request 1 is sent at 0 but waits
    # for request 0 (done at 2 s): its first token at 3 s, its TTFT 3 s, counted from
    # when it was sent; request 2 is sent when request 0 finishes (2 s), starts at 4 s
    trace = run(ClosedLoop(requests=3, clients=2), 1, 1, 2, constant(1.0), 1)
    assert trace.arrival == (0.0, 0.0, 2.0)
    assert trace.first == (1.0, 3.0, 5.0)
    assert trace.finish == (2.0, 4.0, 6.0)
    # the queue as each step starts, before it admits: requests 0 and 1 at 0 s, requests
    # 1 and 2 at 2 s
    assert trace.max_waiting == 2


def test_lengths_are_drawn_as_sglang_draws_them() -> None:
    # compute_random_lens: uniform over the whole numbers in [max(int(L × r), 1), L]
    rng = random.Random(0)
    drawn = bench_lengths(1000, 0.8, 20_000, rng)
    assert (min(drawn), max(drawn)) == (800, 1000)  # both ends reached over 20,000
    assert sum(drawn) / len(drawn) == pytest.approx(900, abs=1.5)  # the mean of 800..1000
    low = bench_lengths(7, 0.0, 500, random.Random(1))
    assert set(low) == set(range(1, 8))  # ratio 0: from 1 (never 0 tokens) to 7
    assert bench_lengths(1024, 1.0, 5, random.Random(3)) == (1024,) * 5
    load = BenchLoad(prompts=4, ratio=0.5, seed=9)
    assert load.lengths(100, 10) == load.lengths(100, 10)  # seeded: the same draw
    inputs, outputs = load.lengths(100, 10)
    assert all(50 <= i <= 100 for i in inputs) and all(5 <= o <= 10 for o in outputs)
    assert load.said(100, 10) == (
        "4 prompts at each concurrency, inputs uniform in [50, 100], "
        "outputs in [5, 10] (ratio 0.5, seed 9)"
    )


@pytest.fixture(scope="module")
def curve():
    return curves(LLAMA8, "h100", 256, 64, [1, 8, 32], BenchLoad(prompts=40, ratio=0.5),
                  engine=Engine(2048))  # fmt: skip


def test_a_curve_is_the_simulation_it_is_made_of(curve) -> None:
    # each point is scheduler.run on the scenario's steps with the client's lengths, at
    # min(concurrency, the room) running; the bound the same run on the roofline's steps
    sc = Scenario(curve_spec(), load_hw(), Parallel(), 256, 64, Engine(2048), "kernels")
    inputs, outputs = BenchLoad(prompts=40, ratio=0.5).lengths(256, 64)
    (c,) = curve.curves
    for p in c.points:
        for bound, figures in ((False, p.figures), (True, p.bound)):
            trace = run(ClosedLoop(requests=40, clients=p.concurrency), inputs, inputs, outputs,
                        ScenarioSteps(sc, bound), p.running, 2048)  # fmt: skip
            assert latencies(trace, outputs) == figures
        assert p.running == p.concurrency  # the memory holds 32 of 320 tokens on an H100
        assert p.output_tokens_per_s_device == p.figures.output_tokens_per_s  # one device
        assert p.output_tokens_per_s_user == 1 / p.figures.tpot.mean
        # the bound: the same schedule at the roofline's speed, never slower
        assert p.bound_output_tokens_per_s_device >= p.output_tokens_per_s_device
    xy = [(p.output_tokens_per_s_device, p.output_tokens_per_s_user) for p in c.points]
    assert tuple(p.front for p in c.points) == pareto_front(xy)
    assert [p.concurrency for p in c.points] == [1, 8, 32]
    # more clients: more throughput per device, less per user
    assert xy[0][0] < xy[1][0] < xy[2][0] and xy[0][1] > xy[1][1] > xy[2][1]


def curve_spec():
    from modelcost import load_spec

    return load_spec(LLAMA8)


def load_hw():
    from modelcost.targets.hardware import load_hardware

    return load_hardware("h100")


def test_the_api_refuses_what_the_flags_cannot_say() -> None:
    with pytest.raises(SpecError, match="concurrencies must be 1 to 64 positive"):
        curves(LLAMA8, "h100", 256, 64, [0])
    with pytest.raises(SpecError, match="the length ratio must be from 0 to 1"):
        curves(LLAMA8, "h100", 256, 64, [1, 2], BenchLoad(ratio=1.5))
    with pytest.raises(SpecError, match=r"pipeline stages \(pp 2\)"):
        curves(LLAMA8, "h100", 256, 64, [1, 2], layouts=[Parallel(pp=2)])


ARGS = ("serve", str(LLAMA8), "--hw", "h100", "--isl", "256", "--osl", "64", "--budget",
        "2048", "--concurrency", "1,8", "--prompts", "30")  # fmt: skip


def test_serve_writes_a_curve_in_every_format(tmp_path) -> None:
    text = run_cli(*ARGS)
    assert text.returncode == 0, text.stderr
    assert "serving curves, 256 in, 64 out" in text.stdout
    assert "load         30 prompts at each concurrency, 256 in, 64 out" in text.stdout
    assert "closed loop as vLLM's and SGLang's bench_serving run it" in text.stdout
    j = run_cli(*ARGS, "--format", "json", "-o", str(tmp_path / "c.json"))
    assert j.returncode == 0, j.stderr
    again = run_cli(*ARGS, "--format", "json")
    assert (tmp_path / "c.json").read_text() == again.stdout  # deterministic
    data = json.loads(again.stdout)
    assert [p["concurrency"] for p in data["curves"][0]["points"]] == [1, 8]
    rows = list(csv.DictReader(io.StringIO(run_cli(*ARGS, "--format", "csv").stdout)))
    assert [r["concurrency"] for r in rows] == ["1", "8"]
    assert {"ttft_p90_s", "bound_tpot_p99_s", "output_tokens_per_s_user", "layout"} <= set(rows[0])
    point = data["curves"][0]["points"][1]
    assert float(rows[1]["ttft_p90_s"]) == point["figures"]["ttft"]["p90"]
    md = run_cli(*ARGS, "--format", "md").stdout
    assert "| concurrency | running | tok/s/device |" in md and "TTFT p90" in md


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--rate", "1"], "leave out --rate"),
        (["--tpot", "50ms"], "leave out --tpot"),
        (["--pp", "2"], "pipeline stages (pp 2)"),
        (["--concurrency", "1..2**9"], "argument --concurrency"),
    ],
)
def test_bad_curve_flags_exit_2_saying_why(extra, message) -> None:
    r = run_cli(*ARGS, *extra)
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr
    assert r.stdout == ""


def test_a_curve_needs_concurrencies() -> None:
    r = run_cli("serve", str(LLAMA8), "--hw", "h100", "--isl", "256", "--osl", "64",
                "--prompts", "30")  # fmt: skip
    assert r.returncode == 2 and "a curve needs its concurrencies" in r.stderr


def test_the_html_page_escapes_and_carries_the_tooltips(curve) -> None:
    page = render_curves(curve.model_copy(update={"model_title": "a<b>&"}), "html")
    assert "<h1>a&lt;b&gt;&amp; on NVIDIA H100 SXM5 80GB: serving curves" in page
    assert "<b>" not in page
    assert page.count('data-tip="tp 1 at concurrency ') == 3  # a point a concurrency
    assert 'class="legend-item" data-series="tp 1"' in page and "<script>" in page
    assert "http" not in page.split("<script>")[1]  # the script fetches nothing
    assert curve._repr_html_() == render_curves(curve, "html")
