"""Decode pipelines served as engines run them (serving.Scenario.pipelined_step): one
batch in flight per stage, a TPOT of one pass across the stages, pp batches' tokens a
TPOT, each device holding the KV cache of its layers for all the batches in flight;
and `--search` trying pipeline stages where tp alone fills the scale-up domain."""

import json

import pytest
from conftest import MODELS, run_cli

from modelcost import load_spec
from modelcost.analyses.scenario import Scenario
from modelcost.analyses.serving import serve
from modelcost.analyses.serving_records import STATIC
from modelcost.analyses.serving_search import search
from modelcost.ir.graph import Parallel, Phase, Workload
from modelcost.roofline.compile import compile_report
from modelcost.targets.hardware import load_hardware

LLAMA8 = load_spec(MODELS / "llama3-8b.model")
H200 = load_hardware("h200")
PP2 = Parallel(pp=2)
N, ISL, OSL = 64, 1024, 1024
MEAN = ISL + OSL // 2  # the decode step's context: 1,536
# Llama 3 8B (config.json): 32 layers, d_model 4096, 8 KV heads of 128, bf16
KV_PER_LAYER_TOKEN = 2 * 8 * 128 * 2  # K and V: 4,096 bytes


def test_a_pipeline_step_is_the_stages_in_turn_and_its_sends() -> None:
    sc = Scenario(LLAMA8, H200, PP2, ISL, OSL, STATIC, "roofline")
    st = sc.stage(N, MEAN)
    # the p2p between the stages: 64 × 4,096 × 2 bytes = 524,288 B at H200's 900 GB/s
    # scale-up link, 450 GB/s a direction, plus its 1 µs step (specs/hardware/h200)
    assert st.p2p_s == pytest.approx(1e-6 + 524_288 / 450e9, rel=1e-12)
    # the stage (its 16 layers and the head) and its receive are the compile's stage
    # step: the training rule's step at one microbatch is that twice (fill and drain)
    tot = compile_report(LLAMA8, H200, Workload(Phase.decode, N, context=MEAN,
                                                parallel=PP2)).totals  # fmt: skip
    assert st.stage_s + st.p2p_s == pytest.approx(tot.time_s - tot.bubble_s, rel=1e-12)
    assert tot.time_s == pytest.approx(2 * (st.stage_s + st.p2p_s), rel=1e-12)
    served = serve(LLAMA8, H200, ISL, OSL, PP2, N, estimate="roofline")
    tpot = 2 * st.stage_s + st.p2p_s  # TPOT = 2 × stage step + one p2p
    assert served.tpot_s == pytest.approx(tpot, rel=1e-12)
    assert served.bound.tpot_s == pytest.approx(tpot, rel=1e-12)
    # throughput: 2 batches of 64 in flight, each yielding a token a TPOT, after its
    # prefill: 2 × 64 × 1,024 / (prefill + 1,024 × TPOT)
    rate = 2 * N * OSL / (sc.prefill(N) + OSL * tpot)
    assert served.output_tokens_per_s == pytest.approx(rate, rel=1e-12)
    assert served.output_tokens_per_s_device == pytest.approx(rate / 2, rel=1e-12)


def test_each_device_holds_the_cache_of_its_layers_for_every_batch_in_flight() -> None:
    sc = Scenario(LLAMA8, H200, PP2, ISL, OSL, STATIC, "roofline")
    full = ISL + OSL
    # one sequence, half the 32 layers, 2,048 tokens: 16 × 4,096 × 2,048 bytes
    one = 16 * KV_PER_LAYER_TOKEN * full
    assert one == 134_217_728
    assert sc.memory(N)[1] == 2 * N * one  # the 2 batches of 64 in flight
    served = serve(LLAMA8, H200, ISL, OSL, PP2, N, estimate="roofline")
    assert served.kv_per_sequence == one
    # the most in a batch: its 2 × n caches fit beside the weights and one batch's
    # activations in the room the engine keeps, 2 × (n + 1) do not
    most = served.max_concurrency

    def fits(n: int) -> bool:
        held, kv, act, cap = sc.memory(n)
        return kv <= sc.profile.memory.kv_room(cap, held, act)

    assert fits(most) and not fits(most + 1)


def test_serve_with_pp_on_the_command_line() -> None:
    r = run_cli("serve", str(MODELS / "llama3-8b.model"), "--hw", "h200", "--isl", "1024",
                "--osl", "1024", "--pp", "2", "--concurrency", "64", "--estimate",
                "roofline", "--format", "json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    served = serve(LLAMA8, H200, ISL, OSL, PP2, N, estimate="roofline")
    assert out["tpot_s"] == served.tpot_s and out["devices"] == 2


def test_search_tries_pipelines_where_tp_fills_the_scaleup_domain() -> None:
    found = search(LLAMA8, H200, ISL, OSL, tpot=0.01, estimate="roofline")
    layouts = [s.layout for s in found.tried]
    # tp 1, 2, 4, 8, and tp 8 in 2 and 4 stages (H200's domain: 8 devices)
    assert layouts == ["", "tp 2", "tp 4", "tp 8", "tp 8, pp 2", "tp 8, pp 4"]


def test_the_estimate_composes_the_kernels_times_the_same_way() -> None:
    # serve's default: the kernels' stage and p2p times in the same sum, the engine's
    # host time once a step (engines.Profile.step); the bound beside it is the roofline's
    sc = Scenario(LLAMA8, H200, PP2, ISL, OSL, STATIC, "kernels")
    st = sc.stage(N, MEAN)
    assert st.stage_estimate_s is not None and st.p2p_estimate_s is not None
    served = serve(LLAMA8, H200, ISL, OSL, PP2, N)
    kernels = 2 * st.stage_estimate_s + st.p2p_estimate_s
    assert served.tpot_s == pytest.approx(sc.profile.step(kernels, "decode"), rel=1e-12)
    assert served.bound.tpot_s == pytest.approx(2 * st.stage_s + st.p2p_s, rel=1e-12)
