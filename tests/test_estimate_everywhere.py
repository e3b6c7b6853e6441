"""Issue 21, item 1: one estimate on every command. `--estimate` and `--calibrate` are
one declaration (options.py) that compile, diff, sweep, serve, site, the MkDocs plugin
and the Python API all take; `serve` plans with the kernels' estimate and carries the
roofline's figures beside it; sweep rows carry the estimate when asked. Every figure is
checked against the compile of the same point, the source of truth."""

import json

import pytest
from conftest import MODELS, run_cli

import modelcost as mc
from modelcost.analyses.serving_mix import load_mix
from modelcost.base.settings import DEFAULT_ESTIMATE, DEFAULT_SERVE_ESTIMATE
from modelcost.cli import build_parser
from modelcost.estimate.costing import Costing
from modelcost.ir.graph import Parallel, Phase, Workload
from modelcost.roofline.compile import compile_report

LLAMA8 = mc.load_spec(MODELS / "llama3-8b.model")
H100 = mc.load_hardware("h100")
SPEC = str(MODELS / "llama3-8b.model")

COMMANDS = {
    "compile": ["compile", SPEC, "--hw", "h100"],
    "diff": ["diff", SPEC, SPEC, "--hw", "h100"],
    "sweep": ["sweep", SPEC, "--hw", "h100"],
    "serve": ["serve", SPEC, "--hw", "h100", "--isl", "128", "--osl", "128"],
    "site": ["site", SPEC, "--hw", "h100", "-o", "out"],
}


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_takes_the_one_estimate_option(command) -> None:
    parser = build_parser()
    args = parser.parse_args([*COMMANDS[command], "--estimate", "kernels", "--calibrate", "c.json"])
    assert (args.estimate, args.calibrate) == ("kernels", "c.json")
    default = parser.parse_args(COMMANDS[command]).estimate
    # serve plans with what it will get; the rest show the bound unless asked
    assert default == (DEFAULT_SERVE_ESTIMATE if command == "serve" else DEFAULT_ESTIMATE)
    with pytest.raises(SystemExit):
        parser.parse_args([*COMMANDS[command], "--estimate", "guess"])
    # and the one --engine (options.py): vLLM by default (specs/kernels/engines.json)
    assert parser.parse_args(COMMANDS[command]).engine == "vllm"
    assert parser.parse_args([*COMMANDS[command], "--engine", "trtllm"]).engine == "trtllm"
    with pytest.raises(SystemExit):
        parser.parse_args([*COMMANDS[command], "--engine", "tgi"])


def test_engine_reaches_compile_and_sweep_as_serve_reads_it() -> None:
    # --engine trtllm: a tp-8 decode step's all-reduces as TensorRT-LLM's custom
    # all-reduce runs them, faster than vLLM's at decode sizes (sglang PR #2904's table);
    # compile and sweep give the very step serve plans TensorRT-LLM with (no host share)
    import csv
    import io

    args = ["--hw", "h100", "--tp", "8", "--phase", "decode", "--batch", "16",
            "--context", "1088", "--estimate", "kernels"]  # fmt: skip
    step = {}
    for engine in ("vllm", "trtllm"):
        r = run_cli("compile", SPEC, *args, "--engine", engine, "--format", "json")
        step[engine] = json.loads(r.stdout)["reports"][0]["totals"]["estimate_s"]
        rows = run_cli("sweep", SPEC, *args, "--engine", engine, "--format", "csv").stdout
        assert float(next(csv.DictReader(io.StringIO(rows)))["estimate_ms"]) == pytest.approx(
            step[engine] * 1e3, rel=1e-12
        )
    assert step["trtllm"] < step["vllm"]
    s = mc.serve(SPEC, "h100", 1024, 128, Parallel(tp=8), concurrency=16,
                 engine=mc.Engine(name="trtllm"))  # fmt: skip
    assert s.tpot_s == pytest.approx(step["trtllm"], rel=1e-12)


