"""Regression tests for issue 38 (no wrong answer, round four): the command line as
careful as the language, and a new user's first hour.

Each test names the item it guards; each failed before its fix.
"""

import json
import re
import sys

import pytest
from conftest import MODELS, ROOT, run_cli

from modelcost import load_spec
from modelcost.analyses.serving import serve
from modelcost.analyses.sweeps import sweep
from modelcost.base.errors import SpecError
from modelcost.base.settings import MAX_SIZE, count
from modelcost.ir.graph import Parallel, Phase, Workload
from modelcost.ir.report import REPORT_SCHEMA_VERSION
from modelcost.language.parse import number_value
from modelcost.roofline.compile import compile_report
from modelcost.targets.hardware import load_hardware

LLAMA8 = load_spec(MODELS / "llama3-8b.model")
H100 = load_hardware("h100")
COMPILE_8B = ("compile", str(MODELS / "llama3-8b.model"), "--hw", "h100")
HUGE = "1" + "0" * 30  # 10**30

# ---- 1. counts on the command line and the API bounded as the language bounds sizes


@pytest.mark.parametrize(
    "args",
    [
        ("--phase", "train", "--seq", HUGE),
        ("--phase", "train", "--batch", HUGE, "--microbatches", HUGE),
        ("--phase", "decode", "--context", HUGE),
        ("--phase", "prefill", "--tp", HUGE),
        ("--phase", "decode", "--context", str(MAX_SIZE + 1)),
    ],
)
def test_a_count_past_the_bound_on_a_size_is_refused(args) -> None:
    r = run_cli(*COMPILE_8B, *args)
    assert (r.returncode, r.stdout) == (2, "")
    # 2**40, the language's bound on a size (expressions.MAX_DIM is the same constant)
    assert "expected at most 1,099,511,627,776 (2**40, the bound on a size)" in r.stderr
    assert "Traceback" not in r.stderr


def test_serve_and_sweep_bound_their_counts_too() -> None:
    r = run_cli("serve", str(MODELS / "llama3-8b.model"), "--hw", "h100", "--isl", HUGE,
                "--osl", "1")  # fmt: skip
    assert r.returncode == 2 and "argument --isl: expected at most 1,099,511,627,776" in r.stderr
    r = run_cli("sweep", str(MODELS / "llama3-8b.model"), "--hw", "h100", "--seq", HUGE,
                "--format", "csv")  # fmt: skip
    assert r.returncode == 2 and "argument --seq: expected at most" in r.stderr


def test_the_api_refuses_the_same_counts() -> None:
    from modelcost.language.expressions import MAX_DIM

    assert MAX_DIM == MAX_SIZE == 2**40  # one bound: the language's and the counts'
    with pytest.raises(ValueError, match=r"seq must be at most 1,099,511,627,776"):
        Workload("train", 1, seq=10**30)
    with pytest.raises(ValueError, match=r"microbatches must be at most 1,099,511,627,776"):
        Parallel(microbatches=10**30)
    with pytest.raises(SpecError, match=r"isl must be at most 1,099,511,627,776"):
        serve(LLAMA8, H100, 10**30, 1)
    assert Workload("decode", MAX_SIZE, context=MAX_SIZE).batch == MAX_SIZE  # the bound is in


def test_no_figure_prints_more_digits_than_a_float_holds() -> None:
    # seq 2**40 on one H100: a step of about 1.1e15 s. Before: 231,833,…,832.000 s (56
    # digits of float noise) at seq 10**30; now four significant digits past 10**12 s
    r = run_cli(*COMPILE_8B, "--phase", "train", "--seq", str(MAX_SIZE))
    assert r.returncode == 0, r.stderr
    step = next(ln for ln in r.stdout.splitlines() if ln.startswith("step time"))
    assert re.fullmatch(r"step time +\d\.\d{3}e\+\d\d s", step), step
    mfu = next(ln for ln in r.stdout.splitlines() if ln.startswith("MFU bound"))
    assert mfu.split()[-1] == "100.0%"  # at most 100 %, however long the sequence
    data = json.loads(run_cli(*COMPILE_8B, "--phase", "train", "--seq", str(MAX_SIZE),
                              "--format", "json").stdout)  # fmt: skip
    assert 0.99 < data["reports"][0]["totals"]["mfu_bound"] <= 1.0


