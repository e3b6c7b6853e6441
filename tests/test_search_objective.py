"""`serve --search` (issue 23 item 4): the layouts it tries (tp, and for MoE models the
experts over tp × dp), what `--objective` optimises, and the Pareto front of output
tokens/s per user against per device, in every format."""

from __future__ import annotations

import csv
import io
import json
import xml.etree.ElementTree as ET

import pytest
from conftest import MODELS, run_cli

from modelcost import SpecError, load_spec
from modelcost.analyses.serving import serve
from modelcost.analyses.serving_search import pareto_front, search
from modelcost.ir.graph import Parallel, Phase, Workload
from modelcost.render.serving_format import render_search
from modelcost.roofline.compile import compile_report
from modelcost.targets.hardware import load_hardware

LLAMA70 = load_spec(MODELS / "llama3-70b.model")
H200 = load_hardware("h200")
TPOT = 0.015  # 15 ms: tp 1 cannot hold the model, tp 2 meets it only at 3 sequences


def test_the_pareto_front_of_hand_made_points() -> None:
    # (per user, per device), both maximised: (4, 4) is beaten by (5, 5), (10, 0.5) by
    # (10, 1) and (2, 2) by all three corners; equal points (5, 5) stay together
    points = [(10.0, 1.0), (5.0, 5.0), (1.0, 10.0), (4.0, 4.0), (5.0, 5.0), (10.0, 0.5),
              (2.0, 2.0)]  # fmt: skip
    assert pareto_front(points) == (True, True, True, False, True, False, False)
    assert pareto_front([]) == ()
    assert pareto_front([(1.0, 1.0)]) == (True,)


def _per_device(tp: int, n: int) -> float:
    # the roofline's static batch (serving.py): n prompts prefilled in one step, then
    # 256 decode steps at the mean context 2048 + 256/2 = 2176; output tokens/s of the
    # replica n · 256 / (prefill + 256 · TPOT), over its tp devices
    par = Parallel(tp=tp)
    prefill = compile_report(LLAMA70, H200, Workload(Phase.prefill, n, 2048, parallel=par))
    step = compile_report(LLAMA70, H200, Workload(Phase.decode, n, context=2176, parallel=par))
    return n * 256 / (prefill.totals.time_s + 256 * step.totals.time_s) / tp


def test_the_objectives_pick_differently_where_the_fewest_devices_is_not_the_best() -> None:
    # Llama 3 70B on H200, 2048 in, 256 out, TPOT under 15 ms (the roofline): tp 2 meets
    # it with 3 sequences, tp 4 with 147: the fewest devices is tp 2, the most tokens/s
    # per device tp 4 (6× tp 2's); the lowest TPOT is one sequence on tp 8
    run = {o: search(LLAMA70, H200, 2048, 256, tpot=TPOT, estimate="roofline", objective=o)
           for o in ("throughput-per-device", "devices", "latency")}  # fmt: skip
    best, fewest, fastest = (run[o].chosen for o in run)
    assert best is not None and fewest is not None and fastest is not None
    assert (best.layout, best.concurrency) == ("tp 4", 147)
    assert (fewest.layout, fewest.concurrency) == ("tp 2", 3)
    assert (fastest.layout, fastest.concurrency) == ("tp 8", 1)
    assert best == serve(LLAMA70, H200, 2048, 256, Parallel(tp=4), tpot=TPOT, estimate="roofline")
    assert best.output_tokens_per_s_device == pytest.approx(_per_device(4, 147), rel=1e-12)
    assert fewest.output_tokens_per_s_device == pytest.approx(_per_device(2, 3), rel=1e-12)
    assert best.output_tokens_per_s_device > 6 * fewest.output_tokens_per_s_device
    # latency: the lowest TPOT of every point meeting the target, served at its
    # concurrency: one sequence's decode step on tp 8 at the mean context
    one = compile_report(LLAMA70, H200, Workload(Phase.decode, 1, context=2176,
                                                 parallel=Parallel(tp=8)))  # fmt: skip
    assert fastest.tpot_s == one.totals.time_s
    assert fastest.tpot_s == min(p.tpot_s for p in run["latency"].points if p.meets_targets)
    # the default is the most tokens/s per device, as NVIDIA AIConfigurator's
    assert search(LLAMA70, H200, 2048, 256, tpot=TPOT, estimate="roofline").chosen == best


