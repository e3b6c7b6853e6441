"""benchmarks/accuracy.py: how published points become scores, on a few points (fast).

The figures themselves follow the estimate, which other work keeps changing, so no test
pins them here: tests/test_accuracy_gate.py holds them to no worse than docs/accuracy.md
publishes, and the page states the commit it was generated at. What is pinned here: each
score is exactly the public API's figure for the point's mapping, the published figure
is the one the source states, the bound check's direction, and that every point of the
data file is either mapped or skipped with a reason.
"""

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from conftest import MODELS, ROOT

import modelcost
from modelcost.estimate.measured import check
from modelcost.ir.graph import Parallel

_SPEC = importlib.util.spec_from_file_location("accuracy", ROOT / "benchmarks" / "accuracy.py")
assert _SPEC is not None and _SPEC.loader is not None
acc = importlib.util.module_from_spec(_SPEC)
sys.modules["accuracy"] = acc  # dataclasses look their module up there
_SPEC.loader.exec_module(acc)

DATA = json.loads(acc.DATA.read_text())
BY_ID = {p["id"]: p for p in DATA["points"]}
SOURCE_FIELDS = {"kind", "hardware", "model_or_shape", "conditions", "measured", "source", "id"}
# a GEMM (HipKittens), a 1-GPU throughput (TensorRT-LLM perf-overview), a multi-GPU latency
# (AMD's vLLM benchmark_latency), a kernel excluded by its file and an e2e point skipped
FEW = [1, 176, 244, 94, 257]


@pytest.fixture(scope="module")
def few():
    return acc.score([BY_ID[i] for i in FEW])


def test_the_few_points_are_scored_or_skipped_in_order(few) -> None:
    scored, skipped = few
    assert [(c.id, c.group) for c in scored] == [
        (1, acc.KERNEL), (176, acc.SINGLE), (244, acc.MULTI)]  # fmt: skip
    assert [(s.id, s.kind) for s in skipped] == [(94, "gemm"), (257, "e2e")]
    assert skipped[0].why == "16K result is a pathological kernel selection, not a hardware limit"
    assert skipped[1].why.startswith("ShareGPT prompts at 1 request/s")


def test_a_kernel_point_is_the_measured_check_of_its_shape(few) -> None:
    c = few[0][0]
    shapes, _ = acc.kernel_points()
    expected = check(shapes[1])
    # HipKittens' MI325X 1024³ BF16 GEMM: 60.2 TFLOPS at 2·M·N·K (measured-public.json id 1)
    assert c.measured == 2 * 1024**3 / 60.2e12 == expected.measured_s
    assert (c.estimate, c.bound, c.reason) == (expected.estimate_s, expected.roofline_s,
                                               expected.reason)  # fmt: skip
    assert c.is_time and c.unit == "s" and c.error == c.estimate / c.measured - 1


def _fp8(tmp_path: Path, base: str) -> Path:
    name = modelcost.load_spec(MODELS / f"{base}.model").name
    path = tmp_path / "q.model"
    path.write_text(f'import "{MODELS / (base + ".model")}"\nmodel q extends {name} {{\n'
                    "  recipe = fp8\n  kv_dtype = fp8_e4m3\n}\n")  # fmt: skip
    return path


def test_an_end_to_end_point_is_one_serve_call(few, tmp_path) -> None:
    c = few[0][1]
    # TensorRT-LLM perf-overview: Llama 3.1 8B FP8 on one H200, ISL 128, OSL 2048, 26,221
    # output tokens/s for the whole job (measured-public.json id 176), on the engine it ran
    s = modelcost.serve(_fp8(tmp_path, "llama3-8b"), "h200", 128, 2048,
                        engine=modelcost.Engine(name="trtllm"), estimate="kernels")  # fmt: skip
    assert (c.measured, c.estimate, c.bound) == (26221, s.output_tokens_per_s,
                                                 s.bound.output_tokens_per_s)  # fmt: skip
    assert not c.is_time and c.unit == "output tok/s"
    assert c.beaten_by == 26221 / s.bound.output_tokens_per_s - 1 <= 0
    assert c.reason.startswith(f"{s.engine}, concurrency {s.concurrency} ")