def test_serve_plans_with_the_estimate_and_carries_the_bound() -> None:
    s = mc.serve(LLAMA8, H100, 1024, 128, concurrency=16)
    assert s.estimate == "kernels"
    # TPOT: one decode step of the 16 sequences at the mean context 1024 + 64, as the
    # kernels run it (compile's estimate) with vLLM's host share of a decode step, 1 %
    # (specs/kernels/engines.json: vllm issue #21852), and at the roofline (compile's
    # step time, no overhead)
    step = compile_report(
        LLAMA8, H100, Workload(Phase.decode, 16, context=1088), estimate="kernels"
    )
    assert (s.tpot_s, s.bound.tpot_s) == (step.totals.estimate_s / (1 - 0.01),
                                          step.totals.time_s)  # fmt: skip
    # TTFT: the 16 prompts of a static batch arrive together; vLLM prefills 16,384 tokens
    # a step on an H100 (≥ 70 GiB), so all 16 × 1,024 in one step: each request's first
    # token comes when that step ends. The bound: one request's prefill alone
    batch = compile_report(LLAMA8, H100, Workload(Phase.prefill, 16, 1024), estimate="kernels")
    first = compile_report(LLAMA8, H100, Workload(Phase.prefill, 1, 1024))
    assert (s.ttft_s, s.ttft_worst_s) == (batch.totals.estimate_s, batch.totals.estimate_s)
    assert s.bound.ttft_s == first.totals.time_s
    assert s.bound.latency_s == s.bound.ttft_s + 128 * s.bound.tpot_s
    # the estimate is never faster than its bound
    assert s.output_tokens_per_s <= s.bound.output_tokens_per_s
    roof = mc.serve(LLAMA8, H100, 1024, 128, concurrency=16, estimate="roofline")
    assert roof.estimate == "roofline" and roof.tpot_s == roof.bound.tpot_s == s.bound.tpot_s
    # a flat row names the bound's figures apart: a script cannot mix them up
    (row,) = s.to_records()
    assert row["tpot_s"] == s.tpot_s and row["bound_tpot_s"] == s.bound.tpot_s


def test_serve_json_and_text_show_both() -> None:
    r = run_cli(*COMMANDS["serve"], "--concurrency", "16", "--format", "json")
    data = json.loads(r.stdout)
    assert data["estimate"] == "kernels"
    assert data["bound"]["tpot_s"] < data["tpot_s"]
    text = run_cli(*COMMANDS["serve"], "--concurrency", "16").stdout
    (tpot,) = [ln for ln in text.splitlines() if ln.startswith("TPOT")]
    assert "(bound " in tpot
    bound = run_cli(*COMMANDS["serve"], "--concurrency", "16", "--estimate", "roofline")
    assert "(bound " not in bound.stdout and "the roofline: a bound no engine beats" in bound.stdout


def test_search_and_mix_take_the_estimate(tmp_path) -> None:
    found = mc.search(LLAMA8, H100, 1024, 128, estimate="roofline")
    assert {s.estimate for s in found.tried} == {"roofline"}
    mix = tmp_path / "mix.txt"
    mix.write_text("128 128 1\n1024 128 1\n")
    m = mc.serve_mix(LLAMA8, H100, load_mix(mix))
    assert m.estimate == "kernels" and m.output_tokens_per_s <= m.bound_output_tokens_per_s
    r = run_cli("serve", SPEC, "--hw", "h100", "--mix", str(mix), "--estimate", "roofline",
                "--format", "json")  # fmt: skip
    assert json.loads(r.stdout)["estimate"] == "roofline"


def test_sweep_rows_carry_the_estimate_when_asked() -> None:
    s = mc.sweep([LLAMA8], [H100], "decode", [1, 8], context=[1024], estimate="kernels")
    for row, batch in zip(s.rows, [1, 8], strict=True):
        point = compile_report(LLAMA8, H100, Workload(Phase.decode, batch, context=1024),
                               estimate="kernels")  # fmt: skip
        assert row.estimate_ms == point.totals.estimate_s * 1e3
        assert row.step_ms == point.totals.per_token.ms_per_step
    plain = mc.sweep([LLAMA8], [H100], "decode", [1], context=[1024])
    assert plain.rows[0].estimate_ms is None
    r = run_cli("sweep", SPEC, "--hw", "h100", "--phase", "decode", "--estimate", "kernels")
    assert "| step | estimate |" in r.stdout


