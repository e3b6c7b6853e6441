"""Several token streams in one model: encoders a decoder cross-attends to (Whisper, T5),
a vision tower whose tokens join the prompt (LLaVA), and an auxiliary module trained
beside the model (DeepSeek-V3's multi-token prediction). Shapes by hand from the specs."""

from pathlib import Path

import pytest

from modelcost import SpecError, count_params, load_hardware, parse_spec
from modelcost.base.dtypes import DType
from modelcost.ir.graph import Parallel, Phase, Workload
from modelcost.language.fmt import format_source
from modelcost.language.resolve import load_spec
from modelcost.lowering.lower import lower
from modelcost.roofline.compile import compile_report

MODELS = Path(__file__).resolve().parent.parent / "specs" / "models"


def nodes(spec, w):
    return {n.name: n for n in lower(spec, w).nodes}


@pytest.fixture(scope="module")
def whisper():
    return load_spec(MODELS / "whisper-large-v3.model")


@pytest.fixture(scope="module")
def llava():
    return load_spec(MODELS / "llava-1.5-7b.model")


def test_whisper_prefill_runs_the_encoder_over_its_1500_frames(whisper) -> None:
    g = lower(whisper, Workload(Phase.prefill, 2, 4))
    n = {x.name: x for x in g.nodes}
    # the convolutions read 3,000 mel frames (30 s at 10 ms) and write 1,500
    conv1, conv2 = n["encoder.conv_stem.conv1"].op, n["encoder.conv_stem.conv2"].op
    assert (conv1.x_shape, conv1.w_shape, conv1.out_shape) == (
        (2, 128, 3000), (1280, 128, 3), (2, 1280, 3000))  # fmt: skip
    assert (conv2.x_shape, conv2.out_shape) == ((2, 1280, 3000), (2, 1280, 1500))
    # 32 encoder layers over 2 × 1,500 tokens, bidirectional
    q = n["encoder.layers.0.attn.q_proj"]
    assert (q.count, q.op.M, q.op.N, q.op.K) == (32, 3000, 1280, 1280)
    sdpa = n["encoder.layers.0.attn.sdpa"].op
    assert (sdpa.B, sdpa.N_Q, sdpa.N_KV, sdpa.causal) == (2, 1500, 1500, False)
    # the decoder's cross-attention: queries from its 2 × 4 tokens, keys and values
    # projected from the encoder's 3,000 output rows (k_proj has no bias, v_proj has)
    cq, ck, cv = (n[f"layers.0.cross_attn.{p}_proj"].op for p in "qkv")
    assert (cq.M, cq.N, cq.K) == (8, 1280, 1280)
    assert (ck.M, ck.K, ck.bias, cv.M, cv.bias) == (3000, 1280, False, 3000, True)
    assert n["layers.0.cross_attn.k_proj"].inputs == ("encoder.norm",)
    cross = n["layers.0.cross_attn.sdpa"].op
    assert (cross.B, cross.N_Q, cross.H_Q, cross.N_KV, cross.causal) == (2, 4, 20, 1500, False)
    # written once for every decode step: 3,000 rows × (k + v) × 1280
    assert n["layers.0.cross_attn.kv_cache_write"].op.tensor == (3000 * 2 * 1280,)
    assert g.shape.label == "seq 4, encoder stream 1500"
    assert [x.name for x in g.groups] == ["model", "encoder", "encoder.layers.0", "layers.0"]


def test_whisper_decode_reuses_the_encoders_keys_and_values(whisper) -> None:
    g = lower(whisper, Workload(Phase.decode, 2, context=100))
    n = {x.name: x for x in g.nodes}
    assert not any(name.startswith("encoder.") for name in n)  # the encoder does not run
    assert "layers.0.cross_attn.k_proj" not in n and "layers.0.cross_attn.v_proj" not in n
    cross = n["layers.0.cross_attn.sdpa"]
    assert cross.inputs == ("layers.0.cross_attn.q_proj",)  # K and V come from the cache
    assert (cross.op.N_Q, cross.op.N_KV, cross.op.kv) == (1, 1500, DType.fp16)
    # the caches: 32 layers × 2 sequences × (k + v) × 1280 × 2 bytes, over 100 positions
    # of its own and 1,500 of the encoder's: 32,768,000 + 491,520,000
    assert g.facts.cache_bytes == 32 * 2 * 2 * 1280 * 2 * (100 + 1500) == 524_288_000


def test_t5_takes_its_source_length_from_the_workload() -> None:
    t5 = load_spec(MODELS / "t5-base.model")
    n = nodes(t5, Workload(Phase.prefill, 1, 64, streams={"encoder": 1024}))
    assert n["encoder.layers.0.attn.q_proj"].op.M == 1024
    # T5's relative position bias: one lookup per (query, key) pair of each stream
    assert n["encoder.rel_pos_bias"].op.tokens == 1024 * 1024
    assert n["rel_pos_bias"].op.tokens == 64 * 64
    assert n["layers.0.cross_attn.sdpa"].op.N_KV == 1024
    # the spec's 512 by default
    assert nodes(t5, Workload(Phase.prefill, 1, 64))["layers.0.cross_attn.sdpa"].op.N_KV == 512