def test_a_latency_point_is_a_time_and_its_bound_is_the_faster(few) -> None:
    c = few[0][2]
    # AMD's vLLM benchmark_latency: Llama 3.1 70B FP8 on 8 MI300X, batch 1, 128 in, 2048
    # out, 15.882 s end to end (measured-public.json id 244)
    s = modelcost.serve(MODELS / "llama3-70b-fp8.model", "mi300x", 128, 2048, Parallel(tp=8),
                        concurrency=1, estimate="kernels")  # fmt: skip
    assert (c.measured, c.estimate, c.bound) == (15.882, s.latency_s, s.bound.latency_s)
    assert c.is_time and c.beaten_by == s.bound.latency_s / 15.882 - 1 <= 0


def test_a_training_point_is_one_compile_call() -> None:
    # the Llama 3 paper, Table 4: 405B on 8,192 H100s, TP 8, PP 16, DP 64 (FSDP), 8K
    # sequences, 32 a replica: BF16 MFU 43 % (measured-public.json id 1001)
    (c, fp8), _ = acc.score([BY_ID[1001], BY_ID[284]])
    par = Parallel(tp=8, sp=True, pp=16, vpp=8, dp=64, microbatches=32, zero=2)
    r = modelcost.compile_report(MODELS / "llama3.1-405b.model", "h100",
                                 modelcost.Workload("train", 64 * 32, 8192, parallel=par),
                                 estimate="kernels")  # fmt: skip
    assert (c.group, c.unit, c.is_time) == (acc.TRAINING, "MFU", False)
    assert (c.measured, c.estimate, c.bound) == (0.43, r.totals.mfu_estimate, r.totals.mfu_bound)
    assert c.beaten_by == 0.43 / r.totals.mfu_bound - 1 <= 0  # the bound holds
    assert r.totals.memory.fits  # as Meta ran it, without activation checkpointing
    # Megatron-Bridge's Llama 3 70B FP8-CS recipe on 64 H100s: 1,602 tokens/s per GPU
    # (measured-public.json id 284), against the estimate's at its step and the bound's
    assert (fp8.unit, fp8.measured) == ("tok/s/GPU", 1602)
    assert fp8.estimate < fp8.bound and fp8.beaten_by <= 0


def _point(measured: float, bound: float, is_time: bool, what: str = "x") -> object:
    return acc.Scored(7, acc.MULTI, "h100", what, "s" if is_time else "output tok/s",
                      measured, measured, bound, is_time, "why")  # fmt: skip


@pytest.mark.parametrize(("measured", "bound", "is_time", "past"), [
    (1.0, 0.8, True, False),  # a time above its bound: as promised
    (0.8, 1.0, True, True),  # a time below its bound beats it by 1.0/0.8 − 1 = 25 %
    (900.0, 1000.0, False, False),  # a rate under its bound
    (1100.0, 1000.0, False, True),  # a rate over its bound beats it by 10 %
])  # fmt: skip
def test_the_bound_check_reads_times_and_rates_each_their_way(measured, bound, is_time,
                                                             past) -> None:  # fmt: skip
    c = _point(measured, bound, is_time)
    assert (acc.beaten([c]) == [c]) is past
    line = acc.bound_line([c])
    if past:
        by = bound / measured - 1 if is_time else measured / bound - 1
        assert line == (f"**1 of 1 published measurements beat their roofline**, the most "
                        f"by {by:.1%} (point 7).")  # fmt: skip
    else:
        assert line == "No published measurement beats its roofline (1 points)."


