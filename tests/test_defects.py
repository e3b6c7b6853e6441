"""Regression tests for the defects of issue 8 (wrong numbers, escapes, hostile input).

Each test names the item it guards; each failed before its fix.
"""

import os
import stat
import subprocess
import threading
from pathlib import Path

import pytest
from conftest import MODELS, ROOT, run_cli

from modelcost import SpecError, load_spec, parse_spec
from modelcost.ir.graph import Phase, Workload
from modelcost.roofline.compile import compile_report
from modelcost.targets.hardware import load_hardware

run = run_cli


# ---- 1. encoders and vision models run at their image's token count


def test_vit_tokens_per_step_come_from_the_image() -> None:
    spec = load_spec(MODELS / "vit-l16.model")
    r = compile_report(spec, load_hardware("h200"), Workload(Phase.prefill, 8))
    # 224/16 = 14, 14² = 196 patches + 1 class token = 197 tokens per image, × batch 8
    assert r.totals.per_token.tokens_per_step == 1_576
    assert (r.workload.seq, r.workload.tokens, r.workload.label) == (197, 1_576, "seq 197")
    assert r.totals.per_token.tokens_per_s == pytest.approx(1_576 / r.totals.time_s)
    # bidirectional attention: no KV cache, no cache writes
    assert r.totals.memory.kv_cache == 0
    assert not any("kv_cache_write" in o.name for o in r.ops)


def test_vit_refuses_a_seq_it_cannot_run() -> None:
    r = run("compile", "specs/models/vit-l16.model", "--hw", "h200", "--seq", "4096")
    assert r.returncode == 2
    assert "takes its sequence length from its image: 197 tokens, not seq 4096" in r.stderr
    assert "Traceback" not in r.stderr


# ---- 2. --only that matches nothing


@pytest.mark.parametrize("fmt", ["text", "json", "md", "html"])
def test_only_matching_nothing_is_exit_2_naming_the_kinds(fmt: str) -> None:
    r = run("compile", "specs/models/gpt2.model", "--hw", "h100", "--seq", "128",
            "--only", "FOO", "--format", fmt)  # fmt: skip
    assert r.returncode == 2, r.stdout
    assert r.stdout == ""
    assert "--only names `FOO`, which matches no op" in r.stderr
    assert "kinds present: BinaryElementwise, Embedding, GEMM," in r.stderr


def test_only_matches_case_insensitively() -> None:
    spec = load_spec(MODELS / "llama3-8b.model")
    hw = load_hardware("h100")
    w = Workload(Phase.decode, 1, context=1024)
    lower_case = compile_report(spec, hw, w, only=frozenset({"gemm", "sdpa"}))
    exact = compile_report(spec, hw, w, only=frozenset({"GEMM", "SDPA"}))
    assert lower_case == exact
    assert {o.kind for o in exact.ops} == {"GEMM", "SDPA"}


# ---- 6. decode has no logits setting; an untitled child is not its parent


def test_decode_reports_no_logits_setting() -> None:
    spec = load_spec(MODELS / "llama3-8b.model")
    hw = load_hardware("h100")
    decode = compile_report(spec, hw, Workload(Phase.decode, 1, logits="last"))
    prefill = compile_report(spec, hw, Workload(Phase.prefill, 1, logits="last"))
    assert decode.workload.logits is None  # one token's logits per sequence, always
    assert prefill.workload.logits == "last"


def test_untitled_child_is_labelled_by_its_own_name() -> None:
    spec = parse_spec(
        'model base { title = "Base model"; d_model = 8; rmsnorm }\n'
        "model child extends base { d_model = 16 }\n",
        model="child",
    )
    assert spec.title == "child"
    titled = parse_spec(
        'model base { title = "Base model"; d_model = 8; rmsnorm }\n'
        'model child extends base { title = "Child"; d_model = 16 }\n',
        model="child",
    )
    assert titled.title == "Child"