def test_llava_prefill_counts_the_image_tokens_with_the_text(llava) -> None:
    g = lower(llava, Workload(Phase.prefill, 1, 100))
    n = {x.name: x for x in g.nodes}
    # the tower: 577 tokens ((336/14)² patches + a class token) 1024 wide, 23 layers
    q = n["image.layers.0.attn.q_proj"]
    assert (q.count, q.op.M, q.op.K) == (23, 577, 1024)
    # the class token dropped (keep), the projector runs over the 576 patch tokens
    proj = n["image.linear.1"].op
    assert (proj.M, proj.N, proj.K) == (576, 4096, 4096)
    # 100 text tokens are looked up, 576 image tokens written into their places: the
    # language model runs over 676
    assert n["embed"].op.tokens == 100
    assert n["embed.join"].inputs == ("embed", "image.linear.1")
    assert n["layers.0.attn.q_proj"].op.M == 676
    assert n["layers.0.attn.sdpa"].op.N_KV == 676
    assert g.shape.label == "seq 676 with 576 image tokens, image stream 577"
    assert g.shape.T_job == 676


def test_llava_decode_runs_the_language_model_over_a_cache_holding_the_image(llava) -> None:
    g = lower(llava, Workload(Phase.decode, 1, context=100))
    n = {x.name: x for x in g.nodes}
    assert not any(name.startswith("image.") for name in n)
    assert n["embed"].op.tokens == 1 and "embed.join" not in n  # the new token's alone
    assert n["layers.0.attn.sdpa"].op.N_KV == 676
    # 32 layers × 676 positions × (k + v) × 4096 × 2 bytes (fp16)
    assert g.facts.cache_bytes == 32 * 676 * 2 * 4096 * 2
    # every weight is held: the tower's too (7,050,828,800 fp16 parameters)
    assert g.facts.weight_bytes == 2 * 7_050_828_800


def test_multi_token_prediction_trains_beside_the_model_and_serves_apart() -> None:
    ds = load_spec(MODELS / "deepseek-v3.model")
    train = lower(ds, Workload(Phase.train, 1, 512))
    n = {x.name: x for x in train.nodes}
    # the next token's embedding and the main model's last layer output, projected
    # from 2 × 7168 to 7168 (eh_proj), then one MoE layer and its own head and loss
    assert n["mtp.mtp_proj.hnorm"].inputs == ("layers.3.residual.1",)
    eh = n["mtp.mtp_proj.eh_proj"].op
    assert (eh.M, eh.N, eh.K) == (512, 7168, 14_336)
    assert "mtp.layers.0.moe.experts.gate_up" in n and "mtp.loss" in n
    held = train.facts.device_dense + train.facts.device_experts
    assert held == 671_026_419_200 + 13_463_426_304  # the model and the module
    prefill = lower(ds, Workload(Phase.prefill, 1, 512))
    assert not any(x.name.startswith("mtp") for x in prefill.nodes)
    assert prefill.facts.device_dense + prefill.facts.device_experts == 671_026_419_200
    assert prefill.facts.params_total == count_params(ds).total == 671_026_419_200


def test_streams_refuse_what_they_do_not_model(whisper) -> None:
    hw = load_hardware("h100")
    for w, match in (
        (Workload(Phase.prefill, 2, 4, parallel=Parallel(tp=2, pp=2)), "--pp"),
        (Workload(Phase.prefill, 2, 4, parallel=Parallel(tp=2, sp=True)), "--sp"),
        (Workload(Phase.decode, 2, context=10, chunk=4), "--chunk"),
        (Workload(Phase.prefill, 2, 4, streams={"encoder": 750}), "audio window"),
        (Workload(Phase.prefill, 2, 4, streams={"decoder": 7}), "no stream `decoder`"),
    ):
        with pytest.raises(SpecError, match=match):
            compile_report(whisper, hw, w)
    # tensor parallelism splits the encoder's heads as the decoder's: 20 / 2 each
    g = lower(whisper, Workload(Phase.prefill, 2, 4, parallel=Parallel(tp=2)))
    n = {x.name: x for x in g.nodes}
    assert n["encoder.layers.0.attn.sdpa"].op.H_Q == n["layers.0.cross_attn.sdpa"].op.H_Q == 10


def test_a_stream_formats_canonically_and_resolves_by_name() -> None:
    text = (
        "model m {\n  d_model = 64\n\n  stream encoder(length = 8) {\n    embed(100)\n"
        "    repeat 2 {\n      rmsnorm\n    }\n  }\n  embed(100)\n"
        '  cross_attention(4, source = "encoder")\n}\n'
    )
    assert format_source(text) == text
    spec = parse_spec(text)
    (cross,) = [op for op in spec.body if op.kind == "cross_attention"]
    assert (cross.source, cross.source_dim) == ("encoder", 64)
    # two embedding tables, the encoder's two norms and the cross-attention's four
    # 64 × 64 projections: 100·64 · 2 + 2 · 64 + 4 · 4096
    assert count_params(spec).total == 2 * 6400 + 2 * 64 + 4 * 4096
    assert count_params(spec).streams == {"encoder": 6400 + 2 * 64}


def test_the_cli_takes_a_streams_length_and_reports_it() -> None:
    import json
    import subprocess
    import sys

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "modelcost", *args],
                              capture_output=True, text=True)  # fmt: skip

    r = run("compile", str(MODELS / "t5-base.model"), "--hw", "h100", "--seq", "64",
            "--stream", "encoder=1Ki", "--format", "json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    (report,) = json.loads(r.stdout)["reports"]
    assert report["workload"]["streams"] == {"encoder": 1024}  # 1Ki = 1,024 tokens
    assert report["workload"]["label"] == "seq 64, encoder stream 1024"
    bad = run("compile", str(MODELS / "t5-base.model"), "--hw", "h100", "--stream", "encoder")
    assert bad.returncode == 2 and "expected NAME=LENGTH" in bad.stderr
    params = run("params", str(MODELS / "deepseek-v3.model"))
    assert "apart: `mtp` (auxiliary)   13,463,426,304" in params.stdout
