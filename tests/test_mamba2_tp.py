"""Mamba-2 under tensor parallelism as vLLM serves it (issue 24, item 7): the heads split
over the ranks, a single B/C group replicated on each (mamba_mixer2's
`extra_groups_for_head_shards`: tp − 1 extra copies), refused only where vLLM refuses."""

import pytest
from conftest import MODELS

from modelcost import Parallel, Phase, Workload, compile_report, load_spec
from modelcost.base.errors import SpecError
from modelcost.kinds import registry
from modelcost.language.spec import walk

SPEC = load_spec(MODELS / "mamba2-2.7b.model")
(MIXER,) = {op for op, _ in walk(SPEC.body) if op.kind == "mamba2"}
# state-spaces/mamba2-2.7b: d_model 2560, d_inner 2 · 2560 = 5120 in 80 heads of 64,
# 1 group, d_state 128, d_conv 4, conv bias, no projection bias
D, DI, H, N = 2560, 5120, 80, 128


def test_the_single_group_is_replicated_on_each_rank() -> None:
    room = registry.room(MIXER)
    # tp 1: in_proj D × (2·DI + 2·N + H), conv over DI + 2·N channels (4 taps and a
    # bias), dt_bias, A_log and D per head, the norm's DI, out_proj DI × D
    whole = D * (2 * DI + 2 * N + H) + (DI + 2 * N) * 5 + 3 * H + DI + DI * D
    assert room.params(MIXER, 1, 1) == (whole, 0) == (40_214_000, 0)
    # tp 2: half the heads and width, the group's B and C whole on each rank
    half = D * (DI + 2 * N + H // 2) + (DI // 2 + 2 * N) * 5 + 3 * H // 2 + DI // 2 + DI // 2 * D
    assert room.params(MIXER, 2, 1) == (half, 0) == (20_435_320, 0)
    # the replicated B/C projection and its conv channels: 2·N·(D + 5) = 656,640 on
    # each rank, so a rank holds half the layer and half of that again
    assert half - whole // 2 == 2 * N * (D + 5) // 2 == 328_320
    # the state: 40 heads × 64 × 128 fp32, 4 taps of the rank's 2,560 + 256 channels in
    # bf16 (vLLM: conv_dim = (DI + 2 · (1 + 1) · N) / 2)
    assert room.memory.per_sequence(MIXER, 2) == 40 * 64 * 128 * 4 + (DI // 2 + 2 * N) * 4 * 2


def test_tp_2_compiles_and_what_vllm_refuses_is_refused() -> None:
    w = Workload(Phase.decode, 8, context=1024, parallel=Parallel(tp=2))
    r = compile_report(SPEC, "h100", w)
    assert r.workload.layout.tp == 2 and r.totals.time_s > 0
    room, where = registry.room(MIXER), "`mamba2` of `mamba2_2_7b`"
    # 80 heads do not split over 3 ranks
    error = room.sharding(MIXER, Parallel(tp=3), where)
    assert isinstance(error, SpecError) and "80 SSD heads" in error.message
    # several groups split over the ranks, or are refused (vLLM: "If tensor parallel
    # world size does not divide num_groups, then num_groups must equal 1")
    two = MIXER.model_copy(update={"groups": 2})
    assert room.sharding(two, Parallel(tp=2), where) is None
    error = room.sharding(two, Parallel(tp=4), where)
    assert isinstance(error, SpecError) and "2 B/C groups" in error.message
    assert room.params(two, 2, 1)[0] < room.params(two, 1, 1)[0]


@pytest.mark.parametrize("tp", [2, 4, 8])
def test_each_rank_holds_no_more_than_the_layer(tp: int) -> None:
    room = registry.room(MIXER)
    whole, part = room.params(MIXER, 1, 1)[0], room.params(MIXER, tp, 1)[0]
    assert whole // tp < part < whole