def test_every_point_keeps_its_source_and_maps_or_says_why() -> None:
    # the whole data file, without running it: kernel points by id in the kernel file,
    # the rest a serve mapping whose figure is one the source publishes, or a skip
    shapes, excluded = acc.kernel_points()
    # the reference set's 198, the Llama 3 paper's three training points (1001-1003) and
    # five Megatron-Bridge 25.11 runs held back from the model (1004-1008), its 25.09
    # token-drop run of the same MoE layout (1009), three more Megatron-Bridge runs
    # (1010-1012: MXFP8, and the 25.09 FSDP one), two of AMD's on MI325X (1013-1014),
    # AMD's MLPerf Training v5.1 Llama 3.1 8B on MI355X and MI350X (1015-1016) and four
    # Megatron-Bridge Qwen3-30B-A3B runs on 8 B200 or GB200 (1017-1020)
    assert len(DATA["points"]) == len(BY_ID) == 218
    for p in DATA["points"]:
        assert set(p) >= SOURCE_FIELDS, p["id"]
        m = p.get("modelcost")
        if p["kind"] in ("gemm", "attention", "bandwidth"):
            assert m is None and (p["id"] in shapes) != (p["id"] in excluded), p["id"]
        elif "skip" in m:
            assert set(m) == {"skip"} and len(m["skip"]) > 20, p["id"]
        elif "train" in m:  # a published MFU or tokens/s per GPU, against the model's
            assert m["metric"] in ("mfu", "tokens_per_s_device"), p["id"]
            assert m["measured"] in p["measured"].values(), p["id"]
            # BF16, or one of training's FP8 recipes (the inference one not among them)
            assert m["train"]["recipe"] in (None, "fp8_cs", "fp8_ds", "mxfp8", "fp8_bs"), p["id"]
            assert m["train"].get("overlap", "none") in ("none", "megatron"), p["id"]
            assert m["train"].get("grads", "fp32") in ("fp32", "param"), p["id"]
            assert m["train"].get("offload", 0) in (0, 40), p["id"]  # the GB200 70B recipe's
            assert m["train"].get("moe_imbalance", 1.0) == 1.0, p["id"]  # capacity-padded
            assert (MODELS / f"{m['train']['spec']}.model").exists() and m["note"], p["id"]
        else:
            published = [v for v in p["measured"].values() if isinstance(v, int | float)]
            # as published, or a latency in ms given in s
            same = [v for v in published if m["measured"] in (v, pytest.approx(v / 1000))]
            assert same, p["id"]
            assert m["metric"] in acc.UNITS and (MODELS / f"{m['spec']}.model").exists()
            assert m["engine"] in {"tensorrt-llm", "vllm", "sglang"}, p["id"]
            assert m["note"] and m["hardware"] in {h.stem for h in MODELS.parent.glob(
                "hardware/*.hw")}, p["id"]  # fmt: skip


def test_the_chart_is_deterministic_and_escapes_text(few) -> None:
    training = acc.Scored(8, acc.TRAINING, "h100", "t", "MFU", 0.4, 0.45, 0.5, False, "why")
    scored = [*few[0], _point(2.0, 1.5, True, what="<b>&'\""), training]
    svg = acc.chart_svg(scored)
    assert svg == acc.chart_svg(scored) and svg.startswith("<svg ") and svg.endswith("</svg>\n")
    assert "<b>" not in svg and "&lt;b&gt;&amp;" in svg
    # one colour per group, in the legend and on the points; the ±25 % band
    for colour in acc.PALETTE[: len(acc.GROUPS)]:
        assert svg.count(f'fill="{colour}"') >= 2
    assert svg.count("<polygon ") == 1 and "±25 % of measured" in svg


def test_write_regenerates_the_page_and_chart_whole(tmp_path, monkeypatch, capsys) -> None:
    data = tmp_path / "few.json"
    data.write_text(json.dumps({"points": [BY_ID[i] for i in FEW]}))
    monkeypatch.setattr(acc, "DOC", tmp_path / "accuracy.md")
    monkeypatch.setattr(acc, "CHART", tmp_path / "accuracy.svg")
    monkeypatch.setattr(acc, "ROOT", tmp_path)
    monkeypatch.setattr(acc, "_commit", lambda: "abc1234567")
    assert acc.main([str(data), "--write"]) == 0
    page = (tmp_path / "accuracy.md").read_text()
    assert "at commit `abc1234567`" in page and "No published measurement beats" in page
    # point 1 is among the worst (all three are) and in the list of every point
    assert page.count("\n| 1    | kernel ") == 2 and "](accuracy.svg)" in page
    assert "## Skipped (2 points" in page
    assert (tmp_path / "accuracy.svg").read_text() == acc.chart_svg(acc.score(
        [BY_ID[i] for i in FEW])[0])  # fmt: skip
    assert sorted(p.name for p in tmp_path.iterdir()) == ["accuracy.md", "accuracy.svg",
                                                           "few.json"]  # fmt: skip
    # the few points make no curve (point 244's series needs 245 too): none written
    assert "wrote accuracy.md, accuracy.svg and 0 curves" in capsys.readouterr().out


