"""Bounded work on hostile sizes (issue 20, items 16 and 17): a request mix's shares and
number of classes, a sweep's grid; each refused up front with a positioned message, fast."""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import pytest
from conftest import MODELS, run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from modelcost import load_spec
from modelcost.analyses.serving_mix import RequestClass, load_mix, serve_mix
from modelcost.analyses.sweeps import LAYOUT_AXES, grid_size, sweep
from modelcost.base.errors import SpecError
from modelcost.base.settings import MAX_MIX_CLASSES, MAX_POINTS, SHARES
from modelcost.cli.values import counts
from modelcost.ir.graph import Parallel, Phase
from modelcost.targets.hardware import load_hardware

GPT2 = load_spec(MODELS / "gpt2.model")
H100 = load_hardware("h100")

# ---- 16. --mix: shares and the number of classes

SHARE_RULE = "SHARE must be a positive number from 1e-09 to 1e+09, got"  # SHARES, as %g


def test_the_share_rule_is_the_constant() -> None:
    assert SHARES == (1e-9, 1e9) and MAX_MIX_CLASSES == 1_000


@pytest.mark.parametrize(
    "share",
    ["1e308", "1e400", "inf", "-inf", "nan", "NaN", "0", "-1", "1e-10", "1.000001e9", "5e-324",
     "x", "0x10"],
)  # fmt: skip
def test_a_share_out_of_range_is_refused_at_its_field(tmp_path: Path, share: str) -> None:
    path = tmp_path / "mix.txt"
    path.write_text(f"128 2048 1\n2048 128 {share}  # the second class\n")
    with pytest.raises(SpecError) as err:
        load_mix(path)
    # line 2, column 10: the third field of `2048 128 SHARE`, underlined to its end
    assert err.value.render() == (
        f"{path}:2:10: error: {SHARE_RULE} {share!r}\n"
        f"  2048 128 {share}  # the second class\n"
        f"           {'^' * len(share)}\n"
        "  hint: a weight such as 0.25 or 3"
    )


def test_the_largest_shares_do_not_overflow(tmp_path: Path) -> None:
    path = tmp_path / "mix.txt"
    path.write_text("128 512 1e9\n512 128 1e9\n256 256 1e-9\n")  # the range's ends
    m = serve_mix(GPT2, H100, load_mix(path))
    # 1e9 / (2e9 + 1e-9) each, and 1e-9 / (2e9 + 1e-9): the third still above zero
    assert m.shares == (1e9 / (2e9 + 1e-9), 1e9 / (2e9 + 1e-9), 1e-9 / (2e9 + 1e-9))
    assert all(s > 0 for s in m.shares) and math.isfinite(m.output_tokens_per_s)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=1, max_size=3))
def test_any_share_is_served_or_refused_naming_its_class(shares: list[float]) -> None:
    # the whole class of floats a share can be: within SHARES served, with normalised
    # shares above zero summing to one; else a SpecError naming the first bad class
    bad = [i for i, s in enumerate(shares) if not SHARES[0] <= s <= SHARES[1]]
    mix = [RequestClass(128, 128, s) for s in shares]
    if bad:
        with pytest.raises(
            SpecError, match=rf"^the request mix: error: class {bad[0]} \(ISL 128, OSL 128\): SHARE"
        ):
            serve_mix(GPT2, H100, mix)
        return
    m = serve_mix(GPT2, H100, mix)
    assert all(w > 0 for w in m.shares) and math.isclose(sum(m.shares), 1.0)
    assert math.isfinite(m.output_tokens_per_s) and m.output_tokens_per_s > 0


def test_an_empty_mix_from_python_is_a_spec_error() -> None:
    with pytest.raises(
        SpecError, match=r"^the request mix: error: a request mix needs at least one request class$"
    ):
        serve_mix(GPT2, H100, [])


