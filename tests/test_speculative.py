"""Speculative decoding (issue 23, item 3): the tokens a step yields, the verify as a
decode step of k + 1 tokens per sequence, the step of k draft passes and the verify,
the draft's memory in the fit, and what serve refuses."""

import json

import pytest
from conftest import MODELS, run_cli

from modelcost import load_spec
from modelcost.analyses.serving import serve
from modelcost.analyses.serving_records import Engine
from modelcost.analyses.speculative import (
    Speculation,
    draft_spec,
    expected_tokens,
    implied_acceptance,
    settle,
)
from modelcost.base.errors import SpecError
from modelcost.estimate.costing import DEFAULT_COSTING
from modelcost.ir.graph import Parallel, Phase, Workload
from modelcost.roofline.compile import compile_report, compile_totals
from modelcost.targets.hardware import load_hardware

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
    from modelcost.estimate.costing import costing
    from modelcost.estimate.engines import profile

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
# batch 1, 1K in / 2K out: tokens/s per user without MTP (k = 0) and with MTP1-3
PUBLISHED_MTP = {0: 111, 1: 198, 2: 250, 3: 253}

# DeepSeek-V3's config.json (specs/models/deepseek-v3.model cites it): hidden 7168,
# vocabulary 129,280, 128 heads, q_lora_rank 1536, kv_lora_rank 512, rope dims 64,
# nope and v dims 128, dense intermediate 18,432, 256 routed experts of 2,048, top 8
D, VOCAB, HEADS, Q_RANK, KV_RANK, ROPE, NOPE, V_DIM = 7168, 129_280, 128, 1536, 512, 64, 128, 128
D_FF, EXPERTS, EXPERT_FF, TOP_K = 18_432, 256, 2048, 8
TP, BF16, NVFP4 = 8, 2, 0.5 + 1 / 16  # NVFP4: 4 bits and an 8-bit E4M3 scale per 16
H = HEADS // TP  # query heads a rank
# B200 (specs/hardware/b200.hw): HBM, NVLink a direction, a collective step's latency
HBM, NVLINK, STEP = 8.0e12, 900e9, 1e-6


def _gemm(M: int, N: int, K: int) -> tuple[float, float]:
    """(rows, weights) an NVFP4 GEMM reads and writes: its M×K input quantized, its K×N
    weight shard, its M×N output in BF16."""
    return M * K * NVFP4 + M * N * BF16, K * N * NVFP4


def _mla(T: int, n: int) -> dict[str, tuple[float, float]]:
    """(rows, weights) of each op of an MLA block on one of 8 ranks, T new tokens over n
    cached, in the absorbed form: the a-projections and the latent cache whole on every
    rank, 16 heads a rank. `rows` is every byte an op moves but its weights."""

    def absorb(N: int, K: int) -> tuple[float, float]:  # W_UK, W_UV over BF16, a head each
        return H * (T * K + T * N) * BF16, H * K * N * NVFP4

    # the latent cache of 576 read once at each of the n positions, the values its first
    # 512 (FlashMLA counts total_seqlens · h_kv · d bytes, tests/test_flash_mla.py); Q in,
    # O out
    sdpa = (n * (KV_RANK + ROPE) + T * H * (KV_RANK + ROPE + KV_RANK)) * BF16
    return {
        "norm.0": ((2 * T * D + D) * BF16, 0),  # read x, write y; its weight
        "attn.q_a_proj.quantize": (T * D * (BF16 + NVFP4), 0),  # BF16 in, NVFP4 out
        "attn.q_a_proj": _gemm(T, Q_RANK, D),
        "attn.q_a_norm": ((2 * T * Q_RANK + Q_RANK) * BF16, 0),
        "attn.q_b_proj.quantize": (T * Q_RANK * (BF16 + NVFP4), 0),
        "attn.q_b_proj": _gemm(T, H * (NOPE + ROPE), Q_RANK),
        "attn.kv_a_proj": _gemm(T, KV_RANK + ROPE, D),  # q_a_proj's quantized input
        "attn.kv_a_norm": ((2 * T * KV_RANK + KV_RANK) * BF16, 0),
        "attn.rope": (2 * T * (H + 1) * ROPE * BF16, 0),  # the queries' and key's rope part
        "attn.kv_cache_write": (2 * T * (KV_RANK + ROPE) * BF16, 0),
        "attn.q_absorb": absorb(KV_RANK, NOPE),
        "attn.sdpa": (sdpa, 0),
        "attn.o_absorb": absorb(V_DIM, KV_RANK),
        "attn.o_proj.quantize": (T * H * V_DIM * (BF16 + NVFP4), 0),
        "attn.o_proj": _gemm(T, D, H * V_DIM),
        "residual.0": (3 * T * D * BF16, 0),
        "norm.1": ((2 * T * D + D) * BF16, 0),
    }


