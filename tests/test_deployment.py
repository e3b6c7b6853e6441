"""Aggregated or disaggregated within a device budget (issue 23, item 4: `--search` tries
disaggregated pools too): each mode's best by the objective, the choice between them by
the same key, one Pareto front over both, and what the joint search refuses."""

import json

import pytest
from conftest import MODELS, run_cli

from modelcost import load_spec
from modelcost.analyses.deployment import search_deployment
from modelcost.analyses.disagg import search_disagg
from modelcost.analyses.serving_records import Engine
from modelcost.analyses.serving_search import choice_key, search

LLAMA70_FP8 = load_spec(MODELS / "llama3-70b-fp8.model")
# 4,096 + 1,024 tokens, TPOT ≤ 30 ms, TTFT ≤ 2 s, within 16 H200s (docs/serving.md)
ASK = {"isl": 4096, "osl": 1024, "devices": 16, "tpot": 0.030, "ttft": 2.0}


@pytest.fixture(scope="module")
def both():
    return search_deployment(LLAMA70_FP8, "h200", **ASK)


def test_choice_key_orders_by_the_objective() -> None:
    # by hand: a = 4 devices at 300 tok/s per device, TPOT 12 ms; b = 14 devices at
    # 1,000 per device, TPOT 26 ms
    class A:
        devices, output_tokens_per_s_device, tpot_s = 4, 300.0, 0.012

    class B:
        devices, output_tokens_per_s_device, tpot_s = 14, 1000.0, 0.026

    a, b = A(), B()
    assert choice_key("throughput-per-device", b) < choice_key("throughput-per-device", a)
    assert choice_key("devices", a) < choice_key("devices", b)
    assert choice_key("latency", a) < choice_key("latency", b)
    # ties go to the fewest devices
    assert choice_key("throughput-per-device", a) == (-300.0, 4)


def test_each_modes_best_is_its_own_searchs(both) -> None:
    # the joint search runs the two searches as they run alone, within the same budget
    agg = search(LLAMA70_FP8, "h200", 4096, 1024, 0.030, 2.0, max_devices=16)
    dis = search_disagg(LLAMA70_FP8, "h200", 4096, 1024, 16, 0.030, 2.0)
    assert both.best_aggregated == agg.chosen
    assert both.best_disaggregated == dis.chosen
    assert all(s.devices <= 16 for s in both.aggregated.tried)
    assert all(s.devices <= 16 for s in both.disaggregated.tried)


def test_the_better_mode_is_chosen_by_the_same_key(both) -> None:
    # docs/serving.md: aggregated tp 4 at 18 sequences (the static batch's prefill, 1.99 s,
    # is what the TTFT target allows), 271.0 output tokens/s per device; disaggregated 4 ×
    # tp 2 prefill and 3 × tp 2 decode, 14 devices, 997.7: 3.68× the aggregated
    a, d = both.best_aggregated, both.best_disaggregated
    assert (a.layout, a.concurrency, round(a.output_tokens_per_s_device, 1)) == ("tp 4", 18, 271.0)
    assert (d.prefill.count, d.prefill.layout, d.decode.count, d.decode.layout) == (
        4,
        "tp 2",
        3,
        "tp 2",
    )
    assert (d.devices, round(d.output_tokens_per_s_device, 1)) == (14, 997.7)
    assert both.chosen == "disaggregated"
    assert choice_key(both.objective, d) < choice_key(both.objective, a)
    # the fewest devices: one H200 meets the targets aggregated, two pools need 2 at least
    fewest = search_deployment(LLAMA70_FP8, "h200", **ASK, objective="devices")
    assert fewest.chosen == "aggregated" and fewest.best_aggregated.devices == 1
    assert round(fewest.best_aggregated.output_tokens_per_s_device, 1) == 169.7
    d = fewest.best_disaggregated  # 1 × tp 2 prefill, 1 × tp 1 decode: 3 devices
    assert (d.devices, round(d.output_tokens_per_s_device, 1)) == (3, 535.9)


def test_one_front_over_both_modes(both) -> None:
    pts = both.points
    modes = {p.mode for p in pts}
    assert modes == {"aggregated", "disaggregated"}
    # a pair of pools is one point, at its decode concurrency
    assert sum(p.mode == "disaggregated" for p in pts) == len(both.disaggregated.tried)

    def dominated(p, among) -> bool:
        return any(q.output_tokens_per_s_user >= p.output_tokens_per_s_user
                   and q.output_tokens_per_s_device >= p.output_tokens_per_s_device
                   and (q.output_tokens_per_s_user > p.output_tokens_per_s_user
                        or q.output_tokens_per_s_device > p.output_tokens_per_s_device)
                   for q in among)  # fmt: skip

    # the front is over every point tried, meeting the targets or not (as serve --search's)
    assert all(p.front == (not dominated(p, pts)) for p in pts)
    chosen = [p for p in pts if p.chosen]
    assert len(chosen) == 1 and chosen[0].mode == "disaggregated"
    # no point meeting the targets beats the chosen one on both axes
    assert not dominated(chosen[0], [p for p in pts if p.meets_targets])


