"""Hardware files: the shipped targets' figures, and positioned errors for bad files."""

import json
import os
from decimal import Decimal
from pathlib import Path

import pytest
from conftest import FIXTURES, run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from modelcost import SpecError
from modelcost.targets.hardware import Hardware, load_hardware, parse_hardware, shipped_hardware

INVALID = sorted((FIXTURES / "invalid_hw").glob("*.hw"))


def test_every_target_the_issue_names_is_shipped() -> None:
    assert shipped_hardware() == [
        "a100", "b200", "gb200", "h100", "h200", "mi300x", "mi325x", "mi350x", "mi355x",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "arch", "bf16", "fp8", "tbps", "gb"),
    [
        # dense datasheet peaks (TFLOPS), HBM TB/s and GB, from ../shared hardware.json
        ("mi300x", "gfx942", 1307.4, 2614.9, 5.3, 192),
        ("mi325x", "gfx942", 1307.4, 2614.9, 6.0, 256),
        ("mi350x", "gfx950", 2306.9, 4613.7, 8.0, 288),
        ("mi355x", "gfx950", 2516.6, 5033.2, 8.0, 288),
        ("h100", "sm90", 989.4, 1978.9, 3.35, 80),
        ("h200", "sm90", 989.4, 1978.9, 4.8, 141),
        ("b200", "sm100", 2250, 4500, 8.0, 180),
        ("gb200", "sm100", 2500, 5000, 8.0, 186),
        ("a100", "sm80", 312, 312, 2.039, 80),  # no fp8: runs at bf16
    ],
)
def test_shipped_figures(name, arch, bf16, fp8, tbps, gb) -> None:
    h = load_hardware(name)
    assert h.arch == arch
    assert h.peak("matrix", "bf16")[0] == bf16 * 1e12
    assert h.peak("matrix", "fp8")[0] == fp8 * 1e12
    assert h.memory_bandwidth == float(Decimal(str(tbps)) * 10**12)  # exact, as written
    assert h.memory == gb * 2**30  # a vendor's HBM "GB" are GiB (next test)


def test_published_achievable_peaks() -> None:
    mi300 = load_hardware("mi300x")
    # MAMF on ROCm 6.2 (781.9 bf16); AMD's "Measuring Max-Achievable FLOPs" blog, footnote
    # 4 (654 fp16; 1223.6 fp8 at 1273 MHz, the clock its table prints as the figure)
    assert mi300.achievable.matrix == {"bf16": 781.9e12, "fp16": 654e12, "fp8": 1223.6e12}
    assert load_hardware("mi355x").achievable.matrix["fp4"] == 5843e12  # gluon a4w4 v1 kernel
    assert mi300.scaleup_per_direction == 448e9  # 7 links × 128 GB/s, halved


def test_a_users_own_file(tmp_path: Path) -> None:
    mine = tmp_path / "mine.hw"
    mine.write_text(
        'hardware mine {\n  title = "Mine"\n  vendor = "Acme"\n  arch = "x1"\n'
        "  memory = 64 GiB\n  memory_bandwidth = 1_000 GB/s\n  scaleup_bandwidth = 100 GB/s\n"
        "  compute_units = 10\n  clock = 1.5 GHz\n  matrix { bf16 = 0.5 PFLOPS }\n"
        "  vector { fp32 = 20 TFLOPS }\n}\n"
    )
    h = load_hardware(str(mine))
    assert (h.memory, h.memory_bandwidth, h.clock) == (64 * 2**30, 1e12, 1.5e9)
    # no `memory_reported`: fit checks use `memory`, and say so
    assert (h.memory_reported, h.capacity, h.capacity_basis) == (None, 64 * 2**30, "datasheet")
    assert h.peak("matrix", "bf16") == (5e14, "bf16", "datasheet")
    assert h.peak("vector", "bf16") == (20e12, "fp32", "datasheet")  # no bf16 vector rate
    assert_as_validated(h)


