"""Robustness: random mutations of every shipped spec raise SpecError or nothing at all.

No input, however broken, may escape as another exception (a traceback for the user).
Whatever still parses must also survive the formatter with its meaning intact.
"""

import os
from pathlib import Path

import pytest
from conftest import ZOO
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from modelcost import SpecError, parse_spec
from modelcost.language.fmt import format_source
from modelcost.language.parse import parse
from modelcost.lowering.validate import for_phase

# More with e.g. MODELCOST_FUZZ_EXAMPLES=2000 (clean at 1,500 per spec when written).
EXAMPLES = int(os.environ.get("MODELCOST_FUZZ_EXAMPLES", "120"))
RANDOM = bool(os.environ.get("MODELCOST_FUZZ_EXAMPLES"))  # a long fuzz explores afresh

TOKENS = [
    "{", "}", "(", ")", "=", ",", ";", "**", "/", "//", "%", "-", "+", "*",
    "0", "-1", "1e308", "0.5", "99999999999999999999", "2 ** 64", "4Ki", "1_", "\"", "#",
    "repeat", "model", "extends", "block", "import", 'import "."', 'import ""', "true",
    "false", "min()", "ceil(1, 2)", "d_model", "heads", "kv_heads", "layers", "vocab",
    "fp8", "mxfp4", "swiglu", "attention", "moe", "mla", "mamba2", "rmsnorm", "\n", " ",
    "é", "\x00", "\t", "x = x", "title = 1", "repeat 0 {", "dtype = heads",
    "TB/s", "TFLOPS", "GB", "MHz", "W", "vector {", "matrix {", "achievable {", "fp32 = 0 W",
    # hostile shapes (issue 8): out-of-range figures, invalid UTF-8 as text, deep nesting
    "1e400", "1e-400", "1e99999999999999999999", "compute_units = 0", "\udcff", "(((((((((",
    "- - - - - - - -", "9" * 80,
]  # fmt: skip


@st.composite
def mutations(draw, text: str) -> str:
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        kind = draw(st.sampled_from(["delete", "insert", "replace", "duplicate"]))
        i = draw(st.integers(min_value=0, max_value=len(text)))
        if kind == "delete":
            text = text[:i] + text[i + draw(st.integers(min_value=1, max_value=30)) :]
        elif kind == "insert":
            text = text[:i] + draw(st.sampled_from(TOKENS)) + text[i:]
        elif kind == "replace":
            n = draw(st.integers(min_value=1, max_value=8))
            text = text[:i] + draw(st.sampled_from(TOKENS)) + text[i + n :]
        else:
            lines = text.splitlines(keepends=True) or [""]
            j = draw(st.integers(min_value=0, max_value=len(lines) - 1))
            lines.insert(j, lines[j])
            text = "".join(lines)
    return text


@pytest.mark.parametrize("path", ZOO, ids=[p.stem for p in ZOO])
def test_mutated_specs_only_raise_spec_error(path: Path) -> None:
    original = path.read_text(encoding="utf-8")

    @given(mutations(original))
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=not RANDOM,  # CI replays the same mutations every run
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def check(text: str) -> None:
        try:
            module = parse(text, str(path))
        except SpecError:
            return
        formatted = format_source(text, str(path))
        assert parse(formatted, str(path)).items == module.items
        try:
            parse_spec(text, str(path))
        except SpecError as err:
            assert err.filename and err.message
            err.render()  # rendering never fails either

    check()


HARDWARE = sorted((ZOO[0].parent.parent / "hardware").glob("*.hw"))


@pytest.mark.parametrize("path", HARDWARE, ids=[p.stem for p in HARDWARE])
def test_mutated_hardware_files_only_raise_spec_error(path: Path) -> None:
    from modelcost.targets.hardware import parse_hardware

    original = path.read_text(encoding="utf-8")

    @given(mutations(original))
    @settings(
        max_examples=max(20, EXAMPLES // 4),
        deadline=None,
        derandomize=not RANDOM,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def check(text: str) -> None:
        try:
            hw = parse_hardware(text, str(path))
        except SpecError as err:
            assert err.message
            err.render()
            return
        assert hw.peak("matrix", "bf16")[0] > 0 and hw.memory_bandwidth > 0

    check()


# ---- hostile shapes: bounded with positioned errors, never a hang (issue 8, item 14)

from hostile import HOSTILE  # noqa: E402


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_inputs_get_their_error(name: str) -> None:
    from modelcost.ir.graph import Phase, Workload
    from modelcost.roofline.compile import compile_report
    from modelcost.targets.hardware import load_hardware

    text, expected = HOSTILE[name]
    try:
        spec = parse_spec(text, f"{name}.model")
        for phase in Phase:
            compile_report(spec, load_hardware("h100"), for_phase(Workload(phase, 1, 256, 256)))
    except SpecError as err:
        assert expected is not None and expected in err.message, err.render()[:300]
        if "lowers to" not in err.message and "too many tokens" not in err.message:
            assert err.line > 0 and err.column > 0  # positioned
        err.render()
        return
    assert expected is None


@pytest.mark.parametrize("name", ["parens", "nested-repeat", "many-ops", "most-ops"])
def test_hostile_inputs_through_the_cli(tmp_path: Path, name: str) -> None:
    """A hang or a traceback here is a failure; their timings: benchmarks/hostile.py."""
    import subprocess
    import sys

    path = tmp_path / f"{name}.model"
    path.write_text(HOSTILE[name][0])
    r = subprocess.run(
        [sys.executable, "-m", "modelcost", "compile", str(path), "--hw", "h100", "--format",
         "html", "-o", str(tmp_path / "out.html")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert "Traceback" not in r.stderr
    assert r.returncode == (0 if HOSTILE[name][1] is None else 2), r.stderr
