"""Publishing: the pull-request summary (`diff --format gfm`) and its gate, the
documented workflow, the terminal diff and `hw list --format json`."""

import json
import re
import shlex

from conftest import MODELS, ROOT, run_cli

from modelcost.cli import build_parser

A, B = str(MODELS / "llama3-70b.model"), str(MODELS / "llama3.1-405b.model")


def test_the_pr_summary_leads_with_the_verdict_and_the_gate_exits_1(tmp_path) -> None:
    out = tmp_path / "comment.md"
    r = run_cli("diff", A, B, "--hw", "mi355x", "--phase", "prefill,decode", "--format", "gfm",
                "--fail-above", "5", "-o", str(out))  # fmt: skip
    assert r.returncode == 1  # the 405B model's decode step is 478.7% slower
    text = out.read_text()
    lines = text.splitlines()
    assert lines[0] == "### modelcost: Llama 3 70B → Llama 3.1 405B"
    # 17.468 ms → 101.096 ms: (101.096 − 17.468) / 17.468 = +478.7 %
    assert lines[2] == "❌ decode time +478.7%: more than --fail-above 5%"
    assert "- **decode** step time 17.468 ms → 101.096 ms (**+478.7%**)" in lines
    assert "<details><summary>Top changes</summary>" in lines
    # five op kinds at most per phase, the largest change first
    kinds = [ln for ln in lines if ln.startswith("| GEMM")]
    # prefill's LM head runs over each sequence's last position (the default logits):
    # against every position, A's saves 2·2048·128256·8192 FLOP / 2516.6 TFLOPS − the
    # 8192·128256·2 B of its weights / 8 TB/s = 1.710 − 0.263 = 1.447 ms and B's twice
    # that, so the GEMM change is 544.017 − 1.447 = 542.569 ms (−1 in the last digit)
    assert len(kinds) == 2 and kinds[0].split("|")[4].strip() == "+542.569"
    assert r.stderr.strip() == "modelcost: decode time +478.7%: more than --fail-above 5%"
    ok = run_cli("diff", A, B, "--hw", "mi355x", "--format", "gfm", "--fail-above", "500")
    # (691.417 − 124.026) / 124.026 = +457.5 % (the step times below)
    assert ok.returncode == 0 and "✅ prefill time +457.5%: within --fail-above 500%" in ok.stdout


def test_the_documented_workflow_runs_a_command_the_cli_takes() -> None:
    text = (ROOT / "docs" / "examples" / "modelcost-pr-gate.yml").read_text()
    (line,) = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("modelcost diff")]
    argv = shlex.split(line.replace('"$SPEC"', B))[1:]
    args = build_parser().parse_args(argv)
    assert (args.format, args.fail_above, args.output) == ("gfm", 5.0, "comment.md")
    assert re.search(r"gh pr comment .* --body-file comment\.md", text)


def test_the_terminal_diff_is_text_not_markdown() -> None:
    r = run_cli("diff", A, B, "--hw", "mi355x", "--format", "text")
    assert r.returncode == 0
    assert "|" not in r.stdout and "#" not in r.stdout
    assert r.stdout.splitlines()[0] == "Llama 3 70B vs Llama 3.1 405B"
    # 125.473 and 694.312 ms with logits for every position, less the LM head's 1.447
    # and 2.895 ms that the last position alone saves (see the test above)
    (step,) = [ln.split() for ln in r.stdout.splitlines() if ln.startswith("step time")]
    assert step == ["step", "time", "(ms)", "124.026", "691.417", "+567.391", "+457.5%"]


def test_hw_list_as_json_gives_every_target_with_its_figures() -> None:
    r = run_cli("hw", "list", "--format", "json")
    data = json.loads(r.stdout)
    names = [h["name"] for h in data]
    assert names == sorted(names) and "mi355x" in names and "h100" in names
    mi300x = next(h for h in data if h["name"] == "mi300x")
    # the MI300X datasheet: 5.3 TB/s HBM3, 192 GB (binary, as HBM is counted: 192 GiB)
    assert (mi300x["memory_bandwidth"], mi300x["memory"]) == (5.3e12, 192 * 2**30)


def test_markdown_written_with_o_carries_its_charts_beside_it(tmp_path) -> None:
    page = tmp_path / "out" / "llama.md"
    page.parent.mkdir()
    r = run_cli("compile", str(MODELS / "llama3-8b.model"), "--hw", "mi355x", "--phase",
                "prefill,decode", "--format", "md", "-o", str(page))  # fmt: skip
    assert r.returncode == 0, r.stderr
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", page.read_text())
    # three charts a phase, each a file beside the page that its link reaches
    assert images == [f"llama-charts/{p}-{c}.svg" for p in ("prefill", "decode")
                      for c in ("roofline", "kinds", "layers")]  # fmt: skip
    assert all((page.parent / i).read_text().startswith("<svg") for i in images)
    diff = tmp_path / "out" / "d.md"
    r = run_cli("diff", A, B, "--hw", "mi355x", "--format", "md", "-o", str(diff))
    charts = sorted(p.name for p in (tmp_path / "out" / "d-charts").iterdir())
    assert r.returncode == 0 and charts == [
        "prefill-kinds.svg", "prefill-roofline-a.svg", "prefill-roofline-b.svg",
        "prefill-waterfall.svg"]  # fmt: skip
    # to stdout: a line says how to get them, or the SVG inline (MkDocs renders it)
    note = run_cli("compile", str(MODELS / "llama3-8b.model"), "--hw", "mi355x", "--format", "md")
    assert "written as SVG files beside the page with `-o PAGE.md`" in note.stdout
    inline = run_cli("compile", str(MODELS / "llama3-8b.model"), "--hw", "mi355x", "--format",
                     "md", "--charts", "inline")  # fmt: skip
    assert inline.stdout.count('<div class="modelcost-chart">') == 3
    bad = run_cli("compile", str(MODELS / "llama3-8b.model"), "--hw", "mi355x", "--format", "md",
                  "--charts", "files")  # fmt: skip
    assert bad.returncode == 2 and "--charts files needs -o PAGE.md" in bad.stderr