MIB = 2**20
# The memory total each driver reports (nvidia-smi "FB Memory Usage Total", MiB; rocm-smi
# "VRAM Total Memory", bytes), as specs/hardware/*.hw give it with its source
# (`memory_source`); the capacity every fit check uses.
DRIVER_TOTALS = [
    ("a100", 81920 * MIB),  # modal-labs/modal-client PR #2797 (nvidia-smi totals)
    ("h100", 81559 * MIB),  # the same PR
    ("h200", 143771 * MIB),  # published nvidia-smi output of 8x H200 nodes (issue 21)
    ("b200", 183359 * MIB),  # NVIDIA/TensorRT-LLM issue #10278
    ("gb200", 189471 * MIB),  # published nvidia-smi output of GB200 NVL72 trays
    ("mi300x", 206141652992),  # rocm-smi, ROCm/legacy-rocm-build issue #4750
    ("mi350x", 309220868096),  # HIP totalGlobalMem in published MI350X traces
    ("mi355x", 309220868096),  # rocm-smi --showmeminfo vram, published MI355X output
]


@pytest.mark.parametrize(("name", "total"), DRIVER_TOTALS)
def test_capacity_is_the_total_the_driver_reports(name: str, total: int) -> None:
    h = load_hardware(name)
    assert (h.memory_reported, h.capacity, h.capacity_basis) == (total, total, "driver-reported")
    assert h.memory_source  # every driver figure says where it was published


def test_a_part_without_a_published_driver_total_keeps_its_datasheet_figure() -> None:
    # no published rocm-smi/amd-smi total for MI325X: its datasheet 256 GB (GiB, as ROCm's
    # spec table writes it), flagged as such
    assert {n for n, _ in DRIVER_TOTALS} | {"mi325x"} == set(shipped_hardware())
    h = load_hardware("mi325x")
    assert (h.memory_reported, h.capacity, h.capacity_basis) == (None, 256 * 2**30, "datasheet")


@pytest.mark.parametrize(("name", "total"), DRIVER_TOTALS)
def test_a_datasheet_gb_is_a_gib(name: str, total: int) -> None:
    # each driver total lies within 1 % under the datasheet figure read as GiB (H100:
    # 81,559 MiB of 80 GiB), and above it read as 10**9 bytes (80e9 < 81,559 MiB): a
    # vendor's HBM "GB" count 2**30 bytes, so reports say memory held in GiB (issue 38, 8)
    h = load_hardware(name)
    assert 0.99 * h.memory <= total <= h.memory
    assert total > h.memory / 2**30 * 1e9


@settings(max_examples=60, deadline=None)
@given(
    number=st.integers(min_value=1, max_value=10**7),
    unit=st.sampled_from(["KiB", "MiB", "GiB", "TiB", "MB", "GB", "TB"]),
)
def test_memory_reported_takes_binary_and_decimal_sizes(number: int, unit: str) -> None:
    text = (
        'hardware x {\n  title = "X"\n  vendor = "V"\n  arch = "a"\n  memory = 80 GB\n'
        f"  memory_reported = {number} {unit}\n"
        '  memory_source = "nvidia-smi"\n  memory_bandwidth = 1 TB/s\n'
        "  scaleup_bandwidth = 1 GB/s\n  compute_units = 1\n  clock = 1 GHz\n"
        "  matrix { bf16 = 1 TFLOPS }\n  vector { fp32 = 1 TFLOPS }\n}\n"
    )
    h = parse_hardware(text)
    # the scale of each unit: binary (2**10 per step) or decimal (1000 per step)
    scale = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "MB": 10**6,
             "GB": 10**9, "TB": 10**12}[unit]  # fmt: skip
    assert h.capacity == float(number * scale) and h.memory == 80e9
    assert (h.capacity_basis, h.memory_source) == ("driver-reported", "nvidia-smi")


def assert_as_validated(h: Hardware) -> None:
    """The reader builds Hardware without a second validation (Frozen.trusted): validating
    it changes nothing, not even an int where the schema says float."""
    text = h.model_dump_json()
    assert Hardware.model_validate_json(text).model_dump_json() == text
    assert Hardware.model_validate(h.model_dump()) == h


@pytest.mark.parametrize("name", shipped_hardware())
def test_shipped_targets_are_what_validation_would_make(name: str) -> None:
    assert_as_validated(load_hardware(name))


def test_unknown_name_has_a_hint() -> None:
    with pytest.raises(SpecError) as info:
        load_hardware("mi300")
    assert info.value.message == "unknown hardware `mi300`"
    assert info.value.hint == "did you mean `mi300x`?"


