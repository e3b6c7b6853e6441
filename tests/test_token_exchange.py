"""The MoE token exchange (attention-DP expert parallelism): a token travels once to each
rank holding one of its experts, and across scale-up domains once to each domain
(DeepEP's normal kernels), in the bound; every (token, expert) copy in the estimate."""

import random
from math import comb

import pytest

from modelcost.perfmodel import CollectiveOp, Fanout
from modelcost.targets.hardware import load_hardware
from modelcost.targets.network import bound, exchange, ring_time

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


@pytest.fixture(scope="module")
def runs(r1):
    """docs/serving.md's published DeepSeek-R1 runs, served: TensorRT-LLM's DEP8 on 8 H200
    (128 sequences a rank), and LMSYS's prefill (2,000- and 4,096-token prompts) and
    decode pools on H100 nodes."""
    from modelcost import Engine, Parallel, serve
    from modelcost.analyses.disagg import serve_disagg
    from modelcost.analyses.pools import parse_pools

    dep8 = serve(r1, "h200", 1024, 2048, Parallel(dp=8, ep=8), concurrency=128,
                 engine=Engine(name="trtllm"))  # fmt: skip
    lmsys = {isl: serve_disagg(r1, "h100", isl, 100, parse_pools("dp32ep32:dp64ep64"),
                               concurrency=conc, engine=Engine(name="sglang"))
             for isl, conc in ((2000, 256), (4096, 128))}  # fmt: skip
    return dep8, lmsys


def _exchange(r1, hw, workload):
    """The dispatch and combine all-to-alls of a compiled step, and its report."""
    from modelcost import load_spec
    from modelcost.roofline.compile import compile_report

    r = compile_report(load_spec(r1), load_hardware(hw), workload)
    ops = [o for o in r.ops if o.name.endswith("all_to_all")]
    assert [o.name for o in ops] == [
        "layers.3.moe.dispatch.all_to_all",
        "layers.3.moe.combine.all_to_all",
    ]
    assert all(o.count == 58 for o in ops)  # the 58 MoE layers
    return r, ops


# P_n, the chance one of n equal slices of the 256 experts holds one of a token's 8
# picks, by hand as test_group_limited_routing_by_hand has them: a rank of 8 holds a
# group (kept 4/8), a node of 4 two groups, a rank of 32 or 64 a quarter or an eighth
HIT8 = 0.5 * (1 - comb(96, 8) / comb(128, 8))
HIT4 = 1 - (15 + 40 * comb(96, 8) / comb(128, 8) + 15 * comb(64, 8) / comb(128, 8)) / 70
HIT32 = 0.5 * (1 - comb(120, 8) / comb(128, 8))
HIT64 = 0.5 * (1 - comb(124, 8) / comb(128, 8))