def test_a_calibration_applies_to_its_own_target(tmp_path) -> None:
    cal = tmp_path / "cal.json"
    # every GEMM on this machine 2× the estimate (a calibration file, calibration.py)
    cal.write_text(json.dumps({"format": "modelcost-calibration/1", "hardware": "h100",
                               "factors": [{"kind": "GEMM", "factor": 2.0}]}))  # fmt: skip
    r = run_cli("sweep", SPEC, "--hw", "h100,h200", "--phase", "decode", "--calibrate",
                str(cal), "--format", "json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    h100, h200 = json.loads(r.stdout)["rows"]
    plain = mc.sweep([LLAMA8], ["h100", "h200"], "decode", estimate="kernels")
    assert h100["estimate_ms"] > plain.rows[0].estimate_ms  # its GEMMs twice as long
    assert h200["estimate_ms"] == plain.rows[1].estimate_ms  # not h200's machine
    r = run_cli("sweep", SPEC, "--hw", "h200", "--calibrate", str(cal))
    assert r.returncode == 2
    assert "the calibration is h100's, and the targets are h200" in r.stderr
    served = run_cli(*COMMANDS["serve"], "--calibrate", str(cal), "--format", "json")
    assert json.loads(served.stdout)["estimate"] == "kernels"


def test_the_api_refuses_an_unknown_estimate() -> None:
    for call in (lambda: mc.serve(LLAMA8, H100, 128, 128, estimate="fast"),
                 lambda: mc.sweep([LLAMA8], [H100], estimate="fast"),
                 lambda: mc.compile_report(LLAMA8, H100, estimate="fast")):  # fmt: skip
        with pytest.raises(ValueError, match="estimate must be one of roofline, kernels"):
            call()


def test_site_pages_carry_the_estimate(tmp_path) -> None:
    out = tmp_path / "site"
    r = run_cli("site", SPEC, "--hw", "h100", "-o", str(out), "--estimate", "kernels")
    assert r.returncode == 0, r.stderr
    page = (out / "llama3-8b-h100.md").read_text()
    assert "estimate" in page
    index = (out / "index.md").read_text()
    assert "the kernel-aware estimate beside the roofline" in index


def test_tp_layouts_keep_their_estimate() -> None:
    s = mc.serve(LLAMA8, H100, 1024, 128, Parallel(tp=2), concurrency=8)
    w = Workload(Phase.decode, 8, context=1088, parallel=Parallel(tp=2))
    # the kernels' step with vLLM's 1 % host share (engines.json)
    assert s.tpot_s == compile_report(LLAMA8, H100, w, estimate="kernels").totals.estimate_s / 0.99


def test_the_engine_reaches_the_collectives_estimate() -> None:
    # `--engine` picks the custom all-reduce the decode step's collectives run as
    # (specs/kernels/collectives.json): TensorRT-LLM's kernels are faster than vLLM's at
    # decode sizes (sglang PR #2904's table), and TensorRT-LLM adds no host time a step
    from modelcost.roofline.compile import compile_totals

    spec = mc.load_spec(MODELS / "llama3-70b.model")
    tp8 = Parallel(tp=8)
    w = Workload(Phase.decode, 16 * 1, context=1024 + 64, parallel=tp8)
    tpots = {}
    for name in ("vllm", "trtllm"):
        s = mc.serve(spec, H100, 1024, 128, tp8, concurrency=16, engine=mc.Engine(name=name))
        step = compile_totals(spec, H100, w, Costing(kernels=True, engine=name))[1].estimate_s
        tpots[name] = (s.tpot_s, step)
    assert tpots["trtllm"][0] == tpots["trtllm"][1]  # no host time: the kernels' step
    assert tpots["trtllm"][1] < tpots["vllm"][1]  # its all-reduces are faster


def test_a_training_steps_collectives_are_nccls_not_a_serving_engines() -> None:
    # a serving engine's custom all-reduce runs inference steps only: at tp 8 on H100 a
    # decode step's 64 KiB all-reduce is vLLM's one-shot kernel (15.9 µs, sglang PR
    # #2904's table interpolated); a training step's 8 × 512 tokens × 4096 × 2 B = 32 MiB
    # all-reduce is NCCL's as nccl-tests measured it on 8×H100 (200.39 µs), whatever the
    # engine
    from modelcost.lowering.lower import lower
    from modelcost.roofline.compile import compile_totals
    from modelcost.roofline.estimated import collectives_engine

    tp8 = Parallel(tp=8)
    decode = Workload(Phase.decode, 8, context=1024, parallel=tp8)
    train = Workload(Phase.train, 8, 512, parallel=tp8)
    reasons = {}
    for w in (decode, train):
        r = compile_report(LLAMA8, H100, w, estimate="kernels")
        ar = next(o for o in r.ops if o.name == "embed.all_reduce")
        reasons[w.phase] = ar.estimate_reason
    assert reasons[Phase.decode].startswith("vLLM custom all-reduce, one-shot at 64 KiB × 8")
    assert reasons[Phase.train].startswith(
        "NCCL/RCCL all-reduce at 32 MiB × 8 as measured: 200.39 µs published at 32 MiB"
    )
    assert collectives_engine(lower(LLAMA8, train), "trtllm") is None
    assert collectives_engine(lower(LLAMA8, decode), "trtllm") == "trtllm"
    # the totals a sweep reads agree with the report's, whatever engine is named
    t = compile_totals(LLAMA8, H100, train, Costing(kernels=True, engine="trtllm"))[1]
    report = compile_report(LLAMA8, H100, train, estimate="kernels")
    assert t.estimate_s == report.totals.estimate_s
