"""Speculative decoding (issue 23, item 3): the tokens a step yields, the verify as a
decode step of k + 1 tokens per sequence, the step of k draft passes and the verify,
the draft's memory in the fit, and what serve refuses."""

import json

import pytest
from conftest import MODELS, run_cli

from modelcost import load_spec
from modelcost.compile import compile_report, compile_totals
from modelcost.costing import DEFAULT_COSTING
from modelcost.errors import SpecError
from modelcost.graph import Parallel, Phase, Workload
from modelcost.hardware import load_hardware
from modelcost.serving import Engine, serve
from modelcost.speculative import (
    Speculation,
    draft_spec,
    expected_tokens,
    implied_acceptance,
    settle,
)

LLAMA70 = load_spec(MODELS / "llama3-70b.model")
LLAMA8 = load_spec(MODELS / "llama3-8b.model")
DSV3 = load_spec(MODELS / "deepseek-v3.model")
H200 = load_hardware("h200")
TP4 = Parallel(tp=4)


def test_the_tokens_a_step_yields_follow_leviathan_eq_1() -> None:
    # E = (1 − a^(k+1)) / (1 − a) = 1 + a + … + a^k
    assert expected_tokens(0.8, 3) == pytest.approx(1 + 0.8 + 0.64 + 0.512)  # 2.952
    assert expected_tokens(0.85, 1) == pytest.approx(1.85)  # DeepSeek-V3's 85 %, one token
    assert expected_tokens(0.5, 2) == pytest.approx(1.75)
    assert expected_tokens(1.0, 4) == 5.0  # every proposal accepted: k + 1
    # the acceptance that gives a length, and back
    a = implied_acceptance(2.82, 3)
    assert expected_tokens(a, 3) == pytest.approx(2.82, abs=1e-12)


def test_the_default_is_the_published_length_at_k() -> None:
    # specs/kernels/speculative.json: TensorRT-LLM's MTP acceptance lengths on DeepSeek-R1
    # (MTP1 1.92, MTP2 2.58, MTP3 2.82); an acceptance given overrides them (eq. 1)
    assert [settle(Speculation(k)).accepted_per_step for k in (1, 2, 3)] == [1.92, 2.58, 2.82]
    one = settle(Speculation(1))
    assert one.acceptance == pytest.approx(0.92)  # 1 + a = 1.92
    given = settle(Speculation(2, 0.8))
    assert (given.acceptance, given.accepted_per_step) == (0.8, pytest.approx(2.44))
    # a draft model has no published length per k: --acceptance must be given
    with pytest.raises(SpecError, match="no published acceptance for a draft model"):
        settle(Speculation(2, None, LLAMA8))
    with pytest.raises(SpecError, match="no published acceptance"):
        settle(Speculation(9))  # MTP lengths are published up to k = 5


def test_the_verify_is_a_decode_step_of_k_plus_1_tokens_per_sequence() -> None:
    h100 = load_hardware("h100")
    one = compile_report(LLAMA8, h100, Workload(Phase.decode, 4, context=1024))
    three = compile_report(LLAMA8, h100, Workload(Phase.decode, 4, context=1024, queries=3))
    by = {o.name: o for o in three.ops}  # each op's figures for one instance
    by1 = {o.name: o for o in one.ops}
    # every GEMM runs over 4 × 3 = 12 tokens: q_proj 2·12·4096·4096 FLOPs a layer
    assert by["layers.0.attn.q_proj"].flops == 2 * 12 * 4096 * 4096
    assert by1["layers.0.attn.q_proj"].flops == 2 * 4 * 4096 * 4096
    # logits for every proposed position: 2·12·4096·128,256
    assert by["lm_head"].flops == 2 * 12 * 4096 * 128_256
    # attention: 3 queries per sequence over the 1,024 cached keys, 32 heads of 128:
    # QKᵀ and PV, 2 × 2·4·3·32·1024·128 FLOPs (three times the single query's)
    assert by["layers.0.attn.sdpa"].shape["N_Q"] == 3
    assert by["layers.0.attn.sdpa"].flops == 2 * 2 * 4 * 3 * 32 * 1024 * 128
    assert by1["layers.0.attn.sdpa"].flops == 2 * 2 * 4 * 1 * 32 * 1024 * 128
    assert three.workload.label == "context 1024, 3 queries"
    # the cache is read once for the three queries: attention bytes grow by the queries'
    # and outputs' only, far less than threefold
    assert by["layers.0.attn.sdpa"].bytes < 1.1 * by1["layers.0.attn.sdpa"].bytes


