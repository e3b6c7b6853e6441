"""Serving a request mix: the solved concurrency against the memory figures, and each
figure against the compile of the same point.

These tests check the serving arithmetic on the roofline's step times (estimate =
"roofline"); test_defects_round2.py and below check that the kernel-aware estimate,
serve's default, reads the same steps' estimates and carries the bound beside them."""

import json
from functools import partial
from pathlib import Path

import pytest
from conftest import MODELS, run_cli

from modelcost import load_spec
from modelcost.analyses.serving import serve as serve_planned
from modelcost.ir.graph import Parallel, Phase, Workload
from modelcost.roofline.compile import compile_report
from modelcost.targets.hardware import load_hardware

serve = partial(serve_planned, estimate="roofline")
LLAMA70 = load_spec(MODELS / "llama3-70b.model")
H200 = load_hardware("h200")
TP4 = Parallel(tp=4)


def decode(n: int, context: int):
    return compile_report(LLAMA70, H200, Workload(Phase.decode, n, context=context,
                                                  parallel=TP4))  # fmt: skip


def test_the_largest_concurrency_is_solved_from_the_memory_figures() -> None:
    from modelcost.analyses.serving_records import Engine

    s = serve(LLAMA70, H200, 2048, 256, TP4)
    n, full = s.max_concurrency, 2048 + 256
    m = decode(n, full).totals.memory
    # vLLM (the default engine) keeps its KV cache, weights and activations within
    # gpu_memory_utilization = 0.9 of the device (specs/kernels/engines.json): floor((0.9 ×
    # capacity − weights − activations) / KV per sequence), at the batch solved for:
    # (0.9 × 150,754,820,096 − 35,278,831,616 − 170,259,840) / 188,743,680 = 531.04
    per_seq = decode(1, full).totals.memory.kv_cache
    assert n == int((0.9 * m.capacity - m.weights - m.activations) // per_seq) == 531
    assert s.memory_fraction == 0.9 and "KV cache: 0.9 of the device" in s.engine_reason
    more = decode(n + 1, full).totals.memory
    assert more.kv_cache > 0.9 * more.capacity - more.weights - more.activations
    # the whole device (--memory-fraction 1): what the memory alone holds, 610
    whole = serve(LLAMA70, H200, 2048, 256, TP4, engine=Engine(memory_fraction=1.0))
    m = decode(610, full).totals.memory
    assert whole.max_concurrency == int((m.capacity - m.weights - m.activations) // per_seq)
    assert whole.max_concurrency == 610 and not decode(611, full).totals.memory.fits


def test_each_figure_is_the_compile_of_its_point() -> None:
    s = serve(LLAMA70, H200, 2048, 256, TP4, concurrency=64)
    tpot = decode(64, 2048 + 128).totals.time_s  # the mean context, isl + osl/2
    ttft = compile_report(LLAMA70, H200, Workload(Phase.prefill, 1, 2048, parallel=TP4))
    prefills = compile_report(LLAMA70, H200, Workload(Phase.prefill, 64, 2048, parallel=TP4))
    assert (s.tpot_s, s.ttft_s) == (tpot, ttft.totals.time_s)
    assert s.latency_s == ttft.totals.time_s + 256 * tpot
    assert s.output_tokens_per_s == 64 * 256 / (prefills.totals.time_s + 256 * tpot)
    assert s.output_tokens_per_s_device == s.output_tokens_per_s / 4


def test_a_tpot_target_picks_the_largest_batch_meeting_it() -> None:
    s = serve(LLAMA70, H200, 2048, 256, TP4, tpot=0.012)
    assert s.meets_targets and s.tpot_s <= 0.012
    assert s.concurrency < s.max_concurrency
    assert decode(s.concurrency + 1, 2048 + 128).totals.time_s > 0.012


def test_targets_no_batch_meets_exit_1_saying_why() -> None:
    spec = str(MODELS / "llama3-70b.model")
    r = run_cli("serve", spec, "--hw", "h200", "--tp", "4", "--isl", "2Ki", "--osl", "256",
                "--tpot", "1ms", "--format", "json")  # fmt: skip
    assert r.returncode == 1
    assert "one sequence per replica already takes over 1 ms a token" in r.stderr
    assert json.loads(r.stdout)["meets_targets"] is False
    ok = run_cli("serve", spec, "--hw", "h200", "--tp", "4", "--isl", "2Ki", "--osl", "256")
    assert ok.returncode == 0 and "TPOT" in ok.stdout


@pytest.mark.parametrize(("args", "message"), [
    (["--tpot", "fast"], "expected a duration"),
    (["--isl", "0"], "expected a positive integer"),
])  # fmt: skip
def test_bad_serving_requests_exit_2(args, message) -> None:
    base = ["serve", str(MODELS / "llama3-70b.model"), "--hw", "h200", "--isl", "128",
            "--osl", "128"]  # fmt: skip
    r = run_cli(*base, *args)
    assert r.returncode == 2 and message in r.stderr


def test_a_model_that_cannot_hold_one_sequence_is_refused() -> None:
    r = run_cli("serve", str(MODELS / "llama3.1-405b.model"), "--hw", "h100", "--isl", "128",
                "--osl", "128")  # fmt: skip
    assert r.returncode == 2 and "fits beside the weights" in r.stderr


def test_chunked_prefill_figures_are_its_mixed_steps() -> None:
    from modelcost.analyses.serving_records import Engine

    engine = Engine(budget=8192, prefix_hit=0.5)
    s = serve(LLAMA70, H200, 2048, 256, TP4, concurrency=100, engine=engine)
    # half of each prompt is cached: 1,024 new tokens; as many requests start as finish,
    # so 100 decodes a step admit ⌈100 · 1024 / 256⌉ = 400 prompt tokens a step
    assert (s.cached, s.chunk) == (1024, 400)
    w = Workload(Phase.decode, 100, context=2048 + 128, parallel=TP4, chunk=400, prompt=1024,
                 prefix=1024)  # fmt: skip
    step = compile_report(LLAMA70, H200, w).totals.time_s
    assert s.tpot_s == step
    assert s.ttft_s == 3 * step  # ⌈1024 / 400⌉ steps of a prompt's chunks
    assert s.output_tokens_per_s == 100 / step
    # the budget bounds the concurrency: n + ⌈n·1024/256⌉ ≤ 8192 gives n ≤ 1638; the
    # memory holds fewer
    assert s.max_concurrency <= 1638


def test_the_budget_bounds_the_concurrency() -> None:
    from modelcost.analyses.serving_records import Engine

    s = serve(LLAMA70, H200, 2048, 128, Parallel(tp=8), engine=Engine(budget=4096))
    # n + ⌈n · 2048/128⌉ ≤ 4096: 17·n ≤ 4096, n = 240 (240 + 3,840 = 4,080; 241 needs 4,097)
    assert s.max_concurrency == 240 and s.chunk == 3840


def test_search_picks_the_fewest_devices_meeting_the_targets() -> None:
    # the README's question: Llama 3.1 405B in FP8 on H200s, 2048 in, 256 out, TPOT
    # under 50 ms. FP8 weights are 406 GB: tp 1 and 2 cannot hold them with a cache
    # (141 GB each), tp 4 meets the target
    from modelcost.analyses.serving_search import search

    spec = load_spec(MODELS / "llama3.1-405b-fp8.model")
    found = search(spec, H200, 2048, 256, tpot=0.050, estimate="roofline")
    assert found.chosen is not None and found.chosen.layout == "tp 4"
    assert found.chosen.tpot_s <= 0.050
    # up to the NVLink domain, and tp 8 (filling it) in 2 and 4 pipeline stages
    assert [s.layout for s in found.tried] == ["tp 4", "tp 8", "tp 8, pp 2", "tp 8, pp 4"]
    assert [r.split(":")[0] for r in found.refused] == ["tp 1", "tp 2"]


def test_a_mix_is_its_classes_taking_turns(tmp_path) -> None:
    from modelcost.analyses.serving_mix import load_mix, serve_mix

    path = tmp_path / "mix.txt"
    path.write_text("# isl osl share\n128 2Ki 3\n2048 128 1  # long prompts\n")
    mix = load_mix(path)
    m = serve_mix(LLAMA70, H200, mix, TP4, estimate="roofline")
    a, b = m.classes
    assert (a.isl, a.osl, b.isl, b.osl) == (128, 2048, 2048, 128) and m.shares == (0.75, 0.25)
    tokens = 0.75 * 2048 + 0.25 * 128
    seconds = 0.75 * 2048 / a.output_tokens_per_s + 0.25 * 128 / b.output_tokens_per_s
    assert m.output_tokens_per_s == tokens / seconds


@pytest.mark.parametrize(("text", "where", "message"), [
    ("128 2048\n2048 x\n", ":2:6:", "OSL must be a positive count, got 'x'"),
    ("128 2048 0\n", ":1:10:", "SHARE must be a positive number"),
    ("128\n", ":1:", "expected ISL OSL [SHARE], got 1 fields"),
    ("# nothing\n", "mix.txt", "names no request class"),
])  # fmt: skip
def test_a_bad_mix_file_is_a_positioned_error(tmp_path, text, where, message) -> None:
    path = tmp_path / "mix.txt"
    path.write_text(text)
    r = run_cli("serve", str(MODELS / "llama3-70b.model"), "--hw", "h200", "--tp", "4",
                "--mix", str(path))  # fmt: skip
    assert r.returncode == 2 and message in r.stderr and where in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


TRT = json.loads((Path(__file__).parent / "data" / "measured-tp-serving.json").read_text())


@pytest.mark.parametrize(
    "point", TRT["points"], ids=lambda p: f"{p['spec']}-{p['hardware']}-{p['isl']}-{p['osl']}"
)
def test_published_serving_tables_are_one_command_each_and_stay_under_the_bound(
    tmp_path, point
) -> None:
    # TensorRT-LLM's max-throughput table (tests/data/measured-tp-serving.json): the
    # same model in its format (its precision recipe), the same tp, ISL and OSL, through
    # `modelcost serve --engine trtllm` (static batches of the most requests that fit). Its output
    # tokens/s is an upper bound: no published figure may beat it
    path = MODELS / f"{point['spec']}.model"
    if point["dtype"] != "fp8":  # shipped: the FP8 ones; ModelOpt's NVFP4 has an FP8 cache
        base = load_spec(path).name
        path = tmp_path / "q.model"
        path.write_text(f'import "{MODELS / (point["spec"] + ".model")}"\n'
                        f"model q extends {base} {{\n  recipe = {point['dtype']}\n"
                        "  kv_dtype = fp8_e4m3\n}\n")  # fmt: skip
    else:
        path = MODELS / f"{point['spec']}-fp8.model"
    r = run_cli("serve", str(path), "--hw", point["hardware"], "--tp", str(point["tp"]),
                "--isl", str(point["isl"]), "--osl", str(point["osl"]), "--engine", "trtllm",
                "--format", "json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    bound = json.loads(r.stdout)["bound"]["output_tokens_per_s"]
    assert bound >= point["output_tokens_per_s"]


def test_serving_results_are_rows_for_scripts_and_pages_for_notebooks() -> None:
    import csv
    import io

    import modelcost as mc

    s = mc.serve(LLAMA70, H200, 2048, 256, TP4, tpot=0.020, estimate="roofline")
    (record,) = s.to_records()
    assert record["concurrency"] == s.concurrency and "curve" not in record
    (row,) = list(csv.DictReader(io.StringIO(s.to_csv())))
    assert float(row["tpot_s"]) == s.tpot_s and row["meets_targets"] == "True"
    # the curve: concurrency 1, 2, 4, … and the most that fit (531 in vLLM's 0.9 of the
    # 143,771 MiB nvidia-smi reports for an H200, specs/hardware/h200.hw; 610 in all of it)
    assert [p.concurrency for p in s.curve] == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 531]
    assert s.curve[6].tpot_s == decode(64, 2048 + 128).totals.time_s
    html = s._repr_html_()
    assert html.count('class="modelcost line-chart"') == 2 and "TPOT target 20 ms" in html
    found = mc.search(load_spec(MODELS / "llama3.1-405b-fp8.model"), H200, 2048, 256,
                      tpot=0.050, estimate="roofline")  # fmt: skip
    # a row a point tried: tp 4 and tp 8 along their curves, one chosen (tp 4 at 128)
    chosen = [(r["layout"], r["concurrency"]) for r in found.to_records() if r["chosen"]]
    assert chosen == [("tp 4", found.chosen.concurrency)] and found.chosen.layout == "tp 4"
    assert "Not tried" in found._repr_html_()