@pytest.mark.parametrize("path", INVALID, ids=[p.stem for p in INVALID])
def test_invalid_hardware_file(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(path.parent)
    expected = path.read_text().splitlines()[0].removeprefix("# error: ")
    with pytest.raises(SpecError) as info:
        load_hardware(path.name)
    err = info.value
    assert f"{os.path.normpath(err.filename)}:{err.line}:{err.column}: {err.message}" == expected


def test_a_model_file_given_as_hardware() -> None:
    with pytest.raises(SpecError) as info:
        load_hardware(str(FIXTURES.parent.parent / "specs" / "models" / "gpt2.model"))
    err = info.value
    assert (err.line, err.column, err.message) == (8, 1, "unexpected name `model`")
    assert err.hint == "expected `hardware`"


# ---- the achievable roof is an upper bound on every published figure (issue 8, item 5)

MEASURED = json.loads((Path(__file__).parent / "data" / "measured-peaks.json").read_text())


def _si(tera: float) -> float:
    """A published tera-figure in SI units, exact as a hardware file reads it."""
    return float(Decimal(str(tera)) * 10**12)


def _bounds(point: dict) -> list[str]:
    """The shipped parts whose roof a published point bounds: its target and the parts
    of the same compute silicon at the same peaks (`same_compute`: the H800 and GH200
    carry the H100's GH100 compute, as the H200 does)."""
    return [point["target"], *point.get("same_compute", ())]


def _gemm_points() -> list[tuple[str, dict]]:
    return [(part, p) for p in MEASURED["gemm"] for part in _bounds(p)]


def _catalog_points() -> list[tuple[str, str, float]]:
    """(part, precision, TFLOPS) of every figure the Gluon catalog cites."""
    from modelcost.estimate.kernels import catalog

    return [(k.measured_on, k.measured_precision, k.tflops) for k in catalog() if k.tflops]


@pytest.mark.parametrize(
    "part,point", _gemm_points(), ids=lambda x: str(x) if isinstance(x, str) else f"gemm-{x['id']}"
)
def test_no_published_gemm_beats_the_achievable_roof(part: str, point: dict) -> None:
    peak, _, _ = load_hardware(part).peak("matrix", point["precision"], "achievable")
    assert _si(point["tflops"]) <= peak, point["source"]


@pytest.mark.parametrize("point", MEASURED["bandwidth"], ids=lambda p: f"hbm-{p['id']}")
def test_no_published_bandwidth_beats_the_achievable_roof(point: dict) -> None:
    assert _si(point["tbps"]) <= load_hardware(point["target"]).bandwidth("achievable")


@pytest.mark.parametrize("name", sorted(shipped_hardware()))
def test_each_achievable_figure_is_its_parts_best_published_measurement(name: str) -> None:
    # the rule of every .hw file's achievable section (issue 32, item 4): each figure is
    # the best published measurement of its part (or of the same compute silicon at the
    # same peaks) at its precision, so no published kernel beats the roof, and the roof
    # is a figure someone measured, each with its source in the .hw comment. E.g. H100
    # bf16 855 (ThunderKittens) over cuBLAS's 794.5 (MAMF); H100/H200 fp8 1550 (DeepGEMM
    # on H800); MI300X bf16 781.9 (MAMF, ROCm 6.2) over hipBLASLt's 708; MI300X fp8
    # 1223.6 (the ROCm blog's footnote 4, where its table prints the 1273 MHz clock);
    # MI325X fp8 1527.7 (the same footnote); MI355X fp6 3122.13 (HipKittens, 16384^3)
    hw = load_hardware(name)
    found: dict[str, float] = {}
    for part, p in _gemm_points():
        if part == name:
            found[p["precision"]] = max(found.get(p["precision"], 0.0), p["tflops"])
    for part, precision, tflops in _catalog_points():
        if part == name:
            found[precision] = max(found.get(precision, 0.0), tflops)
    assert {k: v / 1e12 for k, v in hw.achievable.matrix.items()} == pytest.approx(
        {k: found[k] for k in hw.achievable.matrix if k in found}
    )
    assert set(hw.achievable.matrix) <= set(found), "an achievable figure with no point"
    if hw.achievable.memory_bandwidth is not None:
        best = max(p["tbps"] for p in MEASURED["bandwidth"] if p["target"] == name)
        assert hw.achievable.memory_bandwidth == pytest.approx(best * 1e12)


def test_the_roofs_raised_for_issue_32_item_4() -> None:
    # the figures as published (tests/data/measured-peaks.json, each point's source)
    assert load_hardware("h100").achievable.matrix == {"bf16": 855e12, "fp8": 1550e12}
    assert load_hardware("h200").achievable.matrix == {"fp8": 1550e12}
    mi300x = load_hardware("mi300x").achievable
    assert mi300x.matrix == {"bf16": 781.9e12, "fp16": 654e12, "fp8": 1223.6e12}
    assert mi300x.memory_bandwidth == 4.28e12
    assert load_hardware("mi325x").achievable.matrix["fp8"] == 1527.7e12
    mi355x = load_hardware("mi355x").achievable.matrix
    assert (mi355x["bf16"], mi355x["fp6"]) == (1610.49e12, 3122.13e12)


def test_no_kernel_in_the_catalog_beats_its_parts_achievable_roof() -> None:
    from modelcost.estimate.kernels import catalog

    measured = [k for k in catalog() if k.tflops is not None]
    assert len(measured) == 7
    for k in measured:
        hw = load_hardware(k.measured_on)
        assert hw.arch == k.arch
        peak, _, _ = hw.peak("matrix", k.measured_precision, "achievable")
        assert k.tflops * 1e12 <= peak, k.id
    # the figures the catalog cites are the MI355X's achievable roof (issue 8, item 5)
    mi355x = load_hardware("mi355x")
    assert mi355x.achievable.matrix["fp16"] >= 1587e12
    assert mi355x.achievable.matrix["fp8"] == 3527e12
    assert mi355x.achievable.matrix["fp4"] == 5843e12


def test_achievable_bandwidth_is_the_best_stream_kernel() -> None:
    # Azure ND H100 v5 / ND H200 v5 BabelStream-style dot, not triad (2.97 / 4.15)
    assert load_hardware("h100").bandwidth("achievable") == 3.18e12
    assert load_hardware("h200").bandwidth("achievable") == 4.48e12


# ---- the capacity as the driver reports it, on the command line (issue 21)


def test_hw_show_gives_the_capacity_its_basis_and_its_source() -> None:
    r = run_cli("hw", "show", "h200")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    # 143771 MiB = 140.4 GiB, as nvidia-smi reports an H200 (specs/hardware/h200.hw)
    assert lines[1].startswith("HBM 140.4 GiB (driver-reported; datasheet 141 GiB) at 4.8 TB/s")
    assert lines[-1].startswith("memory: nvidia-smi FB total 143771 MiB, H200 SXM")
    datasheet = run_cli("hw", "show", "mi325x").stdout.splitlines()[1]
    assert datasheet.startswith("HBM 256.0 GiB (datasheet) at 6 TB/s")


def test_check_rejects_a_source_without_a_driver_figure(tmp_path: Path) -> None:
    bad = tmp_path / "bad.hw"
    bad.write_text('hardware x {\n  memory_source = "nvidia-smi"\n}\n')
    r = run_cli("check", str(bad))
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr.startswith(
        f"{bad}:2:3: error: `memory_source` says where `memory_reported` comes from, but "
        "there is no `memory_reported`"
    )
    assert "hint: add `memory_reported = <total the driver reports>`" in r.stderr


def test_a_report_says_what_its_capacity_rests_on() -> None:
    r = run_cli("compile", "specs/models/llama3-70b.model", "--hw", "h200", "--phase", "decode",
                "--context", "4096")  # fmt: skip
    assert r.returncode == 0 and r.stderr == ""  # no "does not fit" warning (issue 21)
    # 142.4e9 B = 133 GiB of weights and KV cache of 143771 MiB = 140.4 GiB (nvidia-smi)
    assert "memory                     133 GiB of 140 GiB (driver-reported)\n" in r.stdout
    old = run_cli("compile", "specs/models/llama3-70b.model", "--hw", "mi325x")
    assert "GiB of 256 GiB (datasheet)\n" in old.stdout  # no published driver total
