"""`kernel = flash | math` on attention, cross_attention and mla: the language, fmt,
the schema, the math SDPA's kernels (PyTorch's `_scaled_dot_product_attention_math`)
timed by the estimate, and the Markdown ops table's reason column."""

import json
import re
import time

import pytest
from conftest import FIXTURES, MODELS, run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from modelcost import parse_spec
from modelcost.estimate.estimate import estimate
from modelcost.estimate.kernel_rates import LAUNCH_S, matrix_rate, plan, tiles_for
from modelcost.ir.graph import Phase, Workload
from modelcost.language import spec as ir
from modelcost.language.fmt import format_source
from modelcost.perfmodel import SdpaOp
from modelcost.perfmodel.attention import math_kernels
from modelcost.roofline.compile import compile_report
from modelcost.targets.hardware import load_hardware

SPEC = FIXTURES / "valid" / "attention-kernels.model"
H100 = load_hardware("h100")


def _layers(spec: ir.Spec) -> list:
    out = []

    def walk(items) -> None:
        for x in items:
            if isinstance(x, ir.Repeat | ir.Stream):
                walk(x.body)
            else:
                out.append(x)

    walk(spec.body)
    return out


def test_every_attention_statement_takes_the_kernel_and_flash_is_the_default() -> None:
    spec = parse_spec(SPEC.read_text(encoding="utf-8"), str(SPEC))
    kinds = {
        type(x) for x in _layers(spec) if getattr(x, "kernel", None) is ir.AttentionKernel.math
    }
    assert kinds == {ir.Attention, ir.CrossAttention, ir.MLA}
    plain = parse_spec(SPEC.read_text(encoding="utf-8").replace(", kernel = math", ""))
    assert all(x.kernel is ir.AttentionKernel.flash for x in _layers(plain) if hasattr(x, "kernel"))


def test_every_sdpa_of_a_math_attention_says_so_in_every_phase() -> None:
    for phase in (Phase.prefill, Phase.decode, Phase.train):
        length = {"context": 2048} if phase is Phase.decode else {"seq": 2048}
        r = compile_report(SPEC, "h100", Workload(phase, 1, **length))
        sdpa = [o for o in r.ops if o.kind == "SDPA"]
        assert sdpa and all(o.shape["flash_impl"] is False for o in sdpa)
        assert all(o.shape_label.endswith(", math") for o in sdpa)


@pytest.mark.parametrize(
    ("arg", "message", "hint"),
    [
        ("maths", "unknown attention kernel `maths`", "did you mean `math`?"),
        ("3", "`kernel` of `attention` must be an attention kernel, got 3",
         "attention kernels: flash, math"),
        ("swiglu", "`kernel` of `attention` must be an attention kernel, got `swiglu`",
         "attention kernels: flash, math"),
    ],
)  # fmt: skip
def test_a_wrong_kernel_is_a_positioned_error(tmp_path, arg: str, message: str, hint: str) -> None:
    bad = tmp_path / "bad.model"
    bad.write_text(f"model a {{\n  d_model = 512\n  attention(8, kernel = {arg})\n}}\n")
    r = run_cli("check", str(bad))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"bad.model:3:25: error: {message}" in r.stderr
    assert f"hint: {hint}" in r.stderr


def test_fmt_writes_the_kernel_in_canonical_form() -> None:
    messy = (
        "model a {\n  d_model = 512\n"
        "  attention(8,kernel=math) ; mla(8, 64, 32, 16, 32,kernel=flash)\n}\n"
    )
    assert format_source(messy) == (
        "model a {\n  d_model = 512\n  attention(8, kernel = math)\n"
        "  mla(8, 64, 32, 16, 32, kernel = flash)\n}\n"
    )
    assert format_source(SPEC.read_text(encoding="utf-8")) == SPEC.read_text(encoding="utf-8")


def test_the_schema_describes_the_kernel_on_each_attention() -> None:
    r = run_cli("schema")
    defs = json.loads(r.stdout)["$defs"]
    assert defs["AttentionKernel"]["enum"] == ["flash", "math"]
    for node in ("Attention", "CrossAttention", "MLA"):
        kernel = defs[node]["properties"]["kernel"]
        assert kernel["$ref"] == "#/$defs/AttentionKernel" and kernel["default"] == "flash"


def test_the_layer_reference_names_the_kernel() -> None:
    # the generated reference (python -m modelcost.cli.reference) lists `kernel` with its
    # default under each attention kind
    page = (MODELS.parent.parent / "docs" / "reference" / "language.md").read_text()
    for kind in ("attention", "cross_attention", "mla"):
        section = page.split(f"## `{kind}`\n", 1)[1].split("\n## ", 1)[0]
        assert "| `kernel` | an attention kernel | `flash` |" in section


# ---------------------------------------------------------------- the math kernels


