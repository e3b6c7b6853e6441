"""The command line, run as users run it: in a subprocess, checking output and exit codes."""

import json
import subprocess
import sys
from pathlib import Path

from conftest import FIXTURES, MODELS, ROOT, ZOO, run_cli

run = run_cli


def test_check_every_shipped_spec() -> None:
    r = run("check", *map(str, ZOO))
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("\nok  ") + r.stdout.startswith("ok  ") == len(ZOO)
    assert "specs/models/llama3-70b.model  llama3_70b  70.6 B parameters" in r.stdout


def test_fmt_check_passes_on_shipped_specs_and_fails_on_messy(tmp_path: Path) -> None:
    assert run("fmt", "--check", *map(str, ZOO)).returncode == 0
    messy = tmp_path / "messy.model"
    messy.write_text("model m { d_model=8; rmsnorm() }\n")
    r = run("fmt", "--check", str(messy))
    assert r.returncode == 1
    assert r.stderr == f"would reformat {messy}\n"
    assert messy.read_text() == "model m { d_model=8; rmsnorm() }\n"  # --check never writes


def test_fmt_prints_and_writes(tmp_path: Path) -> None:
    messy = tmp_path / "messy.model"
    messy.write_text("model m { d_model=8; rmsnorm() }\n")
    canonical = "model m {\n  d_model = 8\n  rmsnorm\n}\n"
    assert run("fmt", str(messy)).stdout == canonical
    r = run("fmt", "--write", str(messy))
    assert r.returncode == 0
    assert messy.read_text() == canonical
    assert list(tmp_path.iterdir()) == [messy]  # no temporary file left behind


def test_bad_input_prints_positioned_error_and_exits_2() -> None:
    bad = FIXTURES / "invalid" / "kv_heads_not_dividing.model"
    r = run("check", str(bad.relative_to(ROOT)))
    assert r.returncode == 2
    assert r.stdout == ""
    assert r.stderr == (
        "tests/fixtures/invalid/kv_heads_not_dividing.model:4:27: error: "
        "kv_heads = 3 does not divide heads = 8\n"
        "    attention(8, kv_heads = 3)\n"
        "                            ^\n"
        "  hint: each KV head serves a whole group of query heads (GQA)\n"
    )
    assert "Traceback" not in r.stderr


def test_every_invalid_fixture_reports_its_error_and_exits_2() -> None:
    folder = FIXTURES / "invalid"
    invalid = sorted(p.name for p in folder.glob("*.model"))
    r = run("check", *invalid, cwd=folder)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    for name in invalid:
        expected = (folder / name).read_text().splitlines()[0].removeprefix("# error: ")
        where, message = expected.split(": ", 1)
        assert f"{where}: error: {message}\n" in r.stderr, name


def test_fmt_on_syntax_error_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.model"
    bad.write_text("model m {\n")
    r = run("fmt", "--write", str(bad))
    assert r.returncode == 2
    assert r.stderr.startswith(f"{bad}:1:10: error: unexpected end of file")
    assert bad.read_text() == "model m {\n"


def test_missing_file_and_usage_errors_exit_2() -> None:
    r = run("check", "nope.model")
    assert (r.returncode, r.stderr) == (
        2,
        "nope.model: error: cannot read file: No such file or directory\n",
    )
    assert run("frobnicate").returncode == 2
    assert run("params").returncode == 2


def test_params_text_and_json() -> None:
    r = run("params", str(MODELS / "mixtral-8x7b.model"), "--format", "json")
    assert r.returncode == 0
    data = json.loads(r.stdout)
    # totals derived in test_params.py
    assert (data["total"], data["active"]) == (46_702_792_704, 12_879_925_248)
    assert data["components"] == {
        "embedding": 131_072_000,
        "attention": 32 * 41_943_040,
        "experts": 32 * (8 * 176_160_768 + 32_768),
        "norms": 32 * 8192 + 4096,
        "head": 131_072_000,
    }
    text = run("params", str(MODELS / "mixtral-8x7b.model")).stdout
    assert (
        text.splitlines()[0] == "Mixtral 8x7B (mixtral_8x7b): 46.7 B total, 12.9 B active per token"
    )
    assert text.splitlines()[-1].split() == ["total", "46,702,792,704", "12,879,925,248"]


def test_schema_is_json_schema_of_the_spec() -> None:
    r = run("schema")
    assert r.returncode == 0
    schema = json.loads(r.stdout)
    assert schema["title"] == "Spec"
    assert schema["properties"]["body"]["type"] == "array"


def test_check_hardware_files() -> None:
    r = run("check", "specs/hardware/mi300x.hw", "specs/hardware/h100.hw")
    assert r.returncode == 0
    assert r.stdout.splitlines() == [
        "ok  specs/hardware/mi300x.hw  mi300x  AMD Instinct MI300X (gfx942)",
        "ok  specs/hardware/h100.hw  h100  NVIDIA H100 SXM5 80GB (sm90)",
    ]
    bad = run("check", "wrong_unit.hw", cwd=FIXTURES / "invalid_hw")
    assert bad.returncode == 2
    assert bad.stderr.startswith("wrong_unit.hw:7:26: error: `memory_bandwidth` needs bandwidth")


def test_help_and_version_import_neither_pydantic_nor_lark() -> None:
    # issue 9: the commands import what they need; printing help loads no parser
    code = (
        "import sys\nfrom modelcost.cli import main\n"
        "for argv in (['--version'], ['--help'], ['compile', '--help']):\n"
        "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
        "print(sorted(m for m in ('pydantic', 'lark', 'jinja2') if m in sys.modules))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "[]"