def test_a_recurrent_model_refuses_a_verify() -> None:
    mamba = load_spec(MODELS / "mamba2-2.7b.model")
    with pytest.raises(SpecError, match="Mamba2 layer"):
        compile_totals(mamba, H200, Workload(Phase.decode, 1, queries=2), DEFAULT_COSTING)
    with pytest.raises(SpecError, match="decode step"):
        compile_totals(LLAMA8, H200, Workload(Phase.prefill, 1, 128, queries=2), DEFAULT_COSTING)


def _totals(spec, w: Workload):
    return compile_totals(spec, H200, w, DEFAULT_COSTING)[1]


def test_tpot_is_the_verify_and_k_draft_passes_over_e() -> None:
    # Llama 3 70B on 4 H200 with Llama 3 8B drafting k = 2 tokens, each accepted with
    # a = 0.8: E = 1 + 0.8 + 0.64 = 2.44; 4 sequences, 512 + 256 tokens, the mean
    # context 512 + 128 = 640. Bound (roofline): step = verify (a decode step of 3
    # tokens per sequence) + 2 draft decode steps, both at batch 4 on the same layout.
    spec = Speculation(2, 0.8, LLAMA8)
    s = serve(LLAMA70, H200, 512, 256, TP4, concurrency=4, estimate="roofline",
              speculation=spec)  # fmt: skip
    verify = _totals(LLAMA70, Workload(Phase.decode, 4, context=640, parallel=TP4, queries=3))
    draft = _totals(LLAMA8, Workload(Phase.decode, 4, context=640, parallel=TP4))
    step = verify.time_s + 2 * draft.time_s
    assert s.speculative is not None
    assert s.speculative.step_s == s.speculative.bound_step_s == step
    assert s.speculative.accepted_per_step == pytest.approx(2.44)
    assert s.tpot_s == step / s.speculative.accepted_per_step
    # the bound takes every proposed token as accepted: k + 1 = 3 a step, which no
    # acceptance beats (the bound stays a bound whatever the prompts)
    assert s.bound.tpot_s == step / 3
    # TTFT: the target's and the draft's prefill of one 512-token prompt
    pre = _totals(LLAMA70, Workload(Phase.prefill, 1, 512, parallel=TP4)).time_s
    pre_d = _totals(LLAMA8, Workload(Phase.prefill, 1, 512, parallel=TP4)).time_s
    assert s.ttft_s == pre + pre_d
    # throughput: 4 sequences' 256 tokens after the batch's prefills, at step / E a token
    pre4 = _totals(LLAMA70, Workload(Phase.prefill, 4, 512, parallel=TP4)).time_s
    pre4_d = _totals(LLAMA8, Workload(Phase.prefill, 4, 512, parallel=TP4)).time_s
    assert s.output_tokens_per_s == pytest.approx(4 * 256 / (pre4 + pre4_d + 256 * s.tpot_s))
    # without speculation the same step is one plain decode a token
    plain = serve(LLAMA70, H200, 512, 256, TP4, concurrency=4, estimate="roofline")
    one = _totals(LLAMA70, Workload(Phase.decode, 4, context=640, parallel=TP4))
    assert plain.tpot_s == one.time_s and plain.speculative is None
    assert s.tpot_s < plain.tpot_s  # the 8B draft is cheap beside 2.44 tokens a step