def test_an_mfu_a_rounding_past_one_is_one() -> None:
    from modelcost.roofline.step import _mfu

    # a step of exactly its FLOPs at the peak, summed as floats: at most 1
    assert _mfu(1.0000000000000002, 1.0, 1.0) == 1.0
    assert _mfu(0.5, 1.0, 1.0) == 0.5


# ---- 2. advice names only fixes that fit, or says that none does


def test_advice_for_a_length_nothing_fits_says_so() -> None:
    # a 16-layer model: pipeline stages cannot hold a billion-token sequence either
    r = run_cli("compile", str(MODELS / "llama3-8b.model"), "--hw", "h100", "--phase",
                "prefill", "--seq", "1000000000")  # fmt: skip
    assert r.returncode == 0, r.stderr
    (warning,) = [ln for ln in r.stdout.splitlines() if ln.startswith("warning:")]
    assert "add --pp stages" not in warning
    assert warning.endswith(
        "no layout the advice tries makes it fit (--tp up to 64, --pp up to 64, alone or together)"
    )


# ---- 3. and 4. an option the phases asked for do not read is refused, one rule


@pytest.mark.parametrize(
    ("args", "message", "hint"),
    [
        (("--phase", "prefill", "--zero", "3", "--dp", "2", "--batch", "2"),
         "--zero 3 applies to train, and the phases asked for are prefill",
         "add train to --phase, or leave --zero out"),
        (("--phase", "decode", "--recompute", "full"),
         "--recompute full applies to train, and the phases asked for are decode",
         "add train to --phase, or leave --recompute out"),
        (("--phase", "train", "--context", "100"),
         "--context 100 applies to decode, and the phases asked for are train",
         "add decode to --phase, or leave --context out"),
        (("--phase", "decode", "--seq", "100"),
         "--seq 100 applies to prefill and train, and the phases asked for are decode",
         "add prefill to --phase, or leave --seq out"),
        (("--phase", "decode", "--microbatches", "2", "--batch", "2"),
         "--microbatches 2 applies to train or a pipeline (--pp), and the phases asked for "
         "are decode",
         "add train to --phase, or leave --microbatches out"),
        (("--phase", "train", "--zero", "3"),
         "--zero 3 shards over the data-parallel replicas, and there is one",
         "add --dp (or --cp) ranks, or leave --zero out"),
        (("--tp", "2", "--etp", "2"),
         "--etp 2: `llama3_8b` has no experts to split",
         "expert tensor parallelism applies to MoE layers; use --tp for the rest"),
    ],
)  # fmt: skip
def test_an_option_no_phase_reads_is_refused(args, message, hint) -> None:
    r = run_cli(*COMPILE_8B, *args)
    assert (r.returncode, r.stdout) == (2, ""), r.stderr
    assert r.stderr == f"modelcost: error: {message}\n  hint: {hint}\n"
    # diff says the same, from the same rule
    d = run_cli("diff", str(MODELS / "llama3-8b.model"), str(MODELS / "llama3-8b.model"),
                "--hw", "h100", *args)  # fmt: skip
    assert d.returncode == 2 and d.stderr == r.stderr


def test_the_api_and_sweep_agree_with_the_command_line() -> None:
    with pytest.raises(SpecError) as err:
        compile_report(LLAMA8, H100, Workload("decode", 1, seq=100))
    assert err.value.message == (
        "--seq 100 applies to prefill and train, and the phases asked for are decode"
    )
    with pytest.raises(SpecError, match="--zero 3 applies to train"):
        compile_report(LLAMA8, H100, Workload("prefill", 2, parallel=Parallel(dp=2, zero=3)))
    with pytest.raises(SpecError, match="--recompute none,full applies to train"):
        sweep([LLAMA8], [H100], [Phase.decode], [1], layout={"recompute": ["none", "full"]})
    # what several phases read between them is taken, each phase its own
    r = run_cli(*COMPILE_8B, "--phase", "prefill,decode", "--seq", "128", "--context", "256",
                "--format", "json")  # fmt: skip
    pre, dec = json.loads(r.stdout)["reports"]
    assert (pre["workload"]["seq"], dec["workload"]["context"]) == (128, 256)


