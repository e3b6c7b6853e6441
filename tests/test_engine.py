"""What serving engines do to a step: a prefill chunk riding on a decode step (one set
of GEMMs for both, attention apart), and a prefix-cache hit before a prefill."""

import pytest
from conftest import MODELS

from modelcost import SpecError, load_spec
from modelcost.ir.graph import Phase, Workload
from modelcost.perfmodel.attention import exact_pairs
from modelcost.roofline.compile import compile_report, compile_totals
from modelcost.targets.hardware import load_hardware

LLAMA8 = load_spec(MODELS / "llama3-8b.model")  # 32 heads of 128, 8 KV heads, d 4096
H100 = load_hardware("h100")
D, CHUNK, PROMPT = 64, 2 * 2048 + 512, 2048  # 64 decodes; two whole prompts and 512 more


def _op(report, name):
    return next(o for o in report.ops if o.name == name)


def test_a_chunked_prefill_step_is_the_sum_of_its_parts_ops() -> None:
    mixed = compile_report(LLAMA8, H100, Workload(Phase.decode, D, context=4096, chunk=CHUNK,
                                                  prompt=PROMPT))  # fmt: skip
    decode = compile_report(LLAMA8, H100, Workload(Phase.decode, D, context=4096))
    prompts = compile_report(LLAMA8, H100, Workload(Phase.prefill, 2, PROMPT))
    # one set of GEMMs for the decode tokens and the chunk: the weights are read once
    q = _op(mixed, "layers.0.attn.q_proj")
    assert q.shape["M"] == D + CHUNK == 4672
    # attention apart: the decodes' as in a decode step; the whole prompts' as their
    # prefill; the partial prompt's 512 queries from the middle of a 2048-token prompt
    # attend (2048 + 512)/2 = 1280 keys causally: 512·(2048 + 1)/2 = 524,544 pairs, the
    # mean of the four 512-token chunks a prompt is cut into
    for field in ("flops", "bytes", "time_s"):
        sdpa = getattr(_op(mixed, "layers.0.attn.sdpa"), field)
        assert sdpa == getattr(_op(decode, "layers.0.attn.sdpa"), field)
        whole = getattr(_op(mixed, "layers.0.attn.sdpa_prompts"), field)
        assert whole == getattr(_op(prompts, "layers.0.attn.sdpa"), field)
    part = _op(mixed, "layers.0.attn.sdpa_chunk")
    assert exact_pairs(512, 1280, causal=True) == 524_544
    assert part.flops == 2 * 32 * (128 + 128) * 524_544  # QKᵀ and PV, 2 FLOPs a MAC
    # the step's time is its ops' times, each counted once per layer it stands for
    assert mixed.totals.time_s == sum(o.total_time_s for o in mixed.ops)
    assert mixed.totals.per_token.tokens_per_step == D + CHUNK
    # the chunk writes its keys and values to the cache with the decodes'
    write = _op(mixed, "layers.0.attn.kv_cache_write")
    assert write.shape["nelems"] == (D + CHUNK) * 2 * 8 * 128
    # and its three prompts' caches are held: 64 at 4096 keys and 3 at 2048, 128 KB a
    # token (2 · 8 heads · 128 · 2 bytes · 32 layers)
    assert mixed.totals.memory.kv_cache == (64 * 4096 + 3 * 2048) * 131_072


def test_a_prefix_hit_prefills_only_the_new_tokens_over_all_the_keys() -> None:
    hit = compile_report(LLAMA8, H100, Workload(Phase.prefill, 4, 1024, prefix=3072))
    assert hit.workload.label == "seq 1024 after 3072"
    assert _op(hit, "layers.0.attn.q_proj").shape["M"] == 4 * 1024
    sdpa = _op(hit, "layers.0.attn.sdpa")
    # 1024 queries, the last of 4096 keys: Σ (3073 … 4096) = 3,670,528 pairs each
    assert exact_pairs(1024, 4096, causal=True) == 3_670_528
    assert sdpa.shape["N_KV"] == 4096 and sdpa.shape["N_Q"] == 1024
    # the cache holds every sequence's 4096 positions
    assert hit.totals.memory.kv_cache == 4 * 4096 * 131_072


@pytest.mark.parametrize(("workload", "message"), [
    (Workload(Phase.prefill, 1, 128, chunk=64), "a prefill chunk rides on a decode step"),
    (Workload(Phase.decode, 1, prefix=64), "decode's cache is --context"),
    (Workload(Phase.train, 1, 128, prefix=64), "training has no prefix cache"),
    (Workload(Phase.decode, 1, prompt=64), "give --chunk"),
])  # fmt: skip
def test_chunks_and_prefixes_where_they_mean_nothing_are_refused(workload, message) -> None:
    with pytest.raises(SpecError, match=message):
        compile_totals(LLAMA8, H100, workload)


def test_a_latent_or_recurrent_model_is_refused_a_chunk_rather_than_costed_wrong() -> None:
    for name, kind in (("deepseek-v3", "MLA"), ("mamba2-2.7b", "Mamba2")):
        spec = load_spec(MODELS / f"{name}.model")
        with pytest.raises(SpecError, match=f"has a {kind} layer"):
            compile_totals(spec, H100, Workload(Phase.decode, 1, chunk=64))