def test_the_estimate_takes_the_engines_host_share_once_a_step() -> None:
    from modelcost.costing import costing
    from modelcost.engines import profile

    s = serve(LLAMA70, H200, 512, 256, TP4, concurrency=4, speculation=Speculation(2, 0.8, LLAMA8))
    how = costing(estimate="kernels", engine="vllm")
    v = compile_totals(LLAMA70, H200, Workload(Phase.decode, 4, context=640, parallel=TP4,
                                              queries=3), how)[1]  # fmt: skip
    d = compile_totals(LLAMA8, H200, Workload(Phase.decode, 4, context=640, parallel=TP4), how)[1]
    assert v.estimate_s is not None and d.estimate_s is not None
    # vLLM's decode host share (1 %, specs/kernels/engines.json): kernels / (1 − 0.01)
    p = profile("vllm", H200.name, H200.capacity, 4, None)
    step = p.step(v.estimate_s + 2 * d.estimate_s, "decode")
    assert step == pytest.approx((v.estimate_s + 2 * d.estimate_s) / 0.99)
    assert s.speculative is not None and s.speculative.step_s == step
    assert s.tpot_s == step / s.speculative.accepted_per_step
    # the bound: the roofline's step over k + 1 = 3 tokens, every proposed one accepted
    assert s.bound.tpot_s == (v.time_s + 2 * d.time_s) / 3