def test_the_summary_has_a_row_for_every_end_to_end_point() -> None:
    # three invented points: a kernel 10 % slow, one GPU 20 % fast, multi-GPU 40 % fast
    # (time metrics: estimate / measured − 1); the end-to-end row is the two serving ones
    def pt(group: str, estimate: float) -> object:
        return acc.Scored(1, group, "h100", "x", "s", 1.0, estimate, 0.5, True, "why")

    rows = acc.summary([pt(acc.KERNEL, 1.1), pt(acc.SINGLE, 0.8), pt(acc.MULTI, 0.6)])
    by = {r[0]: r for r in rows}
    assert list(by) == [acc.KERNEL, acc.SINGLE, acc.MULTI, acc.E2E, "all"]
    # within ±25 %: the −20 % one of the two; median |error| of 20 % and 40 %: 30 %
    assert by[acc.E2E][1:4] == [2, "1/2 (50%)", "30.0%"]
    assert by["all"][1:4] == [3, "2/3 (67%)", "20.0%"]
    # an in-sample point (a figure was taken from it) is left out of every figure and
    # counted in the last column
    ins = acc.Scored(2, acc.KERNEL, "h100", "x", "s", 1.0, 1.0, 0.5, True, "why", ("a rate",))
    rows = acc.summary([pt(acc.KERNEL, 1.1), ins])
    assert rows[0][:4] == [acc.KERNEL, 1, "1/1 (100%)", "10.0%"] and rows[0][-1] == 1


def test_serving_points_by_cluster() -> None:
    # invented: two NVIDIA dense fp8 vLLM points 10 % and 30 % fast, one AMD MoE bf16
    # TensorRT-LLM point 20 % slow (time metrics: estimate / measured − 1), an in-sample
    # serving point and a training point, both left out
    def pt(estimate: float, cluster: tuple[str, ...], built: tuple[str, ...] = ()) -> object:
        return acc.Scored(1, acc.MULTI, "h100", "x", "s", 1.0, estimate, 0.5, True, "why",
                          built, cluster)  # fmt: skip

    nv, amd = ("NVIDIA", "dense", "fp8", "vLLM"), ("AMD", "MoE", "bf16", "TensorRT-LLM")
    training = acc.Scored(2, acc.TRAINING, "h100", "t", "MFU", 0.4, 0.5, 0.6, False, "why")
    scored = [pt(0.9, nv), pt(0.7, nv), pt(1.2, amd), pt(1.0, amd, ("a rate",)), training]
    by = acc.by_cluster(scored)
    assert list(by) == ["vendor", "model", "precision", "engine"]
    # NVIDIA: 1 of 2 within ±25 %, median of 10 % and 30 %: 20 %; AMD: its one point
    assert by["vendor"] == [["NVIDIA", 2, "1/2 (50%)", "20.0%", 0], ["AMD", 1, "1/1 (100%)",
                                                                      "20.0%", 0]]  # fmt: skip
    assert [r[0] for r in by["engine"]] == ["vLLM", "TensorRT-LLM"]