def test_published_expert_parallel_runs_stay_under_the_bound(r1, runs) -> None:
    # docs/serving.md's published DeepSeek-R1 runs: every measurement below its bound,
    # and the token exchange in each bound's step by hand: R = a rank's rows × 7,168 × 2
    # B (bf16), each row once to each other rank holding one of its picks (and once to
    # each other node), at 450 GB/s inside an 8-GPU node (1 µs) and 50 GB/s across (2 µs)
    from modelcost import Parallel
    from modelcost.ir.graph import Phase, Workload

    dep8, lmsys = runs
    # TensorRT-LLM's DeepSeek-R1 guide (docs/source/blogs/Best_perf_practice_on_DeepSeek-
    # R1_in_TensorRT-LLM.md @01c4ece9): 8 H200, DEP8, 1,024 + 2,048 tokens, 128 a rank:
    # 1,436.1584 output tokens/s per GPU. The bound's decode step at the mean context
    # (2,048): 128 rows a rank, 7·P₈·R over NVLink; the exchange is 5.5 % of the step
    assert dep8.bound.output_tokens_per_s_device > 1436.1584
    w = Workload(Phase.decode, 8 * 128, context=2048, parallel=Parallel(dp=8, ep=8))
    r, ops = _exchange(r1, "h200", w)
    assert dep8.bound.tpot_s == r.totals.time_s
    R = 128 * 7168 * 2
    for o in ops:
        assert o.bytes == pytest.approx(7 * HIT8 * R, rel=1e-12)
        assert o.time_s == pytest.approx(7 * HIT8 * R / 450e9 + 1e-6, rel=1e-12)
    share = sum(o.count * o.time_s for o in ops) / r.totals.time_s
    assert round(share, 3) == 0.055
    # LMSYS, 2025-05-05 (large-scale EP, 96 H100): prefill on 4 nodes, DP attention with
    # EP32, 54,543 (2K prompts) and 50,302 (4K) input tokens/s per node. SGLang prefills
    # 8,192 tokens a step (chunked_prefill_size): 4 prompts of 2,000 a rank, 2 of 4,096.
    # The exchange is the slower of its phases: across, 3·P₄·R over the NIC; inside, the
    # other (31·P₃₂ − 3·P₄)·R rank copies over NVLink; 55 % and 53 % of the step
    for isl, prompts, measured, share in ((2000, 4, 54_543, 0.554), (4096, 2, 50_302, 0.532)):
        d = lmsys[isl]
        assert d.prefill.batch == prompts
        per_node = d.prefill.bound_requests_per_s * isl / 4
        assert per_node > measured
        w = Workload(Phase.prefill, 32 * prompts, isl, parallel=Parallel(dp=32, ep=32))
        r, ops = _exchange(r1, "h100", w)
        assert d.prefill.bound_step_s == r.totals.time_s
        assert per_node == pytest.approx(32 * prompts * isl / 4 / r.totals.time_s, rel=1e-12)
        R = prompts * isl * 7168 * 2
        across = 3 * HIT4 * R / 50e9 + 2e-6
        inside = (31 * HIT32 - 3 * HIT4) * R / 450e9 + 1e-6
        assert across > inside
        for o in ops:
            assert o.bytes == pytest.approx(31 * HIT32 * R, rel=1e-12)
            assert o.time_s == pytest.approx(across, rel=1e-12)
        assert round(sum(o.count * o.time_s for o in ops) / r.totals.time_s, 3) == share
    # decode: 22,282 output tokens/s per node at 256 sequences a GPU (EP72 with 32
    # redundant experts: here EP64 on 8 nodes, the nearest split of 256 experts), at
    # the mean context 2,000 + 100 / 2; across 7·P₈·R, inside (63·P₆₄ − 7·P₈)·R; 51 %
    d = lmsys[2000]
    assert 256 * 8 / d.decode.bound_step_s > 22_282
    w = Workload(Phase.decode, 64 * 256, context=2050, parallel=Parallel(dp=64, ep=64))
    r, ops = _exchange(r1, "h100", w)
    assert d.decode.bound_step_s == r.totals.time_s
    R = 256 * 7168 * 2
    across = 7 * HIT8 * R / 50e9 + 2e-6
    assert across > (63 * HIT64 - 7 * HIT8) * R / 450e9 + 1e-6
    for o in ops:
        assert o.bytes == pytest.approx(63 * HIT64 * R, rel=1e-12)
        assert o.time_s == pytest.approx(across, rel=1e-12)
    assert round(sum(o.count * o.time_s for o in ops) / r.totals.time_s, 3) == 0.51


def test_the_published_runs_figures_in_the_docs_are_regression_pins(runs) -> None:
    # docs/serving.md's table, one decimal: regression pins, not accuracy. The estimate
    # of the DEP8 run is 2,200.9 output tokens/s per GPU against the published 1,436.2,
    # 53 % over it; the bounds are 2.66 times it (3,822.2), and 11 %, 16 % and 72 % over
    # LMSYS's 54,543 and 50,302 prefill and 22,282 decode tokens/s per node (60,622.3,
    # 58,286.0, 38,333.0)
    dep8, lmsys = runs
    assert round(dep8.output_tokens_per_s_device, 1) == 2200.9
    assert round(dep8.output_tokens_per_s_device / 1436.1584 - 1, 2) == 0.53
    assert round(dep8.bound.output_tokens_per_s_device, 1) == 3822.2
    assert round(dep8.bound.output_tokens_per_s_device / 1436.1584, 2) == 2.66
    prefill = {isl: d.prefill.bound_requests_per_s * isl / 4 for isl, d in lmsys.items()}
    assert {isl: round(v, 1) for isl, v in prefill.items()} == {2000: 60_622.3, 4096: 58_286.0}
    over = {2000: prefill[2000] / 54_543 - 1, 4096: prefill[4096] / 50_302 - 1}
    assert {isl: round(v, 2) for isl, v in over.items()} == {2000: 0.11, 4096: 0.16}
    decode = 256 * 8 / lmsys[2000].decode.bound_step_s
    assert round(decode, 1) == 38_333.0
    assert round(decode / 22_282 - 1, 2) == 0.72