def test_the_draft_joins_the_memory_fit() -> None:
    spec = Speculation(2, 0.8, LLAMA8)
    s = serve(LLAMA70, H200, 2048, 256, TP4, estimate="roofline", speculation=spec)
    plain = serve(LLAMA70, H200, 2048, 256, TP4, estimate="roofline")
    n, full = s.concurrency, 2048 + 256
    target = _totals(LLAMA70, Workload(Phase.decode, n, context=full, parallel=TP4,
                                       queries=3)).memory  # fmt: skip
    draft = _totals(LLAMA8, Workload(Phase.decode, n, context=full, parallel=TP4)).memory
    # Llama 3 8B's BF16 weights over 4 ranks, its 65 RMSNorms' (65 × 4,096 × 2 B =
    # 532,480 B) whole on each: (16,060,522,496 − 532,480) / 4 + 532,480 = 4,015,529,984 B
    assert s.speculative is not None
    assert s.speculative.draft_weights == draft.weights == 4_015_529_984
    extra = max(draft.activations - target.activations, 0.0)
    assert s.memory == target.total + draft.weights + draft.kv_cache + extra
    # KV per sequence: the 70B's (80 layers × 2 × 2 KV heads × 128 × 2 B = 81,920 B a token
    # per device) and the 8B's (32 layers: 32,768 B a token), at 2,304 tokens
    assert s.kv_per_sequence == (81_920 + 32_768) * full
    assert s.speculative.draft_kv_per_sequence == 32_768 * full
    # vLLM keeps 0.9 of the device: fewer sequences fit beside the draft
    held = target.weights + draft.weights
    room = 0.9 * target.capacity - held - max(target.activations, draft.activations)
    assert s.max_concurrency == int(room // s.kv_per_sequence)
    assert s.max_concurrency < plain.max_concurrency


def test_deepseek_v3_drafts_with_its_own_mtp_module() -> None:
    module = draft_spec(DSV3, Speculation())
    assert module.name == "deepseek_v3.mtp"
    tp8 = Parallel(tp=8)
    s = serve(DSV3, H200, 1024, 1024, tp8, concurrency=1, estimate="roofline",
              speculation=Speculation(1))  # fmt: skip
    verify = compile_totals(DSV3, H200, Workload(Phase.decode, 1, context=1536, parallel=tp8,
                                                 queries=2), DEFAULT_COSTING)[1]  # fmt: skip
    mtp = compile_totals(module, H200, Workload(Phase.decode, 1, context=1536, parallel=tp8),
                         DEFAULT_COSTING)[1]  # fmt: skip
    assert s.speculative is not None and s.speculative.draft == "deepseek_v3.mtp"
    # MTP1: TensorRT-LLM's 1.92 tokens a step (specs/kernels/speculative.json)
    assert s.tpot_s == (verify.time_s + mtp.time_s) / 1.92
    assert s.speculative.draft_weights == mtp.memory.weights
    # a model without such a module needs a draft
    with pytest.raises(SpecError, match="no multi-token-prediction module"):
        serve(LLAMA8, H200, 128, 128, speculation=Speculation(1, 0.8))


SERVE = ["serve", str(MODELS / "llama3-8b.model"), "--hw", "h200", "--isl", "128",
         "--osl", "128", "--concurrency", "2"]  # fmt: skip


def test_json_carries_the_speculative_settings_and_e() -> None:
    r = run_cli(*SERVE, "--speculative", "--draft", str(MODELS / "llama3-8b.model"),
                "--draft-tokens", "3", "--acceptance", "0.5", "--format", "json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    sp = json.loads(r.stdout)["speculative"]
    assert (sp["draft"], sp["draft_kind"], sp["tokens"], sp["acceptance"]) == (
        "llama3_8b", "model", 3, 0.5,
    )  # fmt: skip
    assert sp["accepted_per_step"] == pytest.approx(1.875)  # 1 + .5 + .25 + .125
    text = run_cli(*SERVE, "--speculative", "--draft", str(MODELS / "llama3-8b.model"),
                   "--acceptance", "0.5")  # fmt: skip
    assert text.returncode == 0 and "llama3_8b proposes 1 token a step" in text.stdout
    plain = run_cli(*SERVE, "--format", "json")
    assert json.loads(plain.stdout)["speculative"] is None


@pytest.mark.parametrize(("args", "message"), [
    (["--speculative", "--draft-tokens", "0"], "argument --draft-tokens: expected a positive"),
    (["--speculative", "--acceptance", "0"], "argument --acceptance: expected a fraction"),
    (["--speculative", "--acceptance", "1.5"], "argument --acceptance: expected a fraction"),
    (["--acceptance", "0.7"], "--acceptance goes with --speculative"),
    (["--speculative", "--draft", str(MODELS / "gpt2.model"), "--acceptance", "0.7"],
     "the draft `gpt2` has a vocabulary of 50257 tokens, the target `llama3_8b` one of "
     "128256"),
    (["--speculative", "--draft", str(MODELS / "llama3-8b.model")],
     "no published acceptance for a draft model"),
    (["--speculative"], "`llama3_8b` has no multi-token-prediction module"),
    (["--speculative", "--acceptance", "0.7", "--budget", "2K"], "static batches"),
    (["--speculative", "--acceptance", "0.7", "--rate", "1"], "leave out --speculative"),
])  # fmt: skip
def test_speculative_refusals_exit_2(args, message) -> None:
    r = run_cli(*SERVE, *args)
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


# TensorRT-LLM tech blog 1 ("Pushing latency boundaries"), DeepSeek-R1 NVFP4 on 8 × B200,
# batch 1, 1K in / 2K out: tokens/s per user without MTP (0) and with MTP1-3; beside
# each, 1 / TPOT of the estimate and of the bound as docs/serving.md's table gives them
PUBLISHED_MTP = [(0, 111, 128, 1654), (1, 198, 220, 2360), (2, 250, 267, 2764),
                 (3, 253, 264, 3036)]  # fmt: skip


def test_the_published_mtp_runs_stay_under_the_bound_as_the_docs_say(tmp_path) -> None:
    path = tmp_path / "deepseek-r1-nvfp4.model"
    body = "model deepseek_r1_nvfp4 extends deepseek_v3 {\n  recipe = nvfp4\n}\n"
    path.write_text(f'import "{MODELS / "deepseek-v3.model"}"\n' + body)
    spec, b200 = load_spec(path), load_hardware("b200")
    for k, published, estimate, bound in PUBLISHED_MTP:
        s = serve(spec, b200, 1024, 2048, Parallel(tp=8), concurrency=1,
                  engine=Engine(name="trtllm"),
                  speculation=Speculation(k) if k else None)  # fmt: skip
        assert (round(1 / s.tpot_s), round(1 / s.bound.tpot_s)) == (estimate, bound)
        assert 1 / s.bound.tpot_s >= published


def test_search_and_mixes_serve_each_layout_speculatively() -> None:
    from modelcost.serving import RequestClass, search, serve_mix

    spec = Speculation(2, 0.5, LLAMA8)  # E = 1 + 0.5 + 0.25 = 1.75
    found = search(LLAMA8, H200, 128, 128, estimate="roofline", speculation=spec)
    assert found.tried and all(s.speculative is not None for s in found.tried)
    assert all(s.speculative.accepted_per_step == 1.75 for s in found.tried if s.speculative)
    mix = serve_mix(LLAMA8, H200, [RequestClass(128, 128, 1.0)], estimate="roofline",
                    speculation=spec)  # fmt: skip
    one = serve(LLAMA8, H200, 128, 128, estimate="roofline", speculation=spec)
    assert mix.classes[0] == one
