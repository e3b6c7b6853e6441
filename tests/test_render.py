"""Markdown/HTML reports, diffs and the docs site: content, escaping, links, exit codes."""

import json
import re
import subprocess
import sys
from pathlib import Path

from conftest import MODELS, ROOT

from modelcost import load_spec, parse_spec
from modelcost.analyses.diff import change, diff
from modelcost.ir.graph import Phase, Workload
from modelcost.lowering.validate import for_phase
from modelcost.publish.site import build_site
from modelcost.render.formats import render_html, render_markdown
from modelcost.roofline.compile import compile_report
from modelcost.targets.hardware import load_hardware


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "modelcost", *args], cwd=ROOT,
                          capture_output=True, text=True)  # fmt: skip


HOSTILE = """model evil {
  title = "<script>alert(1)</script> | pipes"
  d_model = 64
  embed(100)
  repeat 2 { rmsnorm; attention(4); residual; rmsnorm; mlp(128); residual }
  rmsnorm
  lm_head(100)
}
"""


def test_html_escapes_everything_from_the_users_file() -> None:
    spec = parse_spec(HOSTILE)
    r = compile_report(spec, load_hardware("mi300x"), Workload(Phase.prefill, 1, 16))
    html = render_html([r])
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; | pipes" in html
    assert html.count("<script>") == 1  # only the sort script
    md = render_markdown([r])
    assert "&#124; pipes" in md  # a pipe cannot break a Markdown table (test_escaping.py)


def test_report_sections_side_by_side() -> None:
    spec = load_spec(MODELS / "llama3-8b.model")
    hw = load_hardware("mi355x")
    reports = [compile_report(spec, hw, for_phase(Workload(p, 1, 2048, 2048))) for p in Phase
               if p is not Phase.train]  # fmt: skip
    md = render_markdown(reports)
    headings = [line for line in md.splitlines() if line.startswith("#")]
    assert headings[:3] == ["# Llama 3 8B on AMD Instinct MI355X", "## Summary", "## Per token"]
    assert "## Prefill: batch 1, seq 2048" in headings
    assert "## Decode: batch 1, context 2048" in headings
    per_token = md.split("## Per token")[1].split("##")[0]
    assert re.search(r"\|\s+\|\s+prefill \|\s+decode \|", per_token)
    html = render_html(reports)
    assert html.count('class="modelcost roofline"') == 2 and "http://" not in html.replace(
        "http://www.w3.org/2000/svg", ""
    )


def test_diff_arithmetic() -> None:
    c = change("time_s", 2.0, 3.0)
    assert (c.delta, c.rel) == (1.0, 0.5)
    assert change("x", None, 3.0).rel is None and change("x", 0.0, 1.0).rel is None


def test_diff_across_hardware_of_one_model() -> None:
    spec = load_spec(MODELS / "llama3-8b.model")
    wl = Workload(Phase.decode, 1, context=2048)
    a = compile_report(spec, load_hardware("mi300x"), wl)
    b = compile_report(spec, load_hardware("mi355x"), wl)
    d = diff([a], [b]).phases[0]
    step = next(c for c in d.totals if c.key == "time_s")
    assert step.rel == (b.totals.time_s - a.totals.time_s) / a.totals.time_s
    assert {c.key for c in d.ops} == {o.name for o in a.ops}  # every op matched by name
    r = run("diff", "specs/models/llama3-8b.model", "specs/models/llama3-8b.model", "--hw",
            "mi300x", "--hw-b", "mi355x", "--phase", "decode", "--format", "json")  # fmt: skip
    assert r.returncode == 0
    assert json.loads(r.stdout)["phases"][0]["b"]["hardware"] == "AMD Instinct MI355X"


def test_fail_above_is_a_ci_gate() -> None:
    args = ("diff", "specs/models/llama3-8b.model", "specs/models/llama3-70b.model",
            "--hw", "mi355x", "--seq", "512")  # fmt: skip
    r = run(*args, "--fail-above", "5")
    assert r.returncode == 1
    assert "more than --fail-above 5%" in r.stderr
    assert run(*args, "--fail-above", "100000").returncode == 0
    faster = run("diff", "specs/models/llama3-70b.model", "specs/models/llama3-8b.model",
                 "--hw", "mi355x", "--seq", "512", "--fail-above", "0")  # fmt: skip
    assert faster.returncode == 0  # a speed-up never fails the gate