def test_default_workload_lengths_are_the_cli_defaults() -> None:
    """11. `Workload(Phase.decode, 8)` runs at context 2048, like the CLI."""
    spec = load_spec(MODELS / "llama3-8b.model")
    r = compile_report(spec, load_hardware("h100"), Workload(Phase.decode, 8))
    assert (r.workload.context, r.workload.label) == (2048, "context 2048")
    p = compile_report(spec, load_hardware("h100"), Workload("prefill"))
    assert (p.workload.seq, p.workload.tokens) == (2048, 2048)


def test_spec_error_for_bad_workload_values() -> None:
    with pytest.raises(ValueError, match="unknown phase 'serve'"):
        Workload("serve", 1)
    with pytest.raises(ValueError, match="batch must be a positive integer"):
        Workload("decode", 0)


# ---- 3. DeepSeek-V3's router: sigmoid scores, group-limited top-k, correction bias


def test_deepseek_v3_router_is_sigmoid_group_limited_with_a_correction_bias() -> None:
    from modelcost.lowering.lower import lower

    g = lower(load_spec(MODELS / "deepseek-v3.model"), Workload(Phase.decode, 1))
    nodes = {n.name: n.op for n in g.nodes}
    routing = nodes["layers.3.moe.routing"]
    assert (routing.scoring, routing.groups, routing.groups_kept) == ("sigmoid", 8, 4)
    assert routing.correction_bias
    # the correction bias selects; it is not a bias on the router's logits
    assert nodes["layers.3.moe.router"].bias is False
    # per token, E=256, G=8, g=4, k=8: sigmoid 4E = 1024, bias E = 256,
    # groups 2E + G + gG + E = 512 + 8 + 32 + 256 = 808, top-k kE = 2048, renorm 2k = 16
    assert routing.flops() == 1024 + 256 + 808 + 2048 + 16 == 4152
    # logits 256 bf16 + the 256 fp32 biases + 8 fp32 weights and 8 int32 ids
    assert routing.bytes() == 256 * 2 + 256 * 4 + 8 * 8
    # one shared expert of width 2048: shared_d_ff is one expert's width
    assert nodes["layers.3.moe.shared.gate_proj"].N == 2048


def test_shared_d_ff_is_one_shared_experts_width() -> None:
    spec = parse_spec(
        "model m { d_model = 64\n  moe(8, 2, 32, shared_experts = 2, shared_d_ff = 48) }\n"
    )
    from modelcost.lowering.params import count_params

    # 8 experts × 3·64·32 + 2 shared × 3·64·48 + router 64·8
    assert count_params(spec).total == 8 * 6144 + 2 * 9216 + 512


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ("groups = 3", "groups = 3 does not divide experts = 8"),
        ("groups = 4, groups_kept = 5", "groups_kept = 5 is larger than groups = 4"),
        ("groups = 4, groups_kept = 1", "top_k = 4 is more than the 2 experts of 1 kept"),
        ("router = softmin", "unknown router function `softmin`"),
    ],
)
def test_bad_router_arguments_are_positioned_errors(args: str, message: str) -> None:
    with pytest.raises(SpecError, match=message) as info:
        parse_spec(f"model m {{ d_model = 64\n  moe(8, 4, 32, {args}) }}\n")
    assert info.value.line == 2


# ---- 4. a fused gate/up MLP is one GEMM with N = 2·d_ff


def test_fused_gate_up_is_one_gemm() -> None:
    from modelcost.lowering.lower import lower

    text = "model m {{ d_model = 3072; vocab = 32064\n  embed(vocab)\n  mlp(8192{}) }}\n"
    fused = lower(parse_spec(text.format(", fused_gate_up = true")), Workload("prefill", 1, 16))
    plain = lower(parse_spec(text.format("")), Workload("prefill", 1, 16))
    gemms = {n.name: (n.op.M, n.op.N, n.op.K) for n in fused.nodes if n.op.kind == "GEMM"}
    # Phi-3-mini: gate_up_proj 3072 → 2·8192, down_proj 8192 → 3072
    assert gemms == {"mlp.gate_up_proj": (16, 16_384, 3072), "mlp.down_proj": (16, 3072, 8192)}
    # the same FLOPs as gate and up apart; the input is read once instead of twice
    f = sum(n.op.flops() for n in fused.nodes if n.op.kind == "GEMM")
    p = sum(n.op.flops() for n in plain.nodes if n.op.kind == "GEMM")
    assert f == p
    fb = sum(n.op.bytes() for n in fused.nodes if n.op.kind == "GEMM")
    pb = sum(n.op.bytes() for n in plain.nodes if n.op.kind == "GEMM")
    assert pb - fb == 16 * 3072 * 2  # one read of the bf16 input (x: 16 × 3072) saved
    with pytest.raises(SpecError, match="fused_gate_up needs a gated activation"):
        parse_spec("model m { d_model = 8\n  mlp(16, act = gelu, fused_gate_up = true) }\n")