def test_a_moe_search_tries_the_experts_over_tp_and_dp() -> None:
    # DeepSeek-V3 (FP8, 671 B parameters) on 8 H200: 1, 2 and 4 devices hold no
    # sequence beside the weights; on 8: tp 8, and the 256 experts over the 8 ranks,
    # each whole, with attention over tp 8, tp 4 × dp 2, tp 2 × dp 4 and dp 8; tp 8
    # fills H200's scale-up domain, so tp 8 in 2 and 4 pipeline stages too
    found = search(MODELS / "deepseek-v3.model", H200, 2048, 256, tpot=0.050,
                   estimate="roofline")  # fmt: skip
    assert [s.layout for s in found.tried] == [
        "tp 8", "tp 8, pp 2", "tp 8, pp 4", "tp 8, ep 8, etp 1", "tp 4, dp 2, ep 8, etp 1",
        "tp 2, dp 4, ep 8, etp 1", "dp 8, ep 8"]  # fmt: skip
    # r ranks: tp r, and ep r with dp = 1, 2, …, r (1 + log2 r + 1 layouts): on 1, 2
    # and 4 ranks 1 + 3 + 4 = 8 refused
    assert len(found.refused) == 8
    chosen = found.chosen
    assert chosen is not None
    assert chosen.output_tokens_per_s_device == max(
        s.output_tokens_per_s_device for s in found.tried if s.meets_targets
    )


def _found():
    return search(LLAMA70, H200, 2048, 256, tpot=TPOT, estimate="roofline")


def test_json_and_csv_carry_every_point_the_front_and_the_chosen_flag() -> None:
    found = _found()
    data = json.loads(render_search(found, "json"))
    assert data["objective"] == "throughput-per-device"
    points = data["points"]
    # each layout's curve and its served concurrency, once each
    assert len(points) == sum(len({c.concurrency for c in s.curve} | {s.concurrency})
                              for s in found.tried)  # fmt: skip
    assert [(p["layout"], p["concurrency"]) for p in points if p["chosen"]] == [("tp 4", 147)]
    front = pareto_front([(p["output_tokens_per_s_user"], p["output_tokens_per_s_device"])
                          for p in points])  # fmt: skip
    assert [p["front"] for p in points] == list(front) and any(front) and not all(front)
    assert all(p["output_tokens_per_s_user"] == 1 / p["tpot_s"] for p in points)
    rows = list(csv.DictReader(io.StringIO(render_search(found, "csv"))))
    assert len(rows) == len(points)
    assert [r["chosen"] for r in rows] == [str(p["chosen"]) for p in points]
    assert [r["front"] for r in rows] == [str(p["front"]) for p in points]


def test_the_html_front_chart_is_xml_with_the_chosen_point_marked() -> None:
    html = render_search(_found(), "html")
    start = html.index('<svg xmlns="http://www.w3.org/2000/svg" class="modelcost line-chart" '
                       'data-chart="front"')  # fmt: skip
    svg = ET.fromstring(html[start : html.index("</svg>", start) + len("</svg>")])
    ns = "{http://www.w3.org/2000/svg}"
    titles = [c.find(f"{ns}title").text for c in svg.iter(f"{ns}circle")]
    chosen = [t for t in titles if t.startswith("chosen")]
    assert len(chosen) == 1 and chosen[0].startswith("chosen: 4 devices (tp 4) at 147:")
    assert "TPOT target 15 ms" in "".join(svg.itertext())


def test_text_and_markdown_show_the_front_as_a_table() -> None:
    found = _found()
    md = render_search(found, "md")
    assert "## the Pareto front of output tokens/s per user (1/TPOT) against per device" in md
    assert "| 4 devices (tp 4) | 147 |" in md and "| chosen |" in md
    assert "objective: throughput-per-device" in md
    text = render_search(found, "text")
    on = sum(p.front for p in found.points)
    table = text.split("against per device:\n\n")[1].split("\n\nobjective")[0]
    assert len(table.splitlines()) == on + 2  # the header and its rule


def test_an_unknown_objective_is_refused() -> None:
    r = run_cli("serve", str(MODELS / "llama3-8b.model"), "--hw", "h200", "--search",
                "--isl", "128", "--osl", "128", "--objective", "cheapest")  # fmt: skip
    assert r.returncode == 2 and "invalid choice: 'cheapest'" in r.stderr
    assert "Traceback" not in r.stderr
    with pytest.raises(SpecError, match="objective must be one of throughput-per-device, "
                       "devices, latency, got 'cheapest'"):  # fmt: skip
        search(LLAMA70, H200, 128, 128, objective="cheapest")  # type: ignore[arg-type]


def test_an_objective_without_a_search_is_refused() -> None:
    r = run_cli("serve", str(MODELS / "llama3-8b.model"), "--hw", "h200", "--isl", "128",
                "--osl", "128", "--objective", "devices")  # fmt: skip
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("modelcost: error: --objective goes with --search")
    assert "Traceback" not in r.stderr


def test_the_objective_on_the_command_line() -> None:
    r = run_cli("serve", str(MODELS / "llama3-70b.model"), "--hw", "h200", "--search",
                "--isl", "2048", "--osl", "256", "--tpot", "15ms", "--estimate", "roofline",
                "--objective", "devices", "--format", "json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["objective"] == "devices" and data["chosen"]["layout"] == "tp 2"