def test_serve_refuses_what_a_served_step_does_not_read() -> None:
    r = run_cli("serve", str(MODELS / "llama3-8b.model"), "--hw", "h100", "--isl", "128",
                "--osl", "128", "--microbatches", "2")  # fmt: skip
    assert r.returncode == 2
    assert "--microbatches 2 applies to train or a pipeline (--pp)" in r.stderr


# ---- 6. the zoo by name, from anywhere


def test_a_shipped_model_by_name_from_any_folder(tmp_path) -> None:
    r = run_cli("compile", "llama3-70b", "--hw", "h100", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("Llama 3 70B on NVIDIA H100 SXM5 80GB")
    # getting-started's example, saved where a newcomer saves it
    page = (ROOT / "docs" / "getting-started.md").read_text()
    example = page.split("## Your own model")[1].split("```text\n")[1].split("```")[0]
    (tmp_path / "mine.model").write_text(example)
    check = run_cli("check", "mine.model", cwd=tmp_path)
    assert check.returncode == 0, check.stderr
    params = run_cli("params", "mine.model", cwd=tmp_path)
    assert params.returncode == 0 and params.stdout.startswith("mine (mine): ")


def test_a_file_beside_the_spec_wins_over_the_zoo(tmp_path) -> None:
    mine = 'model llama3_70b {\n  title = "Mine"\n  vocab = 8\n  d_model = 8\n  embed(vocab)\n}\n'
    (tmp_path / "llama3-70b.model").write_text(mine)
    (tmp_path / "a.model").write_text('import "llama3-70b.model"\nmodel a extends llama3_70b {}\n')
    r = run_cli("params", "a.model", "--format", "json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["total"] == 8 * 8  # the local file's embedding alone


def test_an_unknown_name_is_refused_with_the_nearest(tmp_path) -> None:
    r = run_cli("compile", "llama3-70x", "--hw", "h100", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == (
        "llama3-70x: error: cannot read file: no such file, nor a shipped model of that name\n"
        "  hint: did you mean `llama3-70b`?\n"
    )


def test_zoo_lists_the_shipped_names() -> None:
    r = run_cli("zoo", "--format", "json")
    rows = json.loads(r.stdout)
    names = {p.stem for p in MODELS.glob("*.model")}
    assert {row["name"] for row in rows} == names
    (llama,) = [row for row in rows if row["name"] == "llama3-8b"]
    assert llama["parameters"] == 8_030_261_248  # derived by hand in tests/test_params.py


def test_an_installed_wheel_finds_the_zoo_by_name(tmp_path) -> None:
    import subprocess
    import zipfile

    out = tmp_path / "wheel"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(out), str(ROOT)], check=True, capture_output=True)  # fmt: skip
    (wheel,) = out.glob("*.whl")
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    (tmp_path / "mine.model").write_text('import "gpt2.model"\nmodel mine extends gpt2 {}\n')
    code = ("import modelcost\n"
            "print(modelcost.count_params(modelcost.load_spec('mine.model')).total)\n"
            "print(modelcost.count_params(modelcost.load_spec('gpt2')).total)\n")  # fmt: skip
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                       text=True, env={"PYTHONPATH": str(site), "PATH": ""})  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["124439808", "124439808"]  # GPT-2, test_params.py


# ---- 7. one meaning for K


@pytest.mark.parametrize(("text", "value"), [("32K", 32_000), ("32Ki", 32_768),
                                             ("1M", 1_000_000), ("1Mi", 1_048_576),
                                             ("1.5K", 1_500)])  # fmt: skip
def test_a_suffix_means_on_the_command_line_what_it_means_in_a_spec(text, value) -> None:
    assert count(text) == number_value(text) == value


def test_the_report_shows_the_resolved_number() -> None:
    r = run_cli(*COMPILE_8B, "--phase", "decode", "--context", "32K")
    assert r.stdout.splitlines()[0].endswith("decode batch 1, context 32000")
    low = run_cli(*COMPILE_8B, "--phase", "decode", "--context", "32k")
    assert low.returncode == 2 and "did you mean 32K (32,000) or 32Ki (32,768)?" in low.stderr


# ---- the docs say the schema version the JSON carries


def test_the_readme_and_report_page_say_the_schema_version() -> None:
    said = f'{{"schema_version": {REPORT_SCHEMA_VERSION}, "reports": ['
    assert said in (ROOT / "README.md").read_text()
    assert said in (ROOT / "docs" / "report.md").read_text()