def test_math_kernels_by_hand_mha_not_causal() -> None:
    # B = 1, 2048 queries and keys, 16 heads of 64, bf16: Q, K, V and O are each
    # 2048·16·64 = 2,097,152 elements (4,194,304 B); the score matrix 16·2048² =
    # 67,108,864 elements (134,217,728 B). attention.cpp's math path: q·√s and k·√s
    # (read and write each), QKᵀ (Q, K read, scores written), softmax (scores read and
    # written), PV (scores, V read, O written); no GQA repeat, no mask
    op = SdpaOp(1, 2048, 16, 2048, 16, 64, 64, causal=False, flash_impl=False)
    qkvo, scores = 4_194_304, 134_217_728
    ks = math_kernels(op)
    assert [k.name for k in ks] == ["q·√scale", "k·√scale", "QKᵀ", "softmax", "PV"]
    assert [k.bytes for k in ks] == [2 * qkvo, 2 * qkvo, 2 * qkvo + scores, 2 * scores,
                                     scores + 2 * qkvo]  # fmt: skip
    assert [k.gemm for k in ks] == [None, None, (16, 2048, 2048, 64), None, (16, 2048, 64, 2048)]
    # the GEMMs' FLOPs are the whole rectangle: 2·16·2048²·(64 + 64) = the fused count here
    assert sum(k.flops for k in ks) == op.flops() == 17_179_869_184
    # on an H100 both GEMMs are memory-bound (AI ≈ 60 FLOP/B, far below the ridge), so
    # the estimate is every byte at the best published bandwidth and five launches
    e = estimate(op, op.flops(), op.bytes(), 0.0, H100)
    bw = H100.bandwidth("achievable")
    assert e.time_s == pytest.approx(570_425_344 / bw + 5 * 2e-6, rel=1e-12)
    assert "QKᵀ 44.8 µs (memory-bound), PV 44.8 µs (memory-bound)" in e.reason
    assert e.reason.startswith("math (PyTorch's composite SDPA): 5 kernels, the 67,108,864")


@pytest.mark.parametrize(
    ("causal", "window", "H_KV", "names"),
    [
        (False, 0, 8, ["q·√scale", "k·√scale", "QKᵀ", "softmax", "PV"]),
        (True, 0, 8, ["q·√scale", "k·√scale", "causal mask: ones", "causal mask: tril",
                      "causal mask: zeros_like", "causal mask: logical_not",
                      "causal mask: masked_fill_", "QKᵀ", "mask added", "softmax", "PV"]),
        (True, 512, 8, ["q·√scale", "k·√scale", "QKᵀ", "mask added", "softmax", "PV"]),
        (False, 0, 2, ["q·√scale", "K repeated to the query heads",
                       "V repeated to the query heads", "k·√scale", "QKᵀ", "softmax", "PV"]),
    ],
)  # fmt: skip
def test_the_math_path_runs_the_kernels_attention_cpp_runs(causal, window, H_KV, names) -> None:
    # is_causal builds its L × S mask every call; a window is the caller's mask, added;
    # GQA repeats K and V to the query heads first (repeat_interleave)
    op = SdpaOp(1, 1024, 8, 1024, H_KV, 64, 64, causal=causal, window=window, flash_impl=False)
    assert [k.name for k in math_kernels(op)] == names


def test_the_math_backward_is_autograds_over_the_composite() -> None:
    op = SdpaOp(1, 1024, 8, 1024, 2, 64, 64, causal=True, flash_impl=False)
    ks = math_kernels(op, backward=True)
    assert [k.name for k in ks] == [
        "dP = dO·Vᵀ", "dV = Pᵀ·dO", "softmax backward", "dQ = dS·K", "dK = dSᵀ·Q",
        "dQ·√scale", "dK·√scale", "dK summed over each group", "dV summed over each group",
    ]  # fmt: skip
    # four GEMMs over the whole 1024² rectangle of 8 heads, 64 deep: 4 · 2·8·1024²·64
    assert sum(k.flops for k in ks) == 4 * 2 * 8 * 1024 * 1024 * 64


@settings(max_examples=60, deadline=None)
@given(
    B=st.integers(1, 4),
    N_Q=st.integers(1, 600),
    extra=st.integers(0, 600),
    H_KV=st.sampled_from([1, 2, 4]),
    group=st.sampled_from([1, 2, 4]),
    d=st.sampled_from([64, 128]),
    causal=st.booleans(),
    window=st.sampled_from([0, 128]),
    pass_=st.sampled_from(["fwd", "bwd"]),
)
def test_the_fused_roofline_stays_a_bound_for_the_math_kernels(
    B, N_Q, extra, H_KV, group, d, causal, window, pass_
) -> None:
    # the roofline keeps the fused kernel's FLOPs and bytes (docs/conventions.md): the
    # math path does at least that work and moves at least those bytes, and its
    # estimate (a launch per kernel) is never below the roofline nor the flash estimate's
    # byte time
    op = SdpaOp(B, N_Q, H_KV * group, N_Q + extra, H_KV, d, d, causal=causal, window=window,
                flash_impl=False)  # fmt: skip
    ks = math_kernels(op, backward=pass_ == "bwd")
    nbytes = op.bytes() if pass_ == "fwd" else op.bytes_bwd()
    assert sum(k.bytes for k in ks) >= nbytes
    if pass_ == "fwd":
        assert sum(k.flops for k in ks) >= op.flops()
    roofline = nbytes / H100.bandwidth("datasheet")
    e = estimate(op, op.flops(), nbytes, roofline, H100, pass_)
    assert e.time_s >= roofline + LAUNCH_S
    assert e.time_s >= sum(k.bytes for k in ks) / H100.bandwidth("achievable")


