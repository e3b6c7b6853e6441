"""Issue 21, section 2: the engine between kernels and a request. Each engine's per-step
overhead, the memory it keeps back and its static-batch schedule, by hand from the
figures in specs/kernels/engines.json (each with its source there); the roofline bound
unchanged by all three."""

import json

import pytest
from conftest import MODELS, run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

import modelcost as mc
from modelcost.analyses.serving_records import Engine
from modelcost.estimate.engines import ENGINES, Memory
from modelcost.ir.graph import Parallel, Phase, Workload
from modelcost.roofline.compile import compile_report

LLAMA8 = mc.load_spec(MODELS / "llama3-8b.model")
LLAMA70 = mc.load_spec(MODELS / "llama3-70b.model")
H100, H200, A100 = (mc.load_hardware(n) for n in ("h100", "h200", "a100"))
TP4 = Parallel(tp=4)


def totals(phase: Phase, batch: int, seq: int = 0, context: int = 0, hw=H100, spec=LLAMA8):
    w = (Workload(phase, batch, seq) if phase == Phase.prefill
         else Workload(phase, batch, context=context))  # fmt: skip
    return compile_report(spec, hw, w, estimate="kernels").totals


# (engine, host share of a decode step, extra decode steps a request), as engines.json
# has them from their sources: vLLM issue #21852 (kernels ≈ 99 % of the inter-token
# latency); TensorRT-LLM's overlap scheduler (CPU work hidden, "one extra decoding
# step"); SGLang v0.4's zero-overhead scheduler (no GPU idle between decode batches)
ENGINE_FIGURES = [("vllm", 0.01, 0), ("trtllm", 0.0, 1), ("sglang", 0.0, 0)]


@pytest.mark.parametrize(("name", "share", "extra"), ENGINE_FIGURES)
def test_each_engines_decode_overhead_by_hand(name, share, extra) -> None:
    s = mc.serve(LLAMA8, H100, 1024, 128, concurrency=16, engine=Engine(name=name))
    kernels = totals(Phase.decode, 16, context=1024 + 64).estimate_s
    assert s.tpot_s == (kernels / (1 - share) if share else kernels)
    assert s.engine_name == name
    # a request stays osl + extra steps: its latency and the batch's output rate
    assert s.latency_s == s.ttft_s + (128 + extra) * s.tpot_s
    steps = [16] if name == "vllm" else [8, 8]  # vLLM 16,384 a step; the others 8,192
    prefill = sum(totals(Phase.prefill, k, 1024).estimate_s for k in steps)
    assert s.output_tokens_per_s == pytest.approx(16 * 128 / (prefill + (128 + extra) * s.tpot_s),
                                                  rel=1e-12)  # fmt: skip
    # the gaps are said, not modelled
    assert "prefill host time: no published figure, not modelled" in s.engine_reason
    assert "decode without graphs: no published launch latency, not modelled" in s.engine_reason


def test_a_static_batch_ttft_is_its_prefill_steps() -> None:
    # 10 requests of 4,096 tokens arrive together; vLLM prefills 16,384 tokens a step on
    # an H100 (≥ 70 GiB; engines.json, vllm arg_utils get_batch_defaults): 4 prompts a
    # step, so steps of 4, 4 and 2 prompts. A request's first token comes when its step
    # ends: 4 at p4, 4 at 2·p4, 2 at 2·p4 + p2
    s = mc.serve(LLAMA8, H100, 4096, 128, concurrency=10)
    p4, p2 = (totals(Phase.prefill, k, 4096).estimate_s for k in (4, 2))
    assert s.ttft_s == pytest.approx((4 * p4 + 4 * 2 * p4 + 2 * (2 * p4 + p2)) / 10, rel=1e-12)
    assert s.ttft_worst_s == pytest.approx(2 * p4 + p2, rel=1e-12)
    # the bound is one request's prefill alone at the roofline, as before
    assert s.bound.ttft_s == compile_report(LLAMA8, H100, Workload(Phase.prefill, 1, 4096)
                                            ).totals.time_s  # fmt: skip
    # a prompt longer than a step's tokens is prefilled alone: the i-th ends at i · p1
    long = mc.serve(LLAMA8, H100, 20_000, 16, concurrency=3)
    p1 = totals(Phase.prefill, 1, 20_000).estimate_s
    assert long.ttft_s == pytest.approx(2 * p1, rel=1e-12)  # (1 + 2 + 3) / 3 · p1
    assert long.ttft_worst_s == pytest.approx(3 * p1, rel=1e-12)


def _memory(n: int):
    w = Workload(Phase.decode, n, context=2048 + 256, parallel=TP4)
    return compile_report(LLAMA70, H200, w).totals.memory