def test_too_many_classes_are_refused_at_the_first_one_over(tmp_path: Path) -> None:
    # 90,000 classes ran past 20 s; the one after MAX_MIX_CLASSES is refused at its line,
    # and the lines after it are not read
    path = tmp_path / "mix.txt"
    path.write_text("# isl osl\n" + "128 128\n" * 90_000)
    started = time.perf_counter()
    with pytest.raises(SpecError) as err:
        load_mix(path)
    assert time.perf_counter() - started < 2
    assert err.value.render() == (
        f"{path}:1002:1: error: request class 1,001: a mix takes at most 1,000 (each is a "
        "serving search of its own)\n"
        "  128 128\n"
        "  ^^^^^^^\n"
        "  hint: merge classes of similar lengths, adding their shares"
    )
    many = [RequestClass(128, 128, 1.0)] * (MAX_MIX_CLASSES + 1)
    started = time.perf_counter()
    with pytest.raises(
        SpecError,
        match=r"^the request mix: error: 1,001 request classes: a mix takes at most 1,000 ",
    ):
        serve_mix(GPT2, H100, many)
    assert time.perf_counter() - started < 1  # refused before any class is served
    assert len(load_mix(_write(tmp_path / "full.txt", "128 128\n" * MAX_MIX_CLASSES))) == 1_000


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_the_cli_refuses_a_huge_share_with_exit_2(tmp_path: Path) -> None:
    path = _write(tmp_path / "mix.txt", "128 2048 1e308\n2048 128 1e308\n")
    r = run_cli("serve", str(MODELS / "gpt2.model"), "--hw", "h100", "--mix", str(path))
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith(f"{path}:1:10: error: {SHARE_RULE} '1e308'\n")


def test_the_mix_limits_are_in_the_help() -> None:
    text = " ".join(run_cli("serve", "--help").stdout.split())
    assert "at most 1,000; SHARE a weight from 1e-09 to 1e+09 (default 1)" in text


# ---- 17. a sweep's grid: counted from its axes' lengths before any point is made


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("1..100000+1", 100_000),  # MAX_POINTS values exactly
        ("1,2,1..99999+1", 99_999),  # each once: 1 and 2 are in the range
        ("1..1Mi", 21),  # doubling: 2⁰ … 2²⁰
        ("1..1M", 20),  # 2⁰ … 2¹⁹: 1M is 10⁶, as in a spec
    ],
)
def test_a_sweep_option_takes_up_to_max_points_values(text: str, values: int) -> None:
    assert MAX_POINTS == 100_000 and len(counts(text)) == values


def test_a_sweep_option_past_the_bound_on_a_size_is_refused() -> None:
    # no OverflowError, and no range made: its end is past 2**40 (settings.MAX_SIZE)
    with pytest.raises(argparse.ArgumentTypeError) as err:
        counts("1.." + "9" * 30 + "+1")
    assert str(err.value) == (
        "expected at most 1,099,511,627,776 (2**40, the bound on a size), got "
        "999,999,999,999,999,999,999,999,999,999"
    )


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("1..100001+1", "'1..100001+1'"),
        ("1..999999+1", "'1..999999+1'"),  # refused before it is made
        ("1..50000+1,50001..100001+1", "'1..50000+1,50001..100001+1'"),  # in all
        (",".join(map(str, range(1, 100_002))), "'1,2,3,4,5,6,7,8,9,10,11,12,13,…'"),
    ],
)
def test_a_sweep_option_with_more_values_is_refused(text: str, shown: str) -> None:
    started = time.perf_counter()
    with pytest.raises(argparse.ArgumentTypeError) as err:
        counts(text)
    assert str(err.value) == f"{shown} has over 100,000 values, the most a sweep takes"
    assert time.perf_counter() - started < 0.5


