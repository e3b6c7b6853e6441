"""The collective bound (modelcost/targets/network.py): the fastest algorithm the hardware
supports, so that no published collective beats it. Every figure in
specs/kernels/collectives.json and every other published figure found (each row says
where it comes from) is at or above its bound; the bound's closed forms by hand; the
`in_switch_reduction` field of a hardware file."""

import json
from pathlib import Path

import pytest
from conftest import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from modelcost.base.resources import specs_dir
from modelcost.perfmodel import CollectiveOp
from modelcost.targets.hardware import (
    IN_SWITCH_REDUCTIONS,
    load_hardware,
    parse_hardware,
    shipped_hardware,
)
from modelcost.targets.network import algorithms, bound, collective_time, ring_time

KiB, MiB, GiB = 2**10, 2**20, 2**30
H100, MI300X = load_hardware("h100"), load_hardware("mi300x")
PARTS = {name: load_hardware(name) for name in shipped_hardware()}
COLLECTIVES = json.loads((specs_dir() / "kernels" / "collectives.json").read_text())
# nccl-tests' bus-bandwidth factors (doc/PERFORMANCE.md): busbw = algbw × factor
BUSBW_FACTOR = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
}


def op_of(kind: str, nbytes: int, group: int, stride: int = 1) -> CollectiveOp:
    """A collective of `nbytes` bf16 bytes."""
    return CollectiveOp(kind, nbytes // 2, group, stride=stride)


def busbw_time(kind: str, nbytes: int, group: int, gbps: float) -> float:
    """Seconds a collective takes at a published bus bandwidth (nccl-tests' definition)."""
    return BUSBW_FACTOR[kind](group) * nbytes / (gbps * 1e9)


def published_in_the_catalog() -> list[tuple[str, str, int, int, float, str]]:
    """(part, kind, bytes, group, seconds, what) for every figure collectives.json holds,
    on every part of its family (the estimate applies a family's figure to each)."""
    rows = []
    big = 4 * GiB  # a peak busbw is reached at large sizes: nccl-tests runs to 4 GiB
    for fam_name, fam in COLLECTIVES["families"].items():
        for part in fam["parts"]:
            busbw = fam["busbw"]
            if "all_reduce_nvls" in busbw:
                fig = busbw["all_reduce_nvls"]
                n = fig["ranks"]
                t = busbw_time("all_reduce", big, n, fig["gbps"])
                rows.append((part, "all_reduce", big, n, t, f"{fam_name} NVLS busbw"))
            if "ring" in busbw:
                for kind in busbw["ring"]["kinds"]:
                    t = busbw_time(kind, big, 8, busbw["ring"]["gbps"])
                    rows.append((part, kind, big, 8, t, f"{fam_name} ring busbw"))
            if "ring_per_peer_link" in busbw:
                fig = busbw["ring_per_peer_link"]
                for kind in fig["kinds"]:
                    for n in (2, 4, 8):  # (n − 1) links × the usable per-link rate
                        t = busbw_time(kind, big, n, (n - 1) * fig["gbps"])
                        rows.append((part, kind, big, n, t, f"{fam_name} per-link busbw"))
            measured = fam.get("all_reduce_measured")
            for nbytes, us in measured["latency_us"] if measured else ():
                what = f"{fam_name} measured all-reduce"
                rows.append((part, "all_reduce", nbytes, measured["ranks"], us * 1e-6, what))
            for engine, table in fam["custom_all_reduce"].items():
                for group, points in table.get("latency_us", {}).items():
                    for nbytes, us in points:
                        what = f"{fam_name} {engine} custom all-reduce"
                        rows.append((part, "all_reduce", nbytes, int(group), us * 1e-6, what))
    return rows


CATALOG = published_in_the_catalog()


def test_the_catalog_rows_cover_every_figure() -> None:
    # NVLink 4 (H100, H200): NVLS, ring × 4 kinds, vLLM's 3 groups × 6 points,
    # TensorRT-LLM's 6 (SGLang runs vLLM's: no table of its own)
    # and nccl-tests' 10 all-reduce sizes; NVLink 5 (B200, GB200): NVLS; xGMI 3 (MI300X,
    # MI325X): 4 kinds × 3 groups and rccl-tests' 10 all-reduce sizes; MI350X/MI355X:
    # vLLM's 7 points
    assert len(CATALOG) == 2 * (1 + 4 + 3 * 6 + 6 + 10) + 2 * 1 + 2 * (4 * 3 + 10) + 2 * 7


@pytest.mark.parametrize(("part", "kind", "nbytes", "group", "seconds", "what"), CATALOG)
def test_every_figure_in_the_catalog_is_at_or_above_its_bound(
    part: str, kind: str, nbytes: int, group: int, seconds: float, what: str
) -> None:
    assert seconds >= collective_time(op_of(kind, nbytes, group), PARTS[part]), what


# Published figures beyond the catalog (docs/conventions.md, "Collectives on the links"):
# (part, kind, bytes, group, stride, seconds, source)
ELSEWHERE = [
    # the smallest whole-call latencies found: TensorRT-LLM one-shot, 512 B at TP2 (sglang
    # PR #2904, 'custom allreduce' table); NCCL NVLS on 2×H100, 128 B (nccl#1259); NCCL on
    # 4 GB200 GPUs ≤ 1 KB, best 5.18 µs (NVIDIA staff, nccl-tests#333)
    ("h100", "all_reduce", 512, 2, 1, 3.7e-6, "sglang PR #2904"),
    ("h100", "all_reduce", 128, 2, 1, 5.56e-6, "nccl#1259"),
    ("gb200", "all_reduce", 1 * KiB, 4, 1, 5.18e-6, "nccl-tests#333"),
    # vLLM PR #24532, H100 TP4 bf16: 0.5 MB 1-stage custom all-reduce 10 µs, NCCL
    # symmetric memory 17 µs; 4 MB symmetric memory 28 µs
    ("h100", "all_reduce", 512 * KiB, 4, 1, 10e-6, "vllm PR #24532"),
    ("h100", "all_reduce", 512 * KiB, 4, 1, 17e-6, "vllm PR #24532"),
    ("h100", "all_reduce", 4 * MiB, 4, 1, 28e-6, "vllm PR #24532"),
    # vLLM PR #39080's tuned kernel on MI355X TP8: 24 KB 7.0, 192 KB 9.6, 768 KB 12.9 µs
    ("mi355x", "all_reduce", 24 * KiB, 8, 1, 7.0e-6, "vllm PR #39080"),
    ("mi355x", "all_reduce", 192 * KiB, 8, 1, 9.6e-6, "vllm PR #39080"),
    ("mi355x", "all_reduce", 768 * KiB, 8, 1, 12.9e-6, "vllm PR #39080"),
    # ROCm/aiter PR #801, MI300-class TP2 fp16: custom all-reduce 4 KB 7.1, 1 MB 28.2, 2 MB
    # 49.7, 16 MB 356 µs; QuickReduce INT4 (quantized: fewer bytes on the wire) 1 MB
    # 23.1, 16 MB 132 µs (sizes taken as MiB: the larger, the stricter)
    ("mi300x", "all_reduce", 4 * KiB, 2, 1, 7.1e-6, "ROCm/aiter PR #801"),
    ("mi300x", "all_reduce", 1 * MiB, 2, 1, 28.2e-6, "ROCm/aiter PR #801"),
    ("mi300x", "all_reduce", 2 * MiB, 2, 1, 49.7e-6, "ROCm/aiter PR #801"),
    ("mi300x", "all_reduce", 16 * MiB, 2, 1, 356e-6, "ROCm/aiter PR #801"),
    ("mi300x", "all_reduce", 1 * MiB, 2, 1, 23.1e-6, "ROCm/aiter PR #801"),
    ("mi300x", "all_reduce", 16 * MiB, 2, 1, 132e-6, "ROCm/aiter PR #801"),
    # NVLS on 5, 6, 7 of 8 H100s: 420, 440, 460 GB/s busbw at 2–4 GB (nccl#1455)
    ("h100", "all_reduce", 4 * GiB, 5, 1, 2 * 4 / 5 * 4 * GiB / 420e9, "nccl#1455"),
    ("h100", "all_reduce", 4 * GiB, 6, 1, 2 * 5 / 6 * 4 * GiB / 440e9, "nccl#1455"),
    ("h100", "all_reduce", 4 * GiB, 7, 1, 2 * 6 / 7 * 4 * GiB / 460e9, "nccl#1455"),
    # a GB200 NVL72 rack, 72 ranks: 4 GiB all-reduce in 10,094 µs (coreweave/nccl-tests
    # PR #43, 839 GB/s busbw)
    ("gb200", "all_reduce", 4 * GiB, 72, 1, 10094e-6, "coreweave/nccl-tests PR #43"),
    # across nodes, 8 GPUs and 8×400G NICs each: 2 nodes ~470 GB/s busbw, 4 nodes 365.8
    # (user, nccl-tests#309), at 8 GiB
    ("h100", "all_reduce", 8 * GiB, 16, 1, 2 * 15 / 16 * 8 * GiB / 470e9, "nccl-tests#309"),
    ("h100", "all_reduce", 8 * GiB, 32, 1, 2 * 31 / 32 * 8 * GiB / 365.8e9, "nccl-tests#309"),
    # one 400 Gb/s NIC at its achieved 48 GB/s (NVIDIA staff, nccl-tests#267): a pipeline
    # stage's send of 1 GiB to the next node
    ("h100", "p2p", 1 * GiB, 2, 8, 1 * GiB / 48e9, "nccl-tests#267"),
]


@pytest.mark.parametrize(
    ("part", "kind", "nbytes", "group", "stride", "seconds", "source"), ELSEWHERE
)
def test_every_other_published_figure_is_at_or_above_its_bound(
    part: str, kind: str, nbytes: int, group: int, stride: int, seconds: float, source: str
) -> None:
    assert seconds >= collective_time(op_of(kind, nbytes, group, stride), PARTS[part]), source


def test_the_figures_the_ring_bound_was_beaten_by() -> None:
    # issue 21: TensorRT-LLM's 5.9 µs at 512 B TP8 (sglang PR #2904) against the ring's
    # 14 steps × 1 µs + 512·2·7/8 B / 450 GB/s = 14.002 µs; now a one-shot, 1 µs + 7·512 B
    # / 450 GB/s = 1.008 µs
    small = op_of("all_reduce", 512, 8)
    assert ring_time(small, H100) == pytest.approx(14e-6 + 512 * 1.75 / 450e9)
    assert bound(small, H100) == (pytest.approx(1e-6 + 7 * 512 / 450e9), "one-shot")
    assert collective_time(small, H100) <= 5.9e-6
    # NVLS at 480 GB/s busbw (nccl-tests#212): 1 GiB in 2³⁰·1.75/480e9 = 3.91 ms, under
    # the ring's 2³⁰·1.75/450e9 + 14 µs = 4.19 ms; in the switch, 2³⁰/450e9 + 2 µs = 2.39 ms
    big = op_of("all_reduce", GiB, 8)
    assert ring_time(big, H100) > GiB * 1.75 / 480e9 > collective_time(big, H100)
    assert bound(big, H100) == (pytest.approx(GiB / 450e9 + 2e-6), "in-switch")


def test_the_per_step_latency_is_below_every_published_call() -> None:
    # the bound's per-step latency (1 µs, scale-up) is an assumption; the evidence that it
    # is low enough: the smallest whole call published is 3.7 µs (TensorRT-LLM one-shot,
    # 512 B at TP2 on H100, sglang PR #2904), above 2 steps × 1 µs, the most any
    # small-message bound counts (one-shot 1 step; two-shot and in-switch 2)
    calls = [s for *_, s, _ in ELSEWHERE] + [s for *_, s, _ in CATALOG]
    assert min(calls) == 3.7e-6
    for hw in PARTS.values():
        assert 2 * hw.scaleup_latency <= 3.7e-6, hw.name


@pytest.mark.parametrize(
    ("kind", "n", "in_switch", "expected"),
    [
        ("all_reduce", 1, False, (("none", 0.0, 0),)),
        ("all_reduce", 8, False, (("two-shot", 1.75, 2), ("one-shot", 7.0, 1))),
        (
            "all_reduce",
            8,
            True,
            (("two-shot", 1.75, 2), ("one-shot", 7.0, 1), ("in-switch", 1.0, 2)),
        ),
        ("all_gather", 4, True, (("direct", 0.75, 1),)),  # NVLS does not lower its bytes
        ("reduce_scatter", 4, False, (("direct", 0.75, 1),)),
        ("all_to_all", 8, False, (("direct", 0.875, 1),)),
        ("p2p", 2, False, (("send", 1.0, 1),)),
    ],
)
def test_the_algorithms_by_hand(kind, n, in_switch, expected) -> None:
    # bytes each rank moves per direction per byte of S, and steps (network.py docstring)
    assert algorithms(kind, n, in_switch) == expected


def test_a_phased_all_reduce_has_no_one_shot() -> None:
    # inside a hierarchical all-reduce each rank must end with a shard to send across
    assert [a[0] for a in algorithms("all_reduce", 8, True, phased=True)] == [
        "two-shot",
        "in-switch",
    ]


def test_the_bound_on_a_mesh_and_without_in_switch_reduction() -> None:
    # MI300X: a full xGMI mesh at 448 GB/s per direction, no switch. 64 MiB all-reduce
    # over 8: two-shot 2·7/8·64 MiB / 448e9 + 2 µs (one-shot moves 7 × 64 MiB)
    op = op_of("all_reduce", 64 * MiB, 8)
    assert bound(op, MI300X) == (pytest.approx(1.75 * 64 * MiB / 448e9 + 2e-6), "two-shot")
    # the crossover: one-shot wins while 7·S/448e9 + 1 µs < 1.75·S/448e9 + 2 µs, i.e.
    # S < 448e9 × 1e-6 / 5.25 = 85,333 B
    assert bound(op_of("all_reduce", 85_332, 8), MI300X)[1] == "one-shot"
    assert bound(op_of("all_reduce", 85_336, 8), MI300X)[1] == "two-shot"
    # all-to-all of 64 MiB: directly, 7/8 of it in 1 step
    a2a = op_of("all_to_all", 64 * MiB, 8)
    assert bound(a2a, MI300X) == (pytest.approx(0.875 * 64 * MiB / 448e9 + 1e-6), "direct")


def test_hierarchical_all_to_all_moves_over_both_links_at_once() -> None:
    # 16 ranks over 2 H100 boards: 8/16 of S across (50 GB/s, 2 µs) while 7/16 of S
    # moves inside (450 GB/s, 1 µs): the slower of the two
    op = op_of("all_to_all", 1 * GiB, 16)
    across = 8 / 16 * GiB / 50e9 + 2e-6
    assert bound(op, H100) == (pytest.approx(across), "direct")


SETTINGS = settings(max_examples=300, deadline=None)


@SETTINGS
@given(
    hw=st.sampled_from(list(PARTS.values())),
    kind=st.sampled_from(["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "p2p"]),
    group=st.sampled_from([1, 2, 3, 4, 6, 8, 16, 32, 72, 144]),
    stride=st.sampled_from([1, 2, 8]),
    elements=st.integers(1, 2**32),
)
def test_the_bound_is_never_above_the_ring_and_grows_with_size(
    hw, kind, group, stride, elements
) -> None:
    # every shipped part, collective, group, stride and size: the ring NCCL runs is one
    # of the ways to do it, so the bound is at most the ring at the same link peaks
    op = CollectiveOp(kind, elements, group, stride=stride)
    t, name = bound(op, hw)
    assert 0 <= t <= ring_time(op, hw) * (1 + 1e-12)
    assert (t == 0) == (group == 1) and name
    bigger = CollectiveOp(kind, elements + 1, group, stride=stride)
    assert collective_time(bigger, hw) >= t


# ---- the hardware file's `in_switch_reduction`

BASE = (
    'hardware x {{\n  title = "X"\n  vendor = "V"\n  arch = "a"\n  memory = 80 GB\n'
    "  memory_bandwidth = 1 TB/s\n  scaleup_bandwidth = 900 GB/s\n{extra}"
    "  compute_units = 1\n  clock = 1 GHz\n"
    "  matrix {{ bf16 = 1 TFLOPS }}\n  vector {{ fp32 = 1 TFLOPS }}\n}}\n"
)


def test_the_shipped_parts_declare_in_switch_reduction() -> None:
    # NVLink SHARP on NVSwitch 3+ (H100/H200 HGX, B200 HGX, GB200 NVL72); not on A100's
    # NVSwitch 2 nor on the AMD parts' xGMI mesh (sources in each .hw file)
    nvls = {n for n, hw in PARTS.items() if hw.in_switch_reduction == "nvls"}
    assert nvls == {"h100", "h200", "b200", "gb200"}
    for name in PARTS:
        text = (specs_dir() / "hardware" / f"{name}.hw").read_text()
        line = next(x for x in text.splitlines() if "in_switch_reduction" in x)
        assert "#" in line and any(w in line for w in ("github.com", "nvidia.com", "amd.com")), name


def test_a_file_without_the_field_has_no_in_switch_reduction() -> None:
    hw = parse_hardware(BASE.format(extra=""))
    assert hw.in_switch_reduction == "none"
    op = op_of("all_reduce", GiB, 8)  # 450 GB/s per direction: two-shot, 2·7/8·S + 2 µs
    assert bound(op, hw) == (pytest.approx(1.75 * GiB / 450e9 + 2e-6), "two-shot")
    nvls = parse_hardware(BASE.format(extra='  in_switch_reduction = "nvls"\n'))
    assert bound(op, nvls) == (pytest.approx(GiB / 450e9 + 2e-6), "in-switch")
    assert IN_SWITCH_REDUCTIONS == ("none", "nvls")


@pytest.mark.parametrize(
    ("value", "message", "hint"),
    [
        (
            '"nvsl"',
            '`in_switch_reduction` must be "none" or "nvls", got "nvsl"',
            "did you mean `nvls`?",
        ),
        (
            '"sharp"',
            '`in_switch_reduction` must be "none" or "nvls", got "sharp"',
            '"nvls" where the scale-up switch reduces (NVLink SHARP), else "none"',
        ),
        ("2 us", '`in_switch_reduction` needs a "string"', None),
    ],
)
def test_a_bad_in_switch_reduction_is_a_positioned_error(
    tmp_path: Path, value: str, message: str, hint: str | None
) -> None:
    bad = tmp_path / "bad.hw"
    bad.write_text(BASE.format(extra=f"  in_switch_reduction = {value}\n"))
    r = run_cli("check", str(bad))
    assert (r.returncode, r.stdout) == (2, "")
    # line 8, the value after `  in_switch_reduction = ` (column 25)
    assert r.stderr.startswith(f"{bad}:8:25: error: {message}\n"), r.stderr
    assert "Traceback" not in r.stderr
    if hint:
        assert f"hint: {hint}" in r.stderr