@pytest.mark.parametrize(("engine", "expected"), [
    # vLLM gpu_memory_utilization 0.9 of the device holds weights, activations and KV
    (Engine(), lambda m: 0.9 * m.capacity - m.weights - m.activations),
    # TensorRT-LLM: 0.9 of what the weights and activations leave
    (Engine(name="trtllm"), lambda m: 0.9 * (m.capacity - m.weights - m.activations)),
    # SGLang mem_fraction_static at tp 4: 0.85 of the device for weights and KV cache
    (Engine(name="sglang"), lambda m: 0.85 * m.capacity - m.weights),
    # --memory-fraction replaces the engine's figure, read by its rule
    (Engine(memory_fraction=0.5), lambda m: 0.5 * m.capacity - m.weights - m.activations),
])  # fmt: skip
def test_the_memory_each_engine_keeps_back_by_hand(engine, expected) -> None:
    s = mc.serve(LLAMA70, H200, 2048, 256, TP4, engine=engine)
    n, per_seq = s.max_concurrency, _memory(1).kv_cache
    assert n == int(expected(_memory(n)) // per_seq)
    assert _memory(n + 1).kv_cache > expected(_memory(n + 1))  # one more does not fit


def test_the_engine_caps_its_sequences() -> None:
    # vLLM runs at most 256 sequences on an A100 (max_num_seqs; the 1,024 of ≥ 70 GiB
    # parts excludes A100, PR #17885): a short request would fit thousands
    s = mc.serve(LLAMA8, A100, 128, 128, estimate="roofline")
    assert s.max_concurrency == 256


@given(st.floats(0.01, 1.0), st.sampled_from(["of_total", "of_free", "static"]),
       st.floats(1e9, 2e11), st.floats(0, 1), st.floats(0, 0.2))  # fmt: skip
@settings(max_examples=200, deadline=None)
def test_no_rule_gives_the_cache_more_than_the_device_leaves(f, rule, cap, w, a) -> None:
    weights, activations = w * cap, a * cap
    room = Memory(rule=rule, fraction=f, source="").kv_room(cap, weights, activations)
    assert 0 <= room <= max(cap - weights - activations, 0) + 1e-6 * cap


def test_the_bound_is_unchanged_by_the_engine_its_memory_and_its_schedule() -> None:
    # at a fixed concurrency the bound is the roofline's: one request's prefill, the
    # decode step, and the batch's prefill then osl steps, whatever the engine
    par = Parallel(tp=2)
    bounds = {mc.serve(LLAMA8, H100, 4096, 128, par, concurrency=10,
                       engine=Engine(name=e, memory_fraction=f)).bound
              for e in ENGINES for f in (None, 0.6)}  # fmt: skip
    assert len(bounds) == 1
    (b,) = bounds

    def roof(phase, batch, **kw):
        w = Workload(phase, batch, parallel=par, **kw)
        return compile_report(LLAMA8, H100, w).totals.time_s

    tpot = roof(Phase.decode, 10, context=4096 + 64)
    assert (b.ttft_s, b.tpot_s) == (roof(Phase.prefill, 1, seq=4096), tpot)
    assert b.output_tokens_per_s == 10 * 128 / (roof(Phase.prefill, 10, seq=4096) + 128 * tpot)


def test_the_command_line_names_the_engine_and_refuses_what_it_does_not_know() -> None:
    base = ["serve", str(MODELS / "llama3-8b.model"), "--hw", "h100", "--isl", "1Ki",
            "--osl", "128", "--concurrency", "16"]  # fmt: skip
    r = run_cli(*base, "--engine", "trtllm", "--memory-fraction", "0.8", "--format", "json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert (data["engine_name"], data["memory_fraction"]) == ("trtllm", 0.8)
    assert data["engine"] == "TensorRT-LLM, static" and data["ttft_worst_s"] >= data["ttft_s"]
    text = run_cli(*base).stdout
    assert "vLLM; decode steps +1.0% host time (graphs on)" in text
    refused = [(["--engine", "tgi"], "invalid choice: 'tgi'"),
               (["--memory-fraction", "0"], "expected a fraction above 0"),
               (["--memory-fraction", "nan"], "expected a fraction above 0")]  # fmt: skip
    for bad, message in refused:
        r = run_cli(*base, *bad)
        assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr


def test_the_api_refuses_an_unknown_engine_or_fraction() -> None:
    with pytest.raises(ValueError, match="engine must be one of vllm, trtllm, sglang"):
        Engine(name="tgi")
    with pytest.raises(ValueError, match=r"memory_fraction must be in \(0, 1\], got 1.5"):
        Engine(memory_fraction=1.5)