def test_site_pages_and_relative_links() -> None:
    specs = [("llama3-8b", load_spec(MODELS / "llama3-8b.model")),
             ("vit-l16", load_spec(MODELS / "vit-l16.model"))]  # fmt: skip
    files = build_site(specs, [load_hardware("mi300x"), load_hardware("h200")],
                       [("llama3-8b", "vit-l16")])  # fmt: skip
    pages = {
        "index.md", "index.html",
        *(f"{m}-{h}.{e}" for m in ("llama3-8b", "vit-l16") for h in ("mi300x", "h200")
          for e in ("md", "html")),
        *(f"diff-llama3-8b-vs-vit-l16-{h}.{e}" for h in ("mi300x", "h200") for e in ("md", "html")),
    }  # fmt: skip
    charts = set(files) - pages  # each Markdown page's charts, in a folder beside it
    assert pages <= set(files) and all(
        re.fullmatch(r"[\w.-]+-charts/[\w-]+\.svg", c) for c in charts
    )
    # Llama 3 8B: prefill and decode, three charts each; ViT: its forward pass; a diff:
    # per phase time by kind, the waterfall and both rooflines; the index its grid
    assert sum(c.startswith("llama3-8b-mi300x-charts/") for c in charts) == 6
    assert sum(c.startswith("vit-l16-mi300x-charts/") for c in charts) == 3
    assert sum(c.startswith("diff-llama3-8b-vs-vit-l16-h200-charts/") for c in charts) == 4
    assert "index-charts/grid.svg" in charts
    index = files["index.md"]
    links = re.findall(r"\]\(([^)]+)\)", index)
    assert links and all(link in files for link in links)  # relative, and they resolve
    for page in ("llama3-8b-mi300x.md", "diff-llama3-8b-vs-vit-l16-h200.md"):
        images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", files[page])
        assert images and all(i in files for i in images)
    html_links = re.findall(r'href="([^"]+)"', files["index.html"])
    assert html_links and all(link in files for link in html_links)
    assert "| no " not in index.split("vit-l16")[0]  # llama3-8b fits in HBM
    assert "Decode" not in files["vit-l16-mi300x.md"]  # an encoder: prefill only


def test_site_cli_writes_everything(tmp_path: Path) -> None:
    out = tmp_path / "site"
    r = run("site", "specs/models/gpt2.model", "specs/models/mamba2-2.7b.model",
            "--hw", "mi300x,mi355x", "-o", str(out))  # fmt: skip
    assert r.returncode == 0, r.stderr
    # 2 models × 2 targets: a Markdown page (and 3 charts beside it: gpt2 and Mamba-2
    # decode, so prefill and decode, 6) and an HTML page each; the index twice and its grid
    assert r.stderr == f"wrote {4 * (1 + 6 + 1) + 3} files to {out}\n"
    assert (out / "index.html").exists() and (out / "gpt2-mi355x.md").exists()
    # GPT-2 runs at its 1024 learned positions, and says so in its page
    assert "seq 1024" in (out / "gpt2-mi300x.md").read_text()
    bad = run("site", "specs/models/gpt2.model", "--hw", "mi300x", "-o", str(tmp_path / "x"),
              "--diff", "gpt2:nope")  # fmt: skip
    assert bad.returncode == 2 and not (tmp_path / "x").exists()  # nothing half-written


def test_training_reports_show_the_backward_pass() -> None:
    spec = load_spec(MODELS / "gpt2.model")
    r = compile_report(spec, load_hardware("a100"), Workload(Phase.train, 8, 1024))
    md = render_markdown([r])
    header = next(line for line in md.splitlines() if line.startswith("| op "))
    assert "backward FLOPs" in header and "backward (µs)" in header
    qkv = next(line for line in md.splitlines() if line.startswith("| layers.0.attn.qkv_proj"))
    # 4MNK + MN for M = 8·1024, N = 2304, K = 768: 58.0 G
    assert "58 G" in qkv
    optimizer = next(line for line in md.splitlines() if line.startswith("| optimizer"))
    assert "—" in optimizer  # no backward pass
