"""Golden reports: Markdown, HTML and JSON of four zoo models and one diff, byte for byte.

After an intended change to the output: `python -m pytest tests/test_golden.py
--update-goldens`, then review `git diff tests/golden`.
"""

import subprocess
import sys

import pytest
from conftest import GOLDEN, MODELS, ROOT

from modelcost import load_spec
from modelcost.analyses.diff import diff, gate
from modelcost.ir.graph import Phase, Workload
from modelcost.lowering.validate import for_phase
from modelcost.render.formats import (
    markdown_files,
    render_diff,
    render_html,
    render_json,
    render_markdown,
)
from modelcost.roofline.compile import compile_report
from modelcost.targets.hardware import load_hardware

CASES = {
    # name: (spec, hardware, batch, seq, context)
    "llama3-8b-mi355x": ("llama3-8b", "mi355x", 1, 2048, 4096),
    "mixtral-8x7b-h200": ("mixtral-8x7b", "h200", 4, 1024, 2048),
    "mamba2-2.7b-mi300x": ("mamba2-2.7b", "mi300x", 8, 2048, 2048),
    # an encoder and a decoder: the encoder's stream, cross-attention and its cache
    "whisper-large-v3-mi325x": ("whisper-large-v3", "mi325x", 4, 64, 256),
}
RENDER = {"md": render_markdown, "html": render_html, "json": render_json}


def reports(spec: str, hw: str, batch: int, seq: int, context: int):
    s, h = load_spec(MODELS / f"{spec}.model"), load_hardware(hw)
    return [compile_report(s, h, for_phase(Workload(p, batch, seq, context)))
            for p in (Phase.prefill, Phase.decode)]  # fmt: skip


def check(request: pytest.FixtureRequest, name: str, text: str) -> None:
    path = GOLDEN / name
    if request.config.getoption("--update-goldens"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    assert path.exists(), f"missing golden {name}: run pytest --update-goldens"
    assert text == path.read_text(encoding="utf-8"), f"{name} changed (see the module docstring)"


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("fmt", RENDER)
def test_report_golden(request: pytest.FixtureRequest, case: str, fmt: str) -> None:
    check(request, f"{case}.{fmt}", RENDER[fmt](reports(*CASES[case])))


@pytest.mark.parametrize("fmt", ["md", "html", "json", "gfm", "text"])
def test_diff_golden(request: pytest.FixtureRequest, fmt: str) -> None:
    hw = "mi355x"
    a = reports("llama3-70b", hw, 1, 2048, 2048)
    b = reports("llama3.1-405b", hw, 1, 2048, 2048)
    d = diff(a, b)
    # the pull-request summary and the terminal text under a 5 % gate (which fails)
    text = render_diff(d, fmt, gate(d, 5.0), sides=(a, b))
    ext = {"gfm": "gfm.md", "text": "txt"}.get(fmt, fmt)
    check(request, f"diff-llama3-70b-vs-llama3.1-405b-{hw}.{ext}", text)


def test_markdown_with_chart_files_golden(request: pytest.FixtureRequest) -> None:
    # the page references its charts beside it; one chart's SVG is golden too
    files = markdown_files(reports(*CASES["llama3-8b-mi355x"]), "llama3-8b-mi355x-files.md")
    assert set(files) - {"llama3-8b-mi355x-files.md"} == {
        f"llama3-8b-mi355x-files-charts/{p}-{c}.svg"
        for p in ("decode", "prefill")
        for c in ("kinds", "layers", "roofline")
    }
    check(request, "llama3-8b-mi355x-files.md", files["llama3-8b-mi355x-files.md"])
    svg = files["llama3-8b-mi355x-files-charts/prefill-roofline.svg"]
    check(request, "llama3-8b-mi355x-prefill-roofline.svg", svg)


def test_cli_output_is_the_golden_and_stable() -> None:
    cmd = [
        sys.executable,
        "-m",
        "modelcost",
        "compile",
        "specs/models/llama3-8b.model",
        "--hw",
        "mi355x",
        "--phase",
        "prefill,decode",
        "--context",
        "4096",
        "--format",
        "md",
    ]
    first = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True).stdout
    second = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert first == second == (GOLDEN / "llama3-8b-mi355x.md").read_text(encoding="utf-8")