# ---- 5. a file that is not a spec says what it is; diff compares two saved reports


def _saved(tmp_path, name: str, *args: str) -> str:
    out = tmp_path / f"{name}.json"
    r = run_cli("compile", str(MODELS / f"{name}.model"), "--hw", "h100", *args,
                "--format", "json", "-o", str(out))  # fmt: skip
    assert r.returncode == 0, r.stderr
    return str(out)


def test_diff_of_two_saved_reports_is_the_diff_of_their_specs(tmp_path) -> None:
    a, b = _saved(tmp_path, "llama3-8b"), _saved(tmp_path, "gpt2")
    saved = run_cli("diff", a, b)
    specs = run_cli("diff", str(MODELS / "llama3-8b.model"), str(MODELS / "gpt2.model"),
                    "--hw", "h100")  # fmt: skip
    assert saved.returncode == specs.returncode == 0, saved.stderr
    assert saved.stdout == specs.stdout  # byte for byte: what CI saves on main and diffs
    assert saved.stdout.startswith("Llama 3 8B vs GPT-2 (124M)\n")
    # an option would re-price one side only: refused, not ignored
    given = run_cli("diff", a, b, "--phase", "decode")
    assert (given.returncode, given.stdout) == (2, "")
    assert "--phase: A and B are saved reports: their workloads are their own" in given.stderr


def test_diff_of_reports_with_different_phases_says_so(tmp_path) -> None:
    a = _saved(tmp_path, "llama3-8b")
    b = _saved(tmp_path, "gpt2", "--phase", "prefill,decode")
    r = run_cli("diff", a, b)
    assert (r.returncode, r.stdout) == (2, "")
    assert "phase" in r.stderr.splitlines()[0]


def test_a_saved_report_an_html_page_and_a_hardware_file_are_named(tmp_path) -> None:
    a = _saved(tmp_path, "llama3-8b")
    r = run_cli("compile", a, "--hw", "h100")
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr.startswith(
        f"{a}: error: a saved modelcost report (schema_version {REPORT_SCHEMA_VERSION}), "
        "not a Hugging Face config.json\n"
    )
    page = tmp_path / "r.html"
    assert run_cli(*COMPILE_8B, "--format", "html", "-o", str(page)).returncode == 0
    html = run_cli("check", str(page))
    assert html.returncode == 2
    assert html.stderr.startswith(f"{page}: error: an HTML page (a rendered report?), not a spec")
    hw = ROOT / "specs" / "hardware" / "h100.hw"
    spec = run_cli("compile", str(hw), "--hw", "h100")
    assert spec.returncode == 2
    assert spec.stderr == (
        f"{hw}: error: a hardware file, not a spec\n  hint: give it as --hw {hw}\n"
    )


# ---- 11. a BOM, an import chain too deep, a negative duration, a duplicate JSON key