def test_with_a_prefill_budget_the_aggregated_layouts_batch_in_flight() -> None:
    # --budget is the engine's chunked prefill: the aggregated layouts run it, the pools
    # run whole prompts (their search refuses a budget on its own); in flight, the
    # aggregated layout meets the TTFT target at more sequences than as a static batch
    inflight = search_deployment(LLAMA70_FP8, "h200", **ASK, engine=Engine(budget=8192))
    assert inflight.disaggregated is not None and not inflight.refused
    static = search_deployment(LLAMA70_FP8, "h200", **ASK)
    assert (inflight.best_aggregated.output_tokens_per_s_device
            > static.best_aggregated.output_tokens_per_s_device)  # fmt: skip
    assert inflight.best_disaggregated == static.best_disaggregated
    # docs/serving.md: one H200 at 25 sequences in flight, 837.6 tokens/s per device; the
    # pools' 997.7 still win (1.19×)
    a = inflight.best_aggregated
    assert (a.devices, a.concurrency, round(a.output_tokens_per_s_device, 1)) == (1, 25, 837.6)
    assert inflight.chosen == "disaggregated"


def test_a_budget_of_one_device_has_no_pools() -> None:
    one = search_deployment(load_spec(MODELS / "llama3-8b.model"), "h100", 128, 128, 1)
    assert one.disaggregated is None
    assert one.refused == ("disaggregated: two pools need 2 devices at least",)
    assert one.chosen == "aggregated" and one.best_aggregated.devices == 1


def test_the_aggregated_search_keeps_to_the_budget() -> None:
    # 8 devices: tp 8 in 2 or 4 pipeline stages (16, 32 devices) is over it, said in one line
    found = search(LLAMA70_FP8, "h200", 1024, 256, max_devices=8)
    assert max(s.devices for s in found.tried) == 8
    assert "tp 8, pp 2 / tp 8, pp 4: over the budget of 8 devices" in found.refused


def test_the_cli_answers_in_every_format() -> None:
    args = [
        "serve",
        str(MODELS / "llama3-70b-fp8.model"),
        "--hw",
        "h200",
        "--isl",
        "4096",
        "--osl",
        "1024",
        "--tpot",
        "30ms",
        "--ttft",
        "2s",
        "--search",
        "--devices",
        "16",
    ]
    r = run_cli(*args, "--format", "json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["chosen"] == "disaggregated" and got["objective"] == "throughput-per-device"
    assert got["disaggregated"]["chosen"]["devices"] == 14
    text = run_cli(*args).stdout
    assert "chosen: disaggregated, prefill 4 × tp 2, decode 3 × tp 2 on 14 devices" in text
    assert "the best aggregated, tp 4 on 4 devices" in text and "(the chosen gives 3.68×)" in text
    csv = run_cli(*args, "--format", "csv").stdout.splitlines()
    assert csv[0] == (
        "layout,devices,concurrency,ttft_s,tpot_s,output_tokens_per_s_user,"
        "output_tokens_per_s_device,meets_targets,front,chosen,mode"
    )
    assert sum(line.endswith(",True,disaggregated") for line in csv[1:]) == 1  # the chosen
    html = run_cli(*args, "--format", "html").stdout
    assert "<svg" in html and "other aggregated points" in html
    assert "## each mode&#x27;s best" not in html
    md = run_cli(*args, "--format", "md").stdout
    assert "## each mode's best" in md and "| disaggregated | prefill 4 × tp 2" in md


@pytest.mark.parametrize(("flags", "message"), [
    (["--devices", "8"], "--devices is a search's budget"),
    (["--search", "--devices", "8", "--tp", "2"], "--search --devices: leave out the layout"),
    (["--search", "--devices", "8", "--concurrency", "4"], "leave out --concurrency"),
    (["--search", "--devices", "8", "--speculative"], "leave out --speculative"),
])  # fmt: skip
def test_what_the_joint_search_refuses(flags: list[str], message: str) -> None:
    r = run_cli("serve", str(MODELS / "llama3-8b.model"), "--hw", "h100", "--isl", "128",
                "--osl", "128", *flags)  # fmt: skip
    assert r.returncode == 2, r.stdout
    assert message in r.stderr and "Traceback" not in r.stderr


def test_each_serving_answer_shows_itself_in_a_notebook(both) -> None:
    # the disaggregated answers had no notebook display (TypeError from render.notebook):
    # each is now its --format html page
    from modelcost.render.disagg_format import render_deployment, render_disagg_search

    assert both._repr_html_() == render_deployment(both, "html")
    assert both.disaggregated._repr_html_() == render_disagg_search(both.disaggregated, "html")
    assert both.best_disaggregated._repr_html_().startswith("<!DOCTYPE html>")
