"""Bounded work on hostile sizes (issue 20, items 16 and 17): a request mix's shares and
number of classes, a sweep's grid; each refused up front with a positioned message, fast."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest
from conftest import MODELS, run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from modelcost import load_spec
from modelcost.errors import SpecError
from modelcost.hardware import load_hardware
from modelcost.options import MAX_MIX_CLASSES, SHARES
from modelcost.serving import RequestClass, load_mix, serve_mix

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
