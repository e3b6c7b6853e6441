"""The MoE token exchange (attention-DP expert parallelism): a token travels once to each
rank holding one of its experts, and across scale-up domains once to each domain
(DeepEP's normal kernels), in the bound; every (token, expert) copy in the estimate."""

import random
from math import comb

import pytest

from modelcost.hardware import load_hardware
from modelcost.network import bound, exchange, ring_time
from modelcost.perfmodel import CollectiveOp, Fanout

H100 = load_hardware("h100")  # scale-up domain 8, 450 GB/s a direction (1 µs);
# scale-out 50 GB/s a device (2 µs): specs/hardware/h100.hw
DEEPSEEK = Fanout(experts=256, top_k=8, groups=8, groups_kept=4)  # n_group 8, topk_group 4


def test_without_groups_a_slice_is_missed_by_every_pick() -> None:
    # 256 experts over 8 ranks, top 8: a rank's 32 experts all missed with
    # C(224, 8) / C(256, 8)
    f = Fanout(experts=256, top_k=8)
    assert f.hit(8) == pytest.approx(1 - comb(224, 8) / comb(256, 8), rel=1e-12)
    assert f.hit(1) == 1.0


def test_group_limited_routing_by_hand() -> None:
    # 8 ranks, one group each: the rank is hit when its group is one of the 4 kept
    # (4/8) and a pick of the 8 lands in its 32 of the 128 kept experts
    assert DEEPSEEK.hit(8) == pytest.approx(0.5 * (1 - comb(96, 8) / comb(128, 8)), rel=1e-12)
    # 4 domains of 2 groups: m of its 2 groups kept with C(2,m)·C(6,4−m)/C(8,4) (15, 40,
    # 15 of 70), then every pick misses its m·32 experts
    miss = (15 + 40 * comb(96, 8) / comb(128, 8) + 15 * comb(64, 8) / comb(128, 8)) / 70
    assert DEEPSEEK.hit(4) == pytest.approx(1 - miss, rel=1e-12)
    # 32 ranks of 8 experts, a quarter of a group: kept (4/8), then a pick in its 8 of 128
    assert DEEPSEEK.hit(32) == pytest.approx(0.5 * (1 - comb(120, 8) / comb(128, 8)), rel=1e-12)


@pytest.mark.parametrize("parts", [2, 4, 8, 16, 32])
def test_the_chance_matches_sampled_routing(parts: int) -> None:
    # an independent check: route 20,000 tokens as the model says (4 of 8 groups kept
    # uniformly, 8 experts drawn without replacement from their 128) and count the
    # slices each touches; the mean over tokens is parts × hit within sampling error
    rng = random.Random(7)
    per, hits, tokens = 256 // parts, 0, 20_000
    for _ in range(tokens):
        kept = rng.sample(range(8), 4)
        pool = [g * 32 + i for g in kept for i in range(32)]
        hits += len({e // per for e in rng.sample(pool, 8)})
    assert hits / tokens == pytest.approx(parts * DEEPSEEK.hit(parts), abs=0.03)


def test_the_exchange_across_four_nodes_by_hand() -> None:
    # DeepSeek-V3 prefill on 4 nodes of 8 H100 (attention dp 32, ep 32: LMSYS's prefill
    # pool), 8,000 tokens a rank, bf16 rows of 7,168: R = 8,000 × 7,168 × 2 B
    rows = 8000 * 7168 * 2
    op = CollectiveOp("all_to_all", 8000 * 8 * 7168, 32, fanout=DEEPSEEK)
    domains = 3 * DEEPSEEK.hit(4) * rows  # once to each other node holding a pick
    ranks = 31 * DEEPSEEK.hit(32) * rows  # once to each other rank holding one
    across = domains / 50e9 + 2e-6
    within = (ranks - domains) / 450e9 + 1e-6
    assert exchange(op, DEEPSEEK, H100) == pytest.approx(max(across, within), rel=1e-12)
    assert bound(op, H100)[0] == exchange(op, DEEPSEEK, H100)
    # 2.2 node copies a token against 6 of its 8 expert copies leaving the node
    assert 3 * DEEPSEEK.hit(4) == pytest.approx(2.196, abs=5e-4)
    # the op's bytes are the rank-level copies (hardware-free)
    assert op.bytes() == pytest.approx(ranks, rel=1e-12)


def test_the_exchange_is_never_slower_than_every_copy() -> None:
    # the bound with the routing moves at most the per-copy all-to-all's bytes, and the
    # estimate's NCCL form prices every copy
    for group, fanout in ((8, DEEPSEEK), (16, DEEPSEEK), (32, Fanout(256, 8)), (64, DEEPSEEK)):
        op = CollectiveOp("all_to_all", 1024 * 8 * 7168, group, fanout=fanout)
        assert bound(op, H100)[0] <= bound(op.per_copy(), H100)[0]
        assert ring_time(op, H100) == ring_time(op.per_copy(), H100)


R1_FP8 = """import "{models}/deepseek-v3.model"
model r1 extends deepseek_v3 {{
  recipe = fp8_block
  kv_dtype = fp8_e4m3
}}
"""


@pytest.fixture(scope="module")
def r1(tmp_path_factory):
    from conftest import MODELS

    path = tmp_path_factory.mktemp("r1") / "deepseek-r1-fp8.model"
    path.write_text(R1_FP8.format(models=MODELS))
    return path


def test_published_expert_parallel_runs_stay_under_the_bound(r1) -> None:
    # docs/serving.md's published DeepSeek-R1 runs: every measurement below its bound, and
    # the figures the table gives (one decimal)
    from modelcost import Engine, Parallel, serve
    from modelcost.disagg import parse_pools, serve_disagg

    # TensorRT-LLM's DeepSeek-R1 guide (docs/source/blogs/Best_perf_practice_on_DeepSeek-
    # R1_in_TensorRT-LLM.md @01c4ece9): 8 H200, DEP8, 1,024 + 2,048 tokens, 128 a rank:
    # 1,436.1584 output tokens/s per GPU
    s = serve(r1, "h200", 1024, 2048, Parallel(dp=8, ep=8), concurrency=128,
              engine=Engine(name="trtllm"))  # fmt: skip
    assert round(s.output_tokens_per_s_device, 1) == 2200.9
    assert round(s.bound.output_tokens_per_s_device, 1) == 3822.2 > 1436.1584
    # LMSYS, 2025-05-05 (large-scale EP, 96 H100): prefill on 4 nodes, DP attention with
    # EP32, 54,543 (2K prompts) and 50,302 (4K) input tokens/s per node; decode 22,282
    # output tokens/s per node at 256 sequences a GPU (EP72 with 32 redundant experts:
    # here EP64, the nearest split of 256 experts)
    for isl, conc, measured, ours in (
        (2000, 256, 54_543, 60_622.3),
        (4096, 128, 50_302, 58_286.0),
    ):
        d = serve_disagg(r1, "h100", isl, 100, parse_pools("dp32ep32:dp64ep64"),
                         concurrency=conc, engine=Engine(name="sglang"))  # fmt: skip
        per_node = d.prefill.bound_requests_per_s * isl / 4
        assert round(per_node, 1) == ours and per_node > measured
    d = serve_disagg(r1, "h100", 2000, 100, parse_pools("dp32ep32:dp64ep64"), concurrency=256,
                     engine=Engine(name="sglang"))  # fmt: skip
    assert round(256 * 8 / d.decode.bound_step_s, 1) == 36_499.8 > 22_282