def test_a_serving_points_cluster_is_read_off_its_mapping() -> None:
    # 176: Llama 3.1 8B FP8 on one H200 with TensorRT-LLM; 226: Llama 3.1 70B FP8 on 8
    # MI300X with vLLM; 203: DeepSeek-R1 (fewer active parameters than total) in block FP8
    assert acc.cluster_of(BY_ID[176]["modelcost"]) == ("NVIDIA", "dense", "fp8", "TensorRT-LLM")
    assert acc.cluster_of(BY_ID[226]["modelcost"]) == ("AMD", "dense", "fp8", "vLLM")
    assert acc.cluster_of(BY_ID[203]["modelcost"]) == ("NVIDIA", "MoE", "fp8_block",
                                                       "TensorRT-LLM")  # fmt: skip


def test_published_series_are_the_points_alike_but_for_their_concurrency() -> None:
    # the data's curves: Azure's 70B on 8 H100 at 16 and 64 and on 8 H200 at 16 and 32;
    # AMD's 70B FP8 latency on 8 MI300X at 1 and 2; Oracle's 405B at 1, 4, 64 and 256
    assert [[p["id"] for p in ps] for ps in acc.series(DATA["points"])] == [
        [212, 214], [217, 218], [244, 245], [247, 248, 250, 251]]  # fmt: skip


def test_a_curve_is_serve_at_each_concurrency_as_its_points_are_scored(tmp_path) -> None:
    ps = acc.series(DATA["points"])[1]  # TensorRT-LLM 70B on 8 H200 at 16 and 32
    cv = acc.curve(ps, tmp_path)
    assert [c for c, _, _ in cv.predicted] == [16, 32] and cv.name == "accuracy-curve-217.svg"
    scored, _ = acc.score(ps)
    assert [(c, e) for c, e, _ in cv.predicted] == [(16, scored[0].estimate),
                                                    (32, scored[1].estimate)]  # fmt: skip
    assert [(c, v) for c, v, _ in cv.measured] == [(16, 647.78), (32, 861.77)]
    # between the measured concurrencies, every power of two: Oracle's 1 … 256
    oracle = acc.curve(acc.series(DATA["points"])[3], tmp_path)
    assert [c for c, _, _ in oracle.predicted] == [1, 2, 4, 8, 16, 32, 64, 128, 256]


def test_a_curve_chart_is_deterministic_and_escapes_its_title() -> None:
    cv = acc.Curve("<b>&'\"", "s<&", ("a source",), ((1, 2.0, 7), (4, 3.0, 8)),
                   ((1, 1.8, 1.0), (2, 2.1, 1.1), (4, 2.9, 1.2)))  # fmt: skip
    svg = acc.curve_svg(cv)
    assert svg.startswith("<svg ") and svg.endswith("</svg>\n")
    # the title and the unit escaped wherever they appear
    assert "<b>" not in svg and "&lt;b&gt;&amp;" in svg and "s<&" not in svg and "s&lt;&amp;" in svg
    assert svg.count("<circle ") == 2 and svg.count("<polyline ") == 2
    # y ticks at a round step from 0: the top is 3.0 × 1.08 = 3.24, a step of 1
    assert [acc._ticks(3.24), acc._ticks(19.2), acc._ticks(1.08)] == [
        [0, 1, 2, 3], [0, 5, 10, 15], [0.0, 0.5, 1.0]]  # fmt: skip


def test_every_published_training_recipe_fits_the_part_it_ran_on(tmp_path) -> None:
    # issue 33 item 2: a recipe that ran on a part fits it. Each training point's layout,
    # as its source ran it (benchmarks/data/measured-public.json), compiled with the
    # accuracy script's own mapping: none is declared not to fit (point 1008, Megatron-
    # Bridge's Qwen3-30B-A3B FP8-CS on 16 H100s, needed 80.2 GiB of 79.6 before the MoE
    # combine stopped keeping the experts' outputs, as Megatron-Core 0.13+ does; 68.4 now)
    trained = [p for p in DATA["points"] if "train" in p.get("modelcost", {})]
    assert len(trained) == 26  # every training point the language expresses
    refused = [
        (p["id"], s.reason.split("modelcost says it does not fit: ")[-1])
        for p in trained
        if "does not fit" in (s := acc.score_training(p, tmp_path)).reason
    ]
    assert refused == []
