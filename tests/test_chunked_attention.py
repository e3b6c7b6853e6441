"""Chunked attention (Llama 4's local layers) and the weightless L2 qk-norm, by hand."""

import pytest

from modelcost import SpecError, count_params, parse_spec
from modelcost.ir.graph import Phase, Workload
from modelcost.lowering.lower import lower
from modelcost.perfmodel.attention import exact_pairs, keys_read

SPEC = """
model m {
  d_model = 1024
  embed(1000)
  repeat 2 {
    rmsnorm
    attention(8, 2, 128, chunk = 8192, qk_l2_norm = true)
    residual
  }
  lm_head(1000)
}
"""


def test_chunked_pairs_restart_at_each_chunk() -> None:
    # 16,384 causal queries in chunks of 8192: two triangles of 8192·8193/2
    assert exact_pairs(16384, 16384, True, chunk=8192) == 2 * 8192 * 8193 // 2
    # the last 1024 of 9216 keys: their chunk starts at 8192, so 1 + 2 + … + 1024
    assert exact_pairs(1024, 9216, True, chunk=8192) == 1024 * 1025 // 2
    assert keys_read(1024, 9216, True, chunk=8192) == 1024
    # within one chunk it is plain causal attention
    assert exact_pairs(2048, 2048, True, chunk=8192) == exact_pairs(2048, 2048, True)


def test_a_chunked_layer_attends_and_caches_its_chunk() -> None:
    spec = parse_spec(SPEC)
    prefill = lower(spec, Workload(Phase.prefill, 1, 16384))
    sdpa = next(n.op for n in prefill.nodes if n.op.kind == "SDPA")
    assert (sdpa.chunk, sdpa.pairs()) == (8192, 8192 * 8193)
    # decode at context 10,000: the new token's chunk began at 8192, so 1808 keys
    decode = lower(spec, Workload(Phase.decode, 4, context=10000))
    sdpa = next(n.op for n in decode.nodes if n.op.kind == "SDPA")
    assert sdpa.N_KV == (10000 - 1) % 8192 + 1 == 1808
    # the cache keeps at most a chunk: 4 sequences × 8192 positions × 2 · 2 heads · 128
    # × 2 bytes × 2 layers
    assert decode.facts.cache_bytes == 4 * 8192 * 2 * 2 * 128 * 2 * 2


def test_the_l2_qk_norm_has_no_weight_and_is_in_the_graph() -> None:
    spec = parse_spec(SPEC)
    plain = parse_spec(SPEC.replace(", qk_l2_norm = true", ""))
    assert count_params(spec).total == count_params(plain).total
    g = lower(spec, Workload(Phase.prefill, 1, 512))
    norm = next(n.op for n in g.nodes if n.name.endswith("qk_l2_norm"))
    assert (norm.num_elems, norm.num_channels, norm.is_affine) == (512 * 10 * 128, 128, False)


def test_a_window_and_chunks_together_are_refused() -> None:
    with pytest.raises(SpecError, match="a sliding window or chunks, not both") as err:
        parse_spec(SPEC.replace("chunk = 8192", "chunk = 8192, window = 4096"))
    assert err.value.line == 7  # the attention line (SPEC starts with a newline)
