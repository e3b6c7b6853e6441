"""Collectives as NCCL/RCCL and the engines achieve them
(modelcost/estimate/collectives_achieved.py, specs/kernels/collectives.json): each
figure's use by hand from its source, the engines' one-shot/two-shot switch sizes, and
never below the bound (network.py)."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelcost.base.errors import SpecError
from modelcost.estimate.collectives_achieved import DEFAULT_ENGINE, ENGINES, achieved
from modelcost.estimate.estimate import estimate
from modelcost.perfmodel import CollectiveOp
from modelcost.targets.hardware import load_hardware, shipped_hardware
from modelcost.targets.network import bound, collective_time, ring_time

H100, H200, MI300X = load_hardware("h100"), load_hardware("h200"), load_hardware("mi300x")
MI355X, B200, A100 = load_hardware("mi355x"), load_hardware("b200"), load_hardware("a100")
KiB, MiB = 1024, 1024**2


def ar(nbytes: int, group: int = 8, stride: int = 1) -> CollectiveOp:
    """An all-reduce of `nbytes` bf16 bytes."""
    return CollectiveOp("all_reduce", nbytes // 2, group, stride=stride)


def est(op: CollectiveOp, hw):
    return estimate(op, op.flops(), op.bytes(), collective_time(op, hw), hw)


def test_vllm_custom_all_reduce_1mb_on_8_h100_is_its_published_latency() -> None:
    # sglang PR #2904, 'vllm' table: TP8, 1,048,576 B, 0.0450 ms; at or above 256 KiB
    # vLLM's custom_all_reduce.cuh runs the 2-stage kernel at TP8
    assert DEFAULT_ENGINE == "vllm"
    op = ar(1 * MiB)
    e = est(op, H100)
    assert e.time_s == pytest.approx(45.0e-6, rel=1e-12)
    assert e.reason == ("vLLM custom all-reduce, two-shot at 1 MiB × 8: 45 µs published at 1 MiB")
    # the bound is below it: NVLink SHARP, 1 MiB sent and received once at 450 GB/s per
    # direction in 2 steps × 1 µs = 4.33 µs (the ring: 1 MiB · 2·7/8 at 450 + 14 × 1 µs)
    assert bound(op, H100) == (pytest.approx(MiB / 450e9 + 2e-6), "in-switch")
    assert ring_time(op, H100) == pytest.approx(MiB * 1.75 / 450e9 + 14e-6)


def test_interpolation_is_linear_in_log_size_between_published_points() -> None:
    # 16 KiB at TP8 lies 2/3 of the way from 4 KiB (9.3 µs) to 32 KiB (11.8 µs) in
    # log(size): 9.3 + 2/3 · 2.5 = 10.967 µs (sglang PR #2904, 'vllm' table)
    t, why = achieved(ar(16 * KiB), H100)
    assert t == pytest.approx((9.3 + 2 / 3 * 2.5) * 1e-6, rel=1e-12)
    assert why == (
        "vLLM custom all-reduce, one-shot at 16 KiB × 8: 11.0 µs between 9.3 µs at "
        "4 KiB and 11.8 µs at 32 KiB"
    )
    # below the smallest published size: the smallest's time, 10.1 µs at 512 B
    assert achieved(ar(256), H100)[0] == pytest.approx(10.1e-6)


def test_a_decode_all_reduce_is_the_engines_figure_above_its_bound() -> None:
    # Llama 3 70B decode at tp 8: 8,192 bf16 = 16 KiB. The bound is a one-shot: each
    # rank reads the 7 others' 16 KiB at 450 GB/s in 1 step × 1 µs = 1.25 µs (the ring's
    # 14 steps × 1 µs + 16 KiB·1.75/450 GB/s = 14.06 µs was above the engine's figure),
    # so the estimate is the engine's 10.97 µs (sglang PR #2904, interpolated)
    op = ar(16 * KiB)
    assert bound(op, H100) == (pytest.approx(1e-6 + 7 * 16 * KiB / 450e9), "one-shot")
    e = est(op, H100)
    assert e.time_s == pytest.approx((9.3 + 2 / 3 * 2.5) * 1e-6, rel=1e-12)
    assert "no faster than its roofline" not in e.reason


@pytest.mark.parametrize(
    ("engine", "group", "nbytes", "shot"),
    [
        # vLLM custom_all_reduce.cuh: (TP<=4 and < 512 KiB) or (TP<=8 and < 256 KiB)
        ("vllm", 8, 256 * KiB - 16, "one-shot"),
        ("vllm", 8, 256 * KiB, "two-shot"),
        ("vllm", 4, 512 * KiB - 16, "one-shot"),
        ("vllm", 4, 512 * KiB, "two-shot"),
        ("vllm", 2, 1 * MiB, "one-shot"),  # TP2: always 1-stage
        ("sglang", 8, 256 * KiB, "two-shot"),  # vLLM's kernel since sglang PR #5079
        # TensorRT-LLM AUTO table, SM90 TP8 bf16: ONESHOT below 512 KiB (derived)
        ("trtllm", 8, 512 * KiB - 16, "one-shot"),
        ("trtllm", 8, 512 * KiB, "two-shot"),
    ],
)
def test_the_engines_switch_sizes(engine: str, group: int, nbytes: int, shot: str) -> None:
    assert f", {shot} at " in achieved(ar(nbytes, group), H100, engine)[1]


def test_trtllm_and_its_gaps() -> None:
    # sglang PR #2904, 'custom allreduce' table (TensorRT-LLM's kernels): TP8 1 MiB 33.8 µs
    assert achieved(ar(1 * MiB), H100, "trtllm")[0] == pytest.approx(33.8e-6)
    # TP4: no switch derived from TensorRT-LLM's table, so NCCL's ring at 370 GB/s
    t, why = achieved(ar(1 * MiB, 4), H100, "trtllm")
    assert t == pytest.approx(MiB * 2 * 3 / 4 / 370e9 + 6 * 1e-6)
    assert why.startswith("NCCL/RCCL ring at 370 GB/s busbw")


def test_beyond_the_published_sizes_and_the_buffer_is_nccl() -> None:
    # 2 MiB: above vLLM's largest published point (1 MiB), below its 8 MiB buffer: no
    # extrapolation, NCCL as nccl-tests measured it on 8×H100 (NCCL 2.24.3, user,
    # vpbenchmarking): 2 MiB 43.23 µs, 8 MiB 84.47 µs
    for nbytes, us in ((2 * MiB, 43.23), (8 * MiB, 84.47)):
        t, why = achieved(ar(nbytes), H100)
        assert t == pytest.approx(us * 1e-6, rel=1e-12)
        assert why.startswith("NCCL/RCCL all-reduce at ") and "as measured" in why


def test_1gb_all_reduce_as_measured_is_above_its_bound() -> None:
    # nccl-tests on 8×H100 (NCCL 2.24.3): 1 GiB in 4,010.54 µs (468.5 GB/s busbw, near
    # NVIDIA's ~480 of nccl-tests#212); the bound reduces in the switch: 1 GiB sent and
    # received once at 450 GB/s + 2 µs = 2.39 ms, below it
    op = ar(2**30)
    t, _ = achieved(op, H100)
    assert t == pytest.approx(4010.54e-6, rel=1e-12)
    assert collective_time(op, H100) == pytest.approx(2**30 / 450e9 + 2e-6)
    assert est(op, H100).time_s == t > collective_time(op, H100)


def test_all_gather_at_the_ring_busbw() -> None:
    # nccl-tests#212: non-allreduce operations ~370 GB/s busbw on 8×H100; all-gather of
    # S moves S·7/8 at busbw, plus the link model's 7 steps × 1 µs
    op = CollectiveOp("all_gather", 2**29, 8)
    e = est(op, H100)
    assert e.time_s == pytest.approx(2**30 * 7 / 8 / 370e9 + 7e-6, rel=1e-12)
    assert e.time_s > collective_time(op, H100)
    assert e.reason == "NCCL/RCCL ring at 370 GB/s busbw; the link model's per-step latency"


def test_a_part_without_its_own_figure_uses_its_familys() -> None:
    op = CollectiveOp("all_gather", 2**29, 8)
    t, why = achieved(op, H200)
    assert t == achieved(op, H100)[0]
    assert "h100's figure" in why
    assert "h100's figure" in achieved(ar(1 * MiB), H200)[1]


def test_xgmi_ring_on_mi300x() -> None:
    # AMD ROCm blog (mi300x-rccl-xgmi): ~48 GB/s usable per xGMI link, one link to each
    # peer: 8 ranks 7 × 48 = 336 GB/s busbw, 4 ranks 3 × 48 = 144 (derived). All-gather
    # over 8 ranks moves S·7/8 at 336 GB/s, plus the link model's 7 steps × 1 µs
    op = CollectiveOp("all_gather", 32 * MiB, 8)
    t, why = achieved(op, MI300X)
    assert t == pytest.approx(64 * MiB * 7 / 8 / 336e9 + 7e-6, rel=1e-12)
    assert why.startswith("NCCL/RCCL ring at 336 GB/s busbw (7 links × 48)")
    assert est(op, MI300X).time_s == t > collective_time(op, MI300X)
    t4, _ = achieved(ar(64 * MiB, 4), MI300X)  # 4 ranks: no measured table, the ring
    assert t4 == pytest.approx(64 * MiB * 1.5 / 144e9 + 6e-6, rel=1e-12)


def test_mi300x_all_reduce_over_8_as_rccl_tests_measured_it() -> None:
    # AMD ROCm blog (mi300x-rccl-xgmi, 2025-03-02), rccl-tests all_reduce_perf on one
    # 8×MI300X node, out-of-place: 64 MiB 429.1 µs; 8 MiB 83.68, 16 MiB 148.8 µs; 32 KiB
    # 13.31 µs; 1 GiB 5970.6 µs (314.7 GB/s busbw)
    t, why = achieved(ar(64 * MiB), MI300X)
    assert t == pytest.approx(429.1e-6, rel=1e-12)
    assert why == "NCCL/RCCL all-reduce at 64 MiB × 8 as measured: 429.1 µs published at 64 MiB"
    # between two sizes, linear in log(size): 12 MiB is halfway from 8 to 16 MiB in log2
    w = math.log(12 / 8) / math.log(2)
    assert achieved(ar(12 * MiB), MI300X)[0] == pytest.approx((83.68 + w * (148.8 - 83.68)) * 1e-6)
    # below the smallest published size, not the table's: the ring at 336 GB/s busbw and
    # its 14 steps of 1 µs (14.2 µs at 2 KiB), but never more than the 13.31 µs measured
    # at 32 KiB: a smaller message does not take longer
    t2, why2 = achieved(ar(2 * KiB), MI300X)
    assert t2 == pytest.approx(13.31e-6) and "at most the 13.31 µs measured at 32 KiB" in why2
    why4 = achieved(ar(2 * KiB, 4), MI300X)[1]  # 4 ranks: no table, the ring alone
    assert why4.startswith("NCCL/RCCL ring at 144 GB/s")
    # past 1 GiB at 1 GiB's busbw: 2 GiB takes twice 1 GiB's time
    assert achieved(ar(2048 * MiB), MI300X)[0] == pytest.approx(2 * 5970.6e-6)
    # the MI325X (same xGMI family) takes the MI300X's figure, said so
    assert "mi300x's figure" in achieved(ar(64 * MiB), load_hardware("mi325x"))[1]
    assert est(ar(64 * MiB), MI300X).time_s == t > collective_time(ar(64 * MiB), MI300X)


def test_vllm_custom_all_reduce_on_mi355x() -> None:
    # vllm PR #39080 'vllm/us' column, MI355X TP8 bf16: 24 KiB 6.3 µs, 192 KiB 10.0 µs;
    # vLLM on ROCm at TP8: 1-stage at or below 64 KB
    assert achieved(ar(24 * KiB), MI355X) == (
        pytest.approx(6.3e-6),
        "vLLM custom all-reduce (ROCm), one-shot at 24 KiB × 8: 6.3 µs published at 24 KiB",
    )
    t, why = achieved(ar(192 * KiB), MI355X)
    assert t == pytest.approx(10.0e-6) and ", two-shot at " in why
    assert "mi355x's figure" in achieved(ar(192 * KiB), load_hardware("mi350x"))[1]


def test_scale_out_at_the_nics_achieved_bandwidth() -> None:
    # nccl-tests#267 (NVIDIA): a 400 Gb/s NDR NIC achieves up to 48-49 GB/s. A dp pair
    # of ranks 8 apart is one rank a node: all-reduce 2·1/2·S at 48 GB/s + 2 × 2 µs
    op = ar(64 * MiB, group=2, stride=8)
    t, why = achieved(op, H100)
    assert t == pytest.approx(64 * MiB / 48e9 + 2 * 2e-6, rel=1e-12)
    assert why == "a 400 Gb/s NIC at 48 GB/s; the link model's per-step latency"
    assert est(op, H100).time_s == t > collective_time(op, H100)


def test_no_published_figure_is_the_link_model() -> None:
    op = CollectiveOp("all_gather", 2**20, 8)
    for hw in (B200, A100):  # no B200 ring busbw; no A100 figures at all
        t, why = achieved(op, hw)
        assert t == ring_time(op, hw)  # the ring at link peak: 1 MiB·7/8 + 7 steps × 1 µs
        assert t == pytest.approx(2**21 * 7 / 8 / (hw.scaleup_bandwidth / 2) + 7e-6)
        assert why == "no published all_gather figure: the link model"


def test_an_unknown_engine_is_a_clear_error() -> None:
    with pytest.raises(SpecError, match="unknown engine `vlm`") as err:
        achieved(ar(1 * MiB), H100, "vlm")
    assert err.value.hint == "did you mean `vllm`?"


PARTS = [load_hardware(name) for name in shipped_hardware()]


@settings(max_examples=300, deadline=None)
@given(
    hw=st.sampled_from(PARTS),
    kind=st.sampled_from(["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "p2p"]),
    group=st.sampled_from([1, 2, 4, 6, 8, 16, 32, 72, 144]),
    stride=st.sampled_from([1, 2, 8]),
    elements=st.integers(1, 2**31),
    engine=st.sampled_from(ENGINES),
)
def test_never_below_the_bound(hw, kind, group, stride, elements, engine) -> None:
    # every shipped part, collective, group and size: the estimate is at least the bound
    op = CollectiveOp(kind, elements, group, stride=stride)
    roof = collective_time(op, hw)
    t, why = achieved(op, hw, engine)
    assert math.isfinite(t) and t >= 0 and why
    assert est(op, hw).time_s >= roof


def test_h100_all_reduce_past_the_custom_kernels_as_nccl_tests_measured_it() -> None:
    # nccl-tests on one 8×H100 node, NCCL 2.24.3 (user, vpbenchmarking, out-of-place):
    # 4 MiB 55.70 µs, 8 MiB 84.47 µs. vLLM's custom all-reduce table ends at 1 MiB (sglang
    # PR #2904), so 4 MiB is NCCL's; the H200 (same NVLink 4 family) takes the figure too
    t, why = achieved(ar(4 * MiB), H100)
    assert t == pytest.approx(55.70e-6)
    assert why == "NCCL/RCCL all-reduce at 4 MiB × 8 as measured: 55.7 µs published at 4 MiB"
    assert achieved(ar(4 * MiB), H200) == (t, why + ", h100's figure")
    # at 1 MiB vLLM's own kernel still takes it (45.0 µs, its published figure)
    assert achieved(ar(1 * MiB), H100)[0] == pytest.approx(45.0e-6)
    # without an engine (a training step) below 1 MiB: NCCL's NVLS busbw model, not the table
    assert "NVLS" in achieved(ar(256 * KiB), H100, engine=None)[1]