def _mlp(prefix: str, T: int, f: int) -> dict[str, tuple[float, float]]:
    """A SwiGLU MLP's shard of f columns for T rows."""
    return {
        f"{prefix}.gate_proj.quantize": (T * D * (BF16 + NVFP4), 0),
        f"{prefix}.gate_proj": _gemm(T, f, D),
        f"{prefix}.up_proj": _gemm(T, f, D),
        f"{prefix}.act": (2 * T * f * BF16, 0),
        f"{prefix}.gate_mul": (3 * T * f * BF16, 0),
        f"{prefix}.down_proj.quantize": (T * f * (BF16 + NVFP4), 0),
        f"{prefix}.down_proj": _gemm(T, D, f),
    }


def experts_hit(T: int) -> float:
    # the distinct experts T tokens pick, each expert picked by a token with chance 8/256
    # and the tokens independent: E·(1 − ((E − k)/E)^T), 8 at T = 1, 15.75 at T = 2
    return EXPERTS * (1 - ((EXPERTS - TOP_K) / EXPERTS) ** T)


def _moe(T: int) -> dict[str, tuple[float, float]]:
    """The MoE on one of 8 ranks, every expert split 8 ways: T·8 rows run through the
    experts they pick, each hit expert's shard read once; the shared expert and the
    BF16 router read whole."""
    rows, f, hit = T * TOP_K, EXPERT_FF // TP, experts_hit(T)
    return {
        "moe.router": ((T * D + T * EXPERTS) * BF16, D * EXPERTS * BF16),
        # the scores read, the fp32 correction bias, an fp32 weight and int32 id a pick
        "moe.routing": (T * EXPERTS * BF16 + EXPERTS * 4 + T * TOP_K * (4 + 4), 0),
        "moe.dispatch": (rows * D * BF16, 0),  # each row copied into its experts' order
        "moe.experts.gate_up.quantize": (rows * D * (BF16 + NVFP4), 0),
        "moe.experts.gate_up": (rows * D * NVFP4 + rows * 2 * f * BF16, hit * D * 2 * f * NVFP4),
        "moe.experts.act": (2 * rows * f * BF16, 0),
        "moe.experts.gate_mul": (3 * rows * f * BF16, 0),
        "moe.experts.down.quantize": (rows * f * (BF16 + NVFP4), 0),
        "moe.experts.down": (rows * f * NVFP4 + rows * D * BF16, hit * f * D * NVFP4),
        "moe.combine": (rows * D * BF16, 0),
        **_mlp("moe.shared", T, EXPERT_FF // TP),  # the shared expert, split 8 ways too
        "moe.shared_add": (3 * T * D * BF16, 0),
    }


def _all_reduce(T: int) -> tuple[float, float]:
    """(link bytes as the ring counts them, 2·7/8·S; seconds) of an all-reduce of T·d
    BF16 partial sums over the 8 ranks: the least of network.py's algorithms on the
    NVSwitch, one-shot (7·S in one step), two-shot (2·7/8·S in 2), NVLS (S in 2)."""
    S = T * D * BF16
    fastest = min(7 * S / NVLINK + STEP, 2 * 7 / 8 * S / NVLINK + 2 * STEP, S / NVLINK + 2 * STEP)
    return 2 * 7 / 8 * S, fastest


def hand_step(T: int, n: int, module: bool = False) -> dict[str, tuple]:
    """A decode step of DeepSeek-R1 NVFP4 (or of its MTP module) on one of 8 B200 ranks at
    batch 1, T new tokens over n cached, by hand: each op's (count, rows, weights,
    seconds). At batch 1 every op is memory-bound (up to 4 tokens: the vector work under
    5 FLOPs a byte against its knee of 18.75, 150 TFLOPS over 8 TB/s; attention under 64
    against BF16's 281; the NVFP4 GEMMs under 15 against 1,125): its bytes over the HBM;
    the collectives take network.py's time. Embeddings, norms, the router and the head are BF16, the
    linear layers NVFP4 (recipe nvfp4)."""
    link, ar = _all_reduce(T)
    ops: dict[str, tuple] = {
        # the vocabulary-parallel embedding reads T rows and T int64 ids, all-reduced
        "embed": (1, 2 * T * D * BF16 + 8 * T, 0),
        "embed.all_reduce": (1, link, 0, ar),
    }
    if module:  # the next token's embedding and the hidden state, normalized, joined and
        ops |= {  # projected, 2d → d (eh_proj)
            "mtp_proj.enorm": (1, (2 * T * D + D) * BF16, 0),
            "mtp_proj.hnorm": (1, (2 * T * D + D) * BF16, 0),
            "mtp_proj.concat": (1, 2 * 2 * T * D * BF16, 0),
            "mtp_proj.eh_proj.quantize": (1, T * 2 * D * (BF16 + NVFP4), 0),
            "mtp_proj.eh_proj": (1, *_gemm(T, D, 2 * D)),
        }
    dense, moe = _mlp("mlp", T, D_FF // TP), _moe(T)
    layers = [("layers.0", 1, moe, "moe")] if module else [
        ("layers.0", 3, dense, "mlp"), ("layers.3", 58, moe, "moe")]  # fmt: skip
    for group, count, ffn, kind in layers:
        ops |= {f"{group}.{name}": (count, *op) for name, op in (_mla(T, n) | ffn).items()}
        ops |= {f"{group}.attn.all_reduce": (count, link, 0, ar),
                f"{group}.{kind}.all_reduce": (count, link, 0, ar),
                f"{group}.residual.1": (count, 3 * T * D * BF16, 0)}  # fmt: skip
    logits = T * VOCAB * BF16  # the head's 1/8 shards, gathered whole
    ops |= {
        "norm": (1, (2 * T * D + D) * BF16, 0),
        "lm_head": (1, (T * D + T * VOCAB // TP) * BF16, D * VOCAB // TP * BF16),
        "lm_head.all_gather": (1, 7 / 8 * logits, 0, 7 / 8 * logits / NVLINK + STEP),
    }
    return {k: (c, r, w, v[0] if v else (r + w) / HBM) for k, (c, r, w, *v) in ops.items()}


def hand_seconds(T: int, n: int, module: bool = False) -> float:
    return sum(count * seconds for count, _, _, seconds in hand_step(T, n, module).values())


@pytest.fixture(scope="module")
def r1_nvfp4(tmp_path_factory):
    path = tmp_path_factory.mktemp("r1") / "deepseek-r1-nvfp4.model"
    body = "model deepseek_r1_nvfp4 extends deepseek_v3 {\n  recipe = nvfp4\n}\n"
    path.write_text(f'import "{MODELS / "deepseek-v3.model"}"\n' + body)
    spec, b200 = load_spec(path), load_hardware("b200")
    served = {k: serve(spec, b200, 1024, 2048, Parallel(tp=8), concurrency=1,
                       engine=Engine(name="trtllm"), speculation=Speculation(k) if k else None)
              for k in PUBLISHED_MTP}  # fmt: skip
    return spec, b200, served


def test_the_published_mtp_runs_stay_under_the_bound_as_the_docs_say(r1_nvfp4) -> None:
    # The bound's TPOT at k draft tokens (serving.py): the verify, a decode step of
    # k + 1 tokens, and k passes of the MTP module, one token each, over the k + 1
    # tokens a step yields with every proposal accepted; at the mean context,
    # 1,024 + 2,048 / 2 = 2,048. Each step by hand, op by op.
    spec, b200, served = r1_nvfp4
    n, tp8 = 2048, Parallel(tp=8)
    module = draft_spec(spec, Speculation())
    mtp = compile_report(module, b200, Workload(Phase.decode, 1, context=n, parallel=tp8))
    for k, published in PUBLISHED_MTP.items():
        verify = compile_report(spec, b200, Workload(Phase.decode, 1, context=n, parallel=tp8,
                                                     queries=k + 1))  # fmt: skip
        for report, hand in ((verify, hand_step(k + 1, n)), (mtp, hand_step(1, n, True))):
            ops = {o.name: o for o in report.ops}
            assert set(ops) == set(hand)
            for name, (count, rows, weights, seconds) in hand.items():
                o = ops[name]
                assert o.count == count, name
                assert o.bytes == pytest.approx(rows + weights, rel=1e-9), name
                assert o.time_s == pytest.approx(seconds, rel=1e-9), name
            # nothing overlaps: the step is its ops' times one after another
            assert report.totals.time_s == pytest.approx(
                sum(c * t for c, _, _, t in hand.values()), rel=1e-9
            )
        s = served[k]
        step = hand_seconds(k + 1, n) + k * hand_seconds(1, n, module=True)
        assert s.bound.tpot_s == pytest.approx(step / (k + 1), rel=1e-9)
        assert 1 / s.bound.tpot_s >= published
    # docs/serving.md's bound column, 1 / TPOT: 15.3, 12.2, 11.2 and 12.2 times the
    # published tokens/s a user
    bound = {k: 1 / s.bound.tpot_s for k, s in served.items()}
    assert {k: round(v) for k, v in bound.items()} == {0: 1699, 1: 2406, 2: 2807, 3: 3075}
    assert {k: round(v / PUBLISHED_MTP[k], 1) for k, v in bound.items()} == {
        0: 15.3,
        1: 12.2,
        2: 11.2,
        3: 12.2,
    }


def test_the_bound_without_mtp_term_by_term(r1_nvfp4) -> None:
    # What the bound's 1,699 tokens/s a user are made of: one decode step at batch 1 on
    # one of the 8 ranks, its terms from DeepSeek-V3's shapes. The weights it reads, NVFP4
    # but for the BF16 router and head, a layer: MLA's q_a, q_b, kv_a, W_UK, W_UV and o
    spec, b200, _ = r1_nvfp4
    r = compile_report(spec, b200, Workload(Phase.decode, 1, context=2048, parallel=Parallel(tp=8)))

    def total(*kinds: str) -> float:
        return sum(o.count * o.bytes for o in r.ops if o.kind in kinds)

    mla = (D * Q_RANK + Q_RANK * H * (NOPE + ROPE) + D * (KV_RANK + ROPE)
           + 2 * H * NOPE * KV_RANK + H * V_DIM * D) * NVFP4  # fmt: skip
    dense = 3 * D * (D_FF // TP) * NVFP4  # gate, up and down, 1/8 of the columns
    # the token's 8 routed experts and the shared one, 1/8 of each; the router whole
    moe = (8 + 1) * 3 * D * (EXPERT_FF // TP) * NVFP4 + D * EXPERTS * BF16
    head = D * VOCAB // TP * BF16
    assert (mla, dense, moe, head) == (20_606_976, 27_869_184, 31_539_200, 231_669_760)
    weights = 61 * mla + 3 * dense + 58 * moe + head
    assert weights == 3_401_576_448  # 425.2 µs at 8 TB/s, 70 % of the step
    # the GEMMs move the weights and, beside them, their rows in and out (by hand, 16 MB)
    hand = hand_step(1, 2048)
    rows = sum(count * moved for count, moved, w, _ in hand.values() if w)
    assert total("GEMM", "GroupedGemm") == pytest.approx(weights + rows, rel=1e-9)
    # the cache: 61 layers' latents of 576 at 2,048 positions, BF16, read once (the values
    # are the latent's first 512): 18.0 µs
    cache = read = 61 * 2048 * (KV_RANK + ROPE) * BF16
    assert cache == 143_917_056
    assert r.totals.memory.kv_cache == cache
    assert total("SDPA") == read + 61 * H * (KV_RANK + ROPE + KV_RANK) * BF16  # Q in, O out
    # 123 all-reduces (the embedding's, 2 a layer) of 7,168 BF16 sums: the ring's count,
    # 2·7/8 · 14,336 B each; one-shot sets the time, 7 × 14,336 B over 900 GB/s and a
    # 1 µs step; and the logits' all-gather, 7/8 · 129,280 × 2 B and a step: 138.0 µs
    reduces = [o for o in r.ops if o.name.endswith("all_reduce")]
    assert sum(o.count for o in reduces) == 2 * 61 + 1
    assert sum(o.count * o.bytes for o in reduces) == 123 * 2 * 7 / 8 * 14_336
    comm = 123 * (7 * 14_336 / 900e9 + 1e-6) + 7 / 8 * VOCAB * BF16 / 900e9 + 1e-6
    assert r.totals.comm_s == pytest.approx(comm, rel=1e-12)
    # nothing is compute-bound at batch 1: the step is the weights, the cache read, the
    # GEMMs' rows and the other ops' bytes (by hand: 42.8 MB; with the rows 7.4 µs) over
    # 8 TB/s, and the collectives: 588.5 µs
    other = sum(count * moved for name, (count, moved, w, _) in hand.items()
                if not w and "all_" not in name) - read  # fmt: skip
    assert (rows, other) == (16_058_608, 42_825_528)
    assert r.totals.compute_bound_s == 0
    assert r.totals.time_s == pytest.approx((weights + read + rows + other) / 8e12 + comm,
                                            rel=1e-9)  # fmt: skip
    assert 1 / r.totals.time_s == pytest.approx(1699.197, abs=1e-3)


def test_the_mtp_estimates_are_regression_pins(r1_nvfp4) -> None:
    # The kernel-aware estimate's tokens/s a user, docs/serving.md's table: a regression
    # pin, not an accuracy check: it reads the kernel tables' per-kernel times at a few
    # tokens (specs/kernels), no closed form. It is above every published figure, 129
    # against 111 (+16 %), 221 against 198 (+12 %), 268 against 250 (+7 %), 264 against
    # 253 (+4 %)
    _, _, served = r1_nvfp4
    estimate = {k: 1 / s.tpot_s for k, s in served.items()}
    assert {k: round(v) for k, v in estimate.items()} == {0: 129, 1: 221, 2: 268, 3: 264}
    assert {k: round(v / PUBLISHED_MTP[k] - 1, 2) for k, v in estimate.items()} == {
        0: 0.16,
        1: 0.12,
        2: 0.07,
        3: 0.04,
    }


def test_search_and_mixes_serve_each_layout_speculatively() -> None:
    from modelcost.analyses.serving_mix import RequestClass, serve_mix
    from modelcost.analyses.serving_search import search

    spec = Speculation(2, 0.5, LLAMA8)  # E = 1 + 0.5 + 0.25 = 1.75
    found = search(LLAMA8, H200, 128, 128, estimate="roofline", speculation=spec)
    assert found.tried and all(s.speculative is not None for s in found.tried)
    assert all(s.speculative.accepted_per_step == 1.75 for s in found.tried if s.speculative)
    mix = serve_mix(LLAMA8, H200, [RequestClass(128, 128, 1.0)], estimate="roofline",
                    speculation=spec)  # fmt: skip
    one = serve(LLAMA8, H200, 128, 128, estimate="roofline", speculation=spec)
    assert mix.classes[0] == one
