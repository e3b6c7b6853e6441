"""Serving a request mix: the solved concurrency against the memory figures, and each
figure against the compile of the same point."""

import json

import pytest
from conftest import MODELS, run_cli

from modelcost import load_spec
from modelcost.compile import compile_report
from modelcost.graph import Parallel, Phase, Workload
from modelcost.hardware import load_hardware
from modelcost.serving import serve

LLAMA70 = load_spec(MODELS / "llama3-70b.model")
H200 = load_hardware("h200")
TP4 = Parallel(tp=4)


def decode(n: int, context: int):
    return compile_report(LLAMA70, H200, Workload(Phase.decode, n, context=context,
                                                  parallel=TP4))  # fmt: skip


def test_the_largest_concurrency_is_solved_from_the_memory_figures() -> None:
    s = serve(LLAMA70, H200, 2048, 256, TP4)
    n, full = s.max_concurrency, 2048 + 256
    m = decode(n, full).totals.memory
    # floor((capacity − weights − activations) / KV per sequence), at the batch solved for
    per_seq = decode(1, full).totals.memory.kv_cache
    assert n == int((m.capacity - m.weights - m.activations) // per_seq)
    assert m.fits and not decode(n + 1, full).totals.memory.fits


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
    r = run_cli("serve", spec, "--hw", "h200", "--tp", "4", "--isl", "2K", "--osl", "256",
                "--tpot", "1ms", "--format", "json")  # fmt: skip
    assert r.returncode == 1
    assert "one sequence per replica already takes over 1 ms a token" in r.stderr
    assert json.loads(r.stdout)["meets_targets"] is False
    ok = run_cli("serve", spec, "--hw", "h200", "--tp", "4", "--isl", "2K", "--osl", "256")
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