def test_issue_20s_sweep_is_refused_up_front() -> None:
    # ran 74 s to a MemoryError: its --context, which the default prefill phase does not
    # read, is refused, and with decode its 99,999² points are
    started = time.perf_counter()
    base = ("sweep", str(MODELS / "llama3-8b.model"), "--hw", "h100", "--batch", "1..99999+1",
            "--context", "1..99999+1")  # fmt: skip
    r = run_cli(*base)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == (
        "modelcost: error: --context 1,2,3,… applies to decode, and the phases asked for are "
        "prefill\n"
        "  hint: add decode to --phase, or leave --context out\n"
    )
    r = run_cli(*base, "--phase", "decode")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("modelcost: error: the sweep has 9,999,800,001 points, over "
                               "the 100,000 a sweep takes")  # fmt: skip
    assert time.perf_counter() - started < 40  # two interpreters' starts on a busy machine


def test_a_grid_over_the_limit_is_refused_naming_its_axes() -> None:
    # 2 targets × (decode: 5,000 batches × 5,000 contexts + prefill: 5,000 × 1 seq)
    # = 2 × 25,005,000 = 50,010,000 points
    r = run_cli("sweep", str(MODELS / "llama3-8b.model"), "--hw", "h100,h200", "--phase",
                "decode,prefill", "--batch", "1..5000+1", "--context", "1..5000+1")  # fmt: skip
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == (
        "modelcost: error: the sweep has 50,010,000 points, over the 100,000 a sweep takes "
        "(streamed: --format csv, jsonl or parquet, up to 10,000,000) (values per axis: "
        "hw 2, phase 2, batch 5,000, context 5,000)\n"
        "  hint: sweep fewer values, or split it into several sweeps\n"
    )
    # streamed, the limit is MAX_STREAMED: 50,010,000 is over it too
    r = run_cli("sweep", str(MODELS / "llama3-8b.model"), "--hw", "h100,h200", "--phase",
                "decode,prefill", "--batch", "1..5000+1", "--context", "1..5000+1",
                "--format", "csv")  # fmt: skip
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr.startswith(
        "modelcost: error: the sweep has 50,010,000 points, over the 10,000,000 a sweep takes "
        "(values per axis"
    )


def test_a_huge_range_from_python_is_refused_before_it_is_made() -> None:
    started = time.perf_counter()
    with pytest.raises(SpecError) as err:
        sweep([GPT2], [H100], "decode", range(1, 10**30), context=[64])
    assert str(err.value) == (
        "modelcost: error: range(1, 1000000000000000000000000000000) has over 100,000 "
        "values, the most a sweep takes"
    )
    with pytest.raises(SpecError, match=r"the sweep has 1,000,000 points, over the 100,000"):
        sweep([GPT2], [H100], "decode", range(1, 1001), context=range(1, 1001))
    assert time.perf_counter() - started < 1  # refused before any point is compiled


@settings(max_examples=25, deadline=None)
@given(
    batch=st.lists(st.sampled_from([1, 2, 4]), min_size=1, max_size=3),
    context=st.lists(st.sampled_from([16, 64]), min_size=1, max_size=2),
    phases=st.lists(st.sampled_from(["decode", "prefill"]), min_size=1, max_size=2, unique=True),
    chunk=st.lists(st.sampled_from([0, 8]), min_size=1, max_size=2),
    prompt=st.lists(st.sampled_from([0, 16, 32]), min_size=1, max_size=2),
)
def test_the_counted_size_is_the_points_a_sweep_makes(batch, context, phases, chunk, prompt):
    # the whole class of small grids: the size counted before the sweep is exactly its
    # rows and skipped points (duplicates in a list are points of their own, as made)
    # (a length only where a phase reads it: others are refused, test_sweep.py)
    seq = [64] if "prefill" in phases else [None]
    context = context if "decode" in phases else [None]
    axes = {"batch": batch, "seq": seq, "context": context, "prefix": [0], "chunk": chunk,
            "prompt": prompt} | {k: [getattr(Parallel(), k)] for k in LAYOUT_AXES}  # fmt: skip
    phase = [Phase(p) for p in phases]
    s = sweep([GPT2], [H100], phase, batch, seq, context,
              engine={"chunk": chunk, "prompt": prompt})  # fmt: skip
    assert grid_size(1, 1, phase, axes) == len(s.rows) + len(s.skipped)