def test_a_byte_order_mark_is_accepted(tmp_path) -> None:
    text = (MODELS / "gpt2.model").read_text()
    (tmp_path / "bom.model").write_bytes(b"\xef\xbb\xbf" + text.encode())
    r = run_cli("params", "bom.model", "--format", "json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["total"] == 124_439_808  # GPT-2, tests/test_params.py


def test_an_import_chain_past_its_limit_is_refused_where_it_goes_too_deep(tmp_path) -> None:
    from modelcost.language.loader import MAX_IMPORT_DEPTH

    assert MAX_IMPORT_DEPTH == 64  # docs/language.md says so
    assert f"{MAX_IMPORT_DEPTH} files deep" in (ROOT / "docs" / "language.md").read_text()
    for i in range(500):
        (tmp_path / f"c{i}.model").write_text(f'import "c{i + 1}.model"\n')
    (tmp_path / "c500.model").write_text((MODELS / "gpt2.model").read_text())
    (tmp_path / "c0.model").write_text('import "c1.model"\nmodel top extends gpt2 {}\n')
    with pytest.raises(SpecError) as info:
        load_spec(tmp_path / "c0.model")
    err = info.value
    assert (err.filename, err.line, err.column) == (str(tmp_path / "c63.model"), 1, 1)
    assert err.message == "imports nest more than 64 files deep"
    # a chain within the limit still loads
    (tmp_path / "c60.model").write_text((MODELS / "gpt2.model").read_text())
    assert load_spec(tmp_path / "c0.model").name == "top"


def test_a_negative_duration_is_named() -> None:
    r = run_cli("serve", str(MODELS / "llama3-8b.model"), "--hw", "h100", "--tpot", "-5ms")
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr.splitlines()[-1] == (
        "modelcost serve: error: argument --tpot: a duration must be positive, got '-5ms'"
    )


def test_a_duplicate_key_in_a_config_is_refused_at_its_place(tmp_path) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text('{"model_type": "llama",\n "hidden_size": 4096, "hidden_size": 2}\n')
    r = run_cli("check", str(cfg))
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr.startswith(
        f"{cfg}:2:23: error: duplicate key `hidden_size`: JSON keeps the last of them\n"
    )


# ---- 9. site removes what it wrote before and no longer writes, and nothing else


def _pages(out) -> set[str]:
    return {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}


def test_site_removes_its_own_stale_pages_and_nothing_else(tmp_path) -> None:
    out = tmp_path / "site"
    a, b = str(MODELS / "gpt2.model"), str(MODELS / "llama3-8b.model")
    assert run_cli("site", a, b, "--hw", "h100", "-o", str(out)).returncode == 0
    assert {"llama3-8b-h100.html", "llama3-8b-h100-charts/decode-roofline.svg"} <= _pages(out)
    (out / "notes.md").write_text("mine\n")  # a user's file beside the site
    kept = out / "llama3-8b-h100.md"
    kept.write_text("edited by hand\n")  # no longer marked as the site's: kept
    again = run_cli("site", a, "--hw", "h100", "-o", str(out))
    assert again.returncode == 0, again.stderr
    # 19 files (2 models × 2 pages + their 12 charts + the index's 2 pages and its chart),
    # then 11: llama3-8b's html and its 6 charts go, with their folder (its md was edited)
    assert again.stderr == (
        f"wrote 11 files to {out}; removed 7 it wrote before and no longer writes\n"
    )
    left = _pages(out)
    assert not any(p.startswith("llama3-8b-h100-charts") for p in left)
    assert not (out / "llama3-8b-h100-charts").exists()
    assert "llama3-8b-h100.html" not in left
    assert {"notes.md", "llama3-8b-h100.md", "gpt2-h100.html", "index.md"} <= left
    assert kept.read_text() == "edited by hand\n"
    listed = (out / ".modelcost-site").read_text().splitlines()
    assert "gpt2-h100.html" in listed and "llama3-8b-h100.html" not in listed


def test_a_manifest_cannot_reach_outside_the_folder(tmp_path) -> None:
    out = tmp_path / "site"
    assert (
        run_cli("site", str(MODELS / "gpt2.model"), "--hw", "h100", "-o", str(out)).returncode == 0
    )
    outside = tmp_path / "outside.md"
    outside.write_text((out / "index.md").read_text())  # marked as the site's, but outside
    listing = (out / ".modelcost-site").read_text()
    (out / ".modelcost-site").write_text(f"../outside.md\n{outside}\n" + listing)
    assert (
        run_cli("site", str(MODELS / "gpt2.model"), "--hw", "h100", "-o", str(out)).returncode == 0
    )
    assert outside.exists()


# ---- 12. site reads no spec or import outside its root (--root, the current folder)


def test_site_reads_nothing_outside_its_root(tmp_path) -> None:
    secret = tmp_path / "secret.model"
    secret.write_text("password = hunter2\n")
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "a.model").write_text(f'import "{secret}"\nimport "gpt2"\nmodel a extends gpt2 {{}}\n')
    r = run_cli("site", "a.model", "--hw", "h100", "-o", "site", "--root", ".", cwd=proj)
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr.startswith(f"a.model:1:1: error: `{secret}` is outside the project's root, ")
    assert "hunter2" not in r.stderr and not (proj / "site").exists()
    wide = run_cli("site", "a.model", "--hw", "h100", "-o", "site", "--root", "..", cwd=proj)
    assert wide.returncode == 2 and "hunter2" in wide.stderr  # read now: not a spec
    (proj / "a.model").write_text('import "gpt2"\nmodel a extends gpt2 {}\n')  # the zoo: ok
    assert (
        run_cli("site", "a.model", "--hw", "h100", "-o", "site", "--root", ".", cwd=proj).returncode
        == 0
    )