# ---- 9. writing files like a shell redirect

SMALL = ("compile", "specs/models/gpt2.model", "--hw", "h100", "--seq", "64", "--format", "json")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_new_output_files_get_the_usual_mode(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    assert run(*SMALL, "-o", str(out)).returncode == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~_umask()  # not mkstemp's 0600


def test_existing_files_keep_their_mode(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    out.write_text("old")
    out.chmod(0o640)
    assert run(*SMALL, "-o", str(out)).returncode == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o640
    assert out.read_text().startswith("{")
    spec = tmp_path / "messy.model"
    spec.write_text("model m { d_model=8; rmsnorm() }\n")
    spec.chmod(0o604)
    assert run("fmt", "--write", str(spec)).returncode == 0
    assert stat.S_IMODE(spec.stat().st_mode) == 0o604
    assert spec.read_text() == "model m {\n  d_model = 8\n  rmsnorm\n}\n"


def test_a_symlink_is_written_through(tmp_path: Path) -> None:
    target = tmp_path / "real.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    assert run(*SMALL, "-o", str(link)).returncode == 0
    assert link.is_symlink()
    assert target.read_text().startswith("{")


def test_a_fifo_target_is_written_to_directly(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    r = run(*SMALL, "-o", str(fifo))
    reader.join(timeout=30)
    assert r.returncode == 0, r.stderr
    assert stat.S_ISFIFO(fifo.stat().st_mode)  # still a FIFO, not replaced by a file
    assert got and got[0].startswith(b"{")


def test_dash_is_standard_output(tmp_path: Path) -> None:
    spec = ROOT / "specs" / "models" / "gpt2.model"
    r = run("compile", str(spec), "--hw", "h100", "--seq", "64", "-o", "-", cwd=tmp_path)
    assert r.returncode == 0
    assert r.stdout.startswith("GPT-2")
    assert not (tmp_path / "-").exists()


# ---- 13, 15. reading: regular files only, bounded, UTF-8 with a position


def test_a_fifo_spec_is_refused_without_waiting(tmp_path: Path) -> None:
    fifo = tmp_path / "spec.model"
    os.mkfifo(fifo)
    r = run("check", str(fifo))  # would hang forever reading it (timeout 60 s)
    assert r.returncode == 2
    assert r.stderr.strip() == f"{fifo}: error: cannot read file: it is a FIFO, not a regular file"


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_devices_are_refused(tmp_path: Path, device: str) -> None:
    spec = tmp_path / "m.model"
    spec.write_text(f'import "{device}"\nmodel m {{ d_model = 8\n  rmsnorm }}\n')
    r = run("check", str(spec))
    assert r.returncode == 2
    assert f"{spec}:1:1: error: cannot read `{device}`: it is a device" in r.stderr
    r = run(*SMALL[:2], "--hw", device)
    assert r.returncode == 2
    assert f"{device}: error: cannot read file: it is a device, not a regular file" in r.stderr


def test_a_directory_and_a_symlink_loop_are_clear_errors(tmp_path: Path) -> None:
    (tmp_path / "a.model").symlink_to(tmp_path / "b.model")
    (tmp_path / "b.model").symlink_to(tmp_path / "a.model")
    r = run("check", str(tmp_path / "a.model"))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "symlink loop" in r.stderr or "Too many levels of symbolic links" in r.stderr
    spec = tmp_path / "m.model"
    spec.write_text('import "a.model"\nmodel m { d_model = 8\n  rmsnorm }\n')
    r = run("check", str(spec))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"{spec}:1:1: error: cannot read `{tmp_path / 'a.model'}`" in r.stderr
    r = run("check", str(tmp_path))
    assert r.returncode == 2
    assert "it is a directory, not a regular file" in r.stderr


def test_the_size_limit_is_checked_before_reading(tmp_path: Path) -> None:
    big = tmp_path / "big.model"
    big.write_bytes(b"#" * 1_000_001)
    with pytest.raises(SpecError, match=r"file is too large \(1,000,001 bytes; the limit is"):
        load_spec(big)


def test_invalid_utf8_is_positioned_at_the_first_bad_byte(tmp_path: Path) -> None:
    bad = tmp_path / "bad.model"
    bad.write_bytes(b"model m {\n  d_model = 8 # na\xefve \xff\n  rmsnorm\n}\n")
    r = run("check", str(bad))
    assert r.returncode == 2
    assert r.stderr.splitlines()[0] == (
        f"{bad}:2:19: error: invalid UTF-8: byte 0xef cannot be decoded"
    )
    hw = tmp_path / "bad.hw"
    hw.write_bytes(b'hardware x {\n  title = "\xc3"\n}\n')
    with pytest.raises(SpecError) as info:
        load_hardware(str(hw))
    assert (info.value.line, info.value.column) == (2, 12)


# ---- 16. hardware figures finite and positive; --fail-above finite and ≥ 0
# (the hardware cases are fixtures: tests/fixtures/invalid_hw/{infinite_figure,
# vanishing_figure,huge_exponent,zero_compute_units}.hw)


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "x"])
def test_fail_above_must_be_a_finite_percentage(value: str) -> None:
    r = run("diff", "specs/models/gpt2.model", "specs/models/gpt2.model", "--hw", "h100",
            "--seq", "64", "--fail-above", value)  # fmt: skip
    assert r.returncode == 2
    assert "argument --fail-above: expected a" in r.stderr


# ---- 8. site: distinct pages, real targets, never overwriting a user's index


def _site(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return run("site", *args, "--seq", "64", "--context", "64", cwd=cwd)


def test_site_refuses_two_specs_with_one_stem(tmp_path: Path) -> None:
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "gpt2.model").write_text((MODELS / "gpt2.model").read_text())
    r = _site(str(tmp_path / "a/gpt2.model"), str(tmp_path / "b/gpt2.model"), "--hw", "h100",
              "-o", str(tmp_path / "site"))  # fmt: skip
    assert r.returncode == 2
    assert "two specs are both named `gpt2`" in r.stderr
    assert not (tmp_path / "site").exists()  # nothing half-written


@pytest.mark.parametrize("hw", [",", " , ", ""])
def test_site_refuses_an_empty_target_list(tmp_path: Path, hw: str) -> None:
    r = _site("specs/models/gpt2.model", "--hw", hw, "-o", str(tmp_path / "site"))
    assert r.returncode == 2
    assert "--hw names no target" in r.stderr


def test_site_keeps_a_users_index_unless_forced(tmp_path: Path) -> None:
    out = tmp_path / "docs"
    out.mkdir()
    (out / "index.md").write_text("# My docs\n")
    r = _site("specs/models/gpt2.model", "--hw", "h100", "-o", str(out))
    assert r.returncode == 2
    assert "would overwrite files that modelcost site did not write: index.md" in r.stderr
    assert (out / "index.md").read_text() == "# My docs\n"
    assert not (out / "gpt2-h100.md").exists()
    assert (
        _site("specs/models/gpt2.model", "--hw", "h100", "-o", str(out), "--force").returncode == 0
    )
    # its own files it replaces on the next run, and they get the usual mode
    assert _site("specs/models/gpt2.model", "--hw", "h100", "-o", str(out)).returncode == 0
    page = out / "gpt2-h100.html"
    assert stat.S_IMODE(page.stat().st_mode) == 0o666 & ~_umask()


def test_site_links_are_percent_encoded(tmp_path: Path) -> None:
    spec = tmp_path / "my model (v2).model"
    spec.write_text((MODELS / "gpt2.model").read_text())
    out = tmp_path / "site"
    assert _site(str(spec), "--hw", "h100", "-o", str(out)).returncode == 0
    index = (out / "index.md").read_text()
    assert "(my%20model%20%28v2%29-h100.md)" in index
    assert (out / "my model (v2)-h100.md").exists()
    assert 'href="my%20model%20%28v2%29-h100.html"' in (out / "index.html").read_text()


# ---- 10. one JSON layout, and the schema says exactly it


def test_json_layout_is_the_schema_for_one_phase_and_several() -> None:
    import json

    schema = json.loads(run("schema", "--report").stdout)
    assert schema["title"] == "ReportSet"
    assert set(schema["required"]) == {"reports"}
    assert set(schema["properties"]) == {"schema_version", "reports"}
    for phases, lengths in (
        ("decode", ("--context", "64")),
        ("prefill,decode,train", ("--seq", "64", "--context", "64")),
    ):
        r = run("compile", "specs/models/gpt2.model", "--hw", "h100", *lengths,
                "--phase", phases, "--format", "json")  # fmt: skip
        doc = json.loads(r.stdout)
        assert set(doc) == {"schema_version", "reports"}
        assert len(doc["reports"]) == len(phases.split(","))
        report_schema = schema["$defs"]["Report"]
        for rep in doc["reports"]:
            assert set(rep) == set(report_schema["properties"])


# ---- 11. the Python API: one set of defaults, names for phases and targets, render


def test_python_api_takes_names_and_renders() -> None:
    import modelcost as mc

    r = mc.compile_report(MODELS / "llama3-8b.model", "h100", mc.Workload("decode", 8))
    assert (r.hardware.name, r.workload.phase, r.workload.context) == ("h100", "decode", 2048)
    same = mc.compile_report(load_spec(MODELS / "llama3-8b.model"), load_hardware("h100"),
                             Workload(Phase.decode, 8, context=2048))  # fmt: skip
    assert r == same
    assert mc.compile_report(MODELS / "llama3-8b.model", "h100", "decode").workload.batch == 1
    assert mc.render(r, "text") == mc.render([r], "text")
    assert mc.render(r, "json").startswith('{\n  "schema_version": 7,')
    assert r._repr_html_() == mc.render(r, "html")
    assert r._repr_markdown_() == mc.render(r, "md")
    with pytest.raises(ValueError, match="unknown format 'pdf'"):
        mc.render(r, "pdf")


# ---- 12. human units: parameters in B/M, short times in µs, ASCII minus


def test_human_units() -> None:
    from modelcost.render.units import count, duration

    assert (count(8_030_261_248), count(124_439_808), count(1_500)) == ("8.03 B", "124 M", "1.5 K")
    assert (duration(0.026359), duration(0.00084012), duration(1.5)) == (
        "26.359 ms", "840.12 µs", "1.500 s",
    )  # fmt: skip
    spec = load_spec(MODELS / "vit-l16.model")
    r = compile_report(spec, load_hardware("h200"), Workload(Phase.prefill, 8))
    from modelcost.render.text import render_text

    text = render_text([r])
    per_token = next(line for line in text.splitlines() if line.startswith("per token"))
    assert per_token.endswith(" µs") and "0.0008" not in per_token


def test_negative_changes_use_ascii_minus(tmp_path: Path) -> None:
    r = run("diff", "specs/models/llama3-70b.model", "specs/models/llama3-8b.model",
            "--hw", "mi355x", "--format", "md")  # fmt: skip
    assert r.returncode == 0
    assert "\u2212" not in r.stdout  # no U+2212 MINUS SIGN: programs read these numbers
    assert "| -" in r.stdout or " -" in r.stdout
    index = _site("specs/models/gpt2.model", "--hw", "h100", "-o", str(tmp_path / "s"))
    assert index.returncode == 0
    text = (tmp_path / "s" / "index.md").read_text()
    assert "124 M" in text and "124 G" not in text