def test_math_is_slower_than_flash_and_the_roofline_forward_does_not_move(tmp_path) -> None:
    # the roofline counts the fused kernel's FLOPs and bytes whichever kernel is stated;
    # the estimate of the math path (the score matrix through memory six times) is above
    # the flash kernel's for every SDPA of the spec
    flash = tmp_path / "flash.model"
    flash.write_text(SPEC.read_text(encoding="utf-8").replace(", kernel = math", ""))
    w = Workload(Phase.prefill, 1, 2048)
    m = {
        o.name: o
        for o in compile_report(SPEC, "h100", w, estimate="kernels").ops
        if o.kind == "SDPA"
    }
    f = {
        o.name: o
        for o in compile_report(flash, "h100", w, estimate="kernels").ops
        if o.kind == "SDPA"
    }
    assert m.keys() == f.keys() and len(m) == 4
    for name, o in m.items():
        assert (o.flops, o.bytes, o.time_s) == (f[name].flops, f[name].bytes, f[name].time_s)
        assert o.estimate_s > f[name].estimate_s


# ---------------------------------------------------------------- the Markdown ops table


def test_the_markdown_ops_table_shows_why(tmp_path) -> None:
    out = tmp_path / "r.md"
    r = run_cli("compile", str(SPEC), "--hw", "h100", "--estimate", "kernels", "--format", "md",
                "--charts", "none", "-o", str(out))  # fmt: skip
    assert r.returncode == 0, r.stderr
    text = out.read_text(encoding="utf-8")
    ops = text.split("### Ops", 1)[1].split("### Gluon kernels", 1)[0]
    header = next(x for x in ops.splitlines() if x.startswith("| op "))
    assert re.search(r"\| kernel +\| why \(estimate\) +\|$", header)
    j = run_cli("compile", str(SPEC), "--hw", "h100", "--estimate", "kernels", "--format", "json")
    report = json.loads(j.stdout)["reports"][0]
    sdpa = next(o for o in report["ops"] if o["name"] == "layers.0.attn.0.sdpa")
    row = next(x for x in ops.splitlines() if x.startswith("| layers.0.attn.0.sdpa "))
    # the reason as the JSON has it (md() escapes nothing in it: no `|*_<>[]`)
    assert row.rstrip().endswith(f"| {sdpa['estimate_reason']} |")
    plain = run_cli("compile", str(SPEC), "--hw", "h100", "--format", "md", "--charts", "none")
    assert "why (estimate)" not in plain.stdout


@settings(max_examples=40, deadline=None)
@given(
    batch=st.integers(1, 300),
    M=st.integers(1, 4096),
    N=st.integers(1, 4096),
    K=st.integers(1, 4096),
)
def test_a_batch_of_alike_rows_plans_as_its_copies(batch, M, N, K) -> None:
    # plan(rows, batch=b) is plan(rows repeated b times): the math path's batched GEMMs
    # (B · H_q members, all alike) pass one entry and the batch
    r = matrix_rate("gemm", SdpaOp(1, 1, 1, 1, 1, 64, 64, causal=False), H100, "fwd")
    ts = tiles_for(H100, r.kernel)
    assert plan((M,), N, K, r.flops, H100, ts, batch) == plan((M,) * batch, N, K, r.flops, H100, ts)


def test_a_math_attention_of_a_million_heads_is_answered_at_once(tmp_path) -> None:
    # 64 sequences × 2²⁰ heads: 2²⁶ batched-GEMM members, once a tuple of that many rows
    # (48 s); within the language's bounds, so answered in well under the 2 s promised
    spec = tmp_path / "wide.model"
    spec.write_text("model t {\n  d_model = 4Mi\n  attention(1Mi, kernel = math)\n}\n")
    t0 = time.perf_counter()
    r = compile_report(spec, "h100", Workload(Phase.prefill, 64, 1), estimate="kernels")
    assert time.perf_counter() - t0 < 2.0
    assert [o.kind for o in r.ops if o.estimate_s and o.kind == "SDPA"] == ["SDPA"]
