"""`modelcost compile`: every zoo spec × workload × shipped target gives a valid report;
the CLI prints it, writes it, and refuses bad requests with exit code 2."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import MODELS, ROOT, ZOO

from modelcost import SpecError, load_spec
from modelcost.ir.graph import Phase, Workload
from modelcost.ir.report import Report, ReportSet
from modelcost.lowering.validate import for_phase
from modelcost.render.formats import render_json
from modelcost.roofline.compile import compile_report
from modelcost.targets.hardware import load_hardware, shipped_hardware

ENCODERS = {"vit-l16", "bert-base-uncased"}  # no causal attention: no decode


@pytest.mark.parametrize("path", ZOO, ids=[p.stem for p in ZOO])
def test_every_spec_workload_and_target(path: Path) -> None:
    spec = load_spec(path)
    # GPT-2 and BERT have 1024 and 512 learned positions; ViT's length is its image's
    # Whisper's decoder 448; LLaVA's prompts carry an image's 576 tokens besides
    seq = {"gpt2": 1024, "bert-base-uncased": 512, "vit-l16": None,
           "whisper-large-v3": 448}.get(path.stem, 2048)  # fmt: skip
    joined = {"llava-1.5-7b": 576}.get(path.stem, 0)
    for hw_name in shipped_hardware():
        hw = load_hardware(hw_name)
        for phase in Phase:
            workload = for_phase(Workload(phase, 2, seq, min(seq or 1024, 1024) - 1))
            if phase is Phase.decode and path.stem in ENCODERS:
                with pytest.raises(SpecError, match="decode needs a causal decoder"):
                    compile_report(spec, hw, workload)
                continue
            report = compile_report(spec, hw, workload)
            text = render_json([report])
            again = ReportSet.model_validate_json(text)
            assert again.reports == (report,)
            # the report is built without validation (Frozen.trusted): validating it
            # changes nothing, not even an int where the schema says float
            assert render_json(list(again.reports)) == text
            assert Report.model_validate(report.model_dump()).model_dump_json() == (
                report.model_dump_json()
            )
            t = report.totals
            assert t.time_s > 0 and t.flops > 0 and t.bytes > 0
            assert t.per_token.tokens_per_s > 0
            assert len(report.ops) == len({o.name for o in report.ops})  # names are unique
            assert abs(sum(o.share for o in report.ops) - 1) < 1e-9
            assert all(o.time_s == max(o.compute_s, o.memory_s) for o in report.ops)
            # tokens per step are what the layers process: the rows of the first norm of
            # the main stream (an encoder's or tower's layers are named after it)
            norm = next(o for o in report.ops if o.kind == "Normalization" and o.layer == 0
                        and o.name.startswith("layers."))  # fmt: skip
            rows = norm.shape["num_elems"] // norm.shape["num_channels"]
            assert t.per_token.tokens_per_step == rows == report.workload.tokens
            expected = {
                Phase.decode: 2,
                Phase.prefill: 2 * ((seq or 197) + joined),
                Phase.train: 2 * ((seq or 197) + joined),
            }
            assert rows == expected[phase]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "modelcost", *args], cwd=ROOT, capture_output=True, text=True
    )


def test_the_issue_command_prints_a_documented_report() -> None:
    r = run("compile", "specs/models/llama3-70b.model", "--hw", "mi355x", "--phase", "decode",
            "--batch", "8", "--context", "4096", "--format", "json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    document = json.loads(r.stdout)
    # one layout whatever the number of phases (issue 8, item 10)
    assert set(document) == {"schema_version", "reports"} and document["schema_version"] == 7
    (data,) = document["reports"]
    report = Report.model_validate(data)
    assert set(data) == {"model", "hardware", "workload", "totals",
                         "layers", "kinds", "kernels", "ops", "notes"}  # fmt: skip
    assert set(data["totals"]) >= {"flops", "bytes", "time_s", "per_token", "memory"}
    q = next(o for o in data["ops"] if o["name"] == "layers.0.attn.q_proj")
    assert q["kind"] == "GEMM" and q["count"] == 80 and q["layer"] == 0
    assert next(o for o in data["ops"] if o["name"] == "lm_head")["layer"] is None
    assert q["shape"] == {"M": 8, "N": 8192, "K": 8192, "bias": False, "B": 1}
    assert set(q) >= {"name", "layer", "kind", "count", "shape", "dtype",
                      "flops", "bytes", "compute_s", "memory_s", "time_s", "bound"}  # fmt: skip
    sdpa = next(o for o in data["ops"] if o["kind"] == "SDPA")
    assert set(sdpa["shape"]) >= {"B", "N_Q", "H_Q", "N_KV", "H_KV", "d_h_qk", "d_h_v", "causal"}
    assert report.workload.phase == "decode" and report.hardware.name == "mi355x"


def test_output_file_text_format_and_several_phases(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    r = run("compile", "specs/models/gpt2.model", "--hw", "a100", "--phase", "prefill,decode",
            "--seq", "512", "--context", "512", "--format", "json", "-o", str(out))  # fmt: skip
    assert (r.returncode, r.stdout) == (0, "")
    data = json.loads(out.read_text())
    assert [x["workload"]["phase"] for x in data["reports"]] == ["prefill", "decode"]
    assert ReportSet.model_validate(data).schema_version == 7
    text = run("compile", "specs/models/gpt2.model", "--hw", "a100", "--seq", "512").stdout
    assert text.startswith("GPT-2 (124M) on NVIDIA A100 SXM4 80GB (datasheet peaks), prefill")


def test_same_input_same_bytes() -> None:
    args = ("compile", "specs/models/mixtral-8x7b.model", "--hw", "h200", "--format", "json")
    assert run(*args).stdout == run(*args).stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--hw", "mi300"), "--hw: error: unknown hardware `mi300`"),
        (("--hw", "mi300x", "--phase", "serve"), "unknown phase `serve`"),
        (("--hw", "mi300x", "--batch", "0"), "expected a positive integer, got 0"),
    ],
)
def test_bad_requests_exit_2(args, message) -> None:
    r = run("compile", str(MODELS / "llama3-8b.model"), *args)
    assert r.returncode == 2
    assert message in r.stderr
    assert "Traceback" not in r.stderr


def test_decode_of_an_encoder_is_refused() -> None:
    r = run("compile", "specs/models/vit-l16.model", "--hw", "mi300x", "--phase", "decode")
    assert r.returncode == 2
    assert r.stderr.startswith(
        "modelcost: error: decode needs a causal decoder, and `vit_l16` has no causal"
    )


def test_memory_warning_goes_to_stderr_and_exit_is_0() -> None:
    args = ("compile", "specs/models/llama3.1-405b.model", "--hw", "h100", "--phase", "decode")
    r = run(*args, "--format", "json")
    assert r.returncode == 0
    assert "modelcost: warning: needs" in r.stderr and "does not fit on one device" in r.stderr
    text = run(*args)  # the text summary carries it once, in its body
    assert text.returncode == 0 and text.stderr == ""
    assert text.stdout.count("does not fit on one device") == 1


def test_hw_commands() -> None:
    listing = run("hw", "list").stdout.splitlines()
    assert listing[0].split()[:3] == ["name", "title", "arch"]
    assert len(listing) == 2 + len(shipped_hardware())
    show = run("hw", "show", "mi300x").stdout
    assert show.splitlines()[0] == "AMD Instinct MI300X (mi300x, gfx942, AMD)"
    data = json.loads(run("hw", "show", "mi300x", "--format", "json").stdout)
    assert data["achievable"]["matrix"]["bf16"] == 781.9e12  # MAMF, ROCm 6.2 (mi300x.hw)
    assert run("hw", "show", "nope").returncode == 2


def test_report_schema_is_printed() -> None:
    schema = json.loads(run("schema", "--report").stdout)
    assert schema["title"] == "ReportSet"
    assert {"Report", "OpEntry"} <= set(schema["$defs"])


def test_trusted_construction_refuses_unknown_and_missing_fields() -> None:
    # Frozen.trusted skips validation, not the field list: a misspelt or forgotten
    # field is a programming error caught at once
    from modelcost.ir.report import Memory, PerToken

    with pytest.raises(
        TypeError, match=r"unknown \['tokens'\], missing \['tokens_per_s', 'tokens_per_s_device'\]"
    ):
        PerToken.trusted(tokens_per_step=1, ms_per_step=1.0, ms_per_token=1.0, tokens=3)
    m = Memory.trusted(
        weights=1.0, kv_cache=0.0, activations=2.0, total=3.0, capacity=4.0, fits=True
    )
    assert (m.gradients, m.optimizer_states, m.warning) == (0, 0, None)  # the defaults
    assert list(m.model_dump()) == list(Memory.model_fields)  # in field order
