"""`modelcost train`: the training layouts of N devices, searched as Megatron-LM's recipes
choose among them, each priced as `compile` prices it (issue 33, item 4)."""

from __future__ import annotations

import json

import pytest
from conftest import MODELS, run_cli

from modelcost import load_spec
from modelcost.analyses.training import candidate_layouts, search_training
from modelcost.estimate.costing import costing
from modelcost.ir.graph import Parallel, Phase, Workload
from modelcost.roofline.compile import compile_totals
from modelcost.targets.hardware import load_hardware

LLAMA70 = load_spec(MODELS / "llama3-70b.model")
H100 = load_hardware("h100")


@pytest.fixture(scope="module")
def found():
    # NVIDIA's Megatron-Bridge Llama 3 70B question: 64 H100s, global batch 128, seq 8192,
    # micro-batch 1 (docs/performance-summary.md, commit 00b7660b)
    return search_training(LLAMA70, H100, 64, 128, 8192, (1,), estimate="kernels")


def test_every_layout_tried_uses_the_devices_and_splits_the_batch() -> None:
    layouts = list(candidate_layouts(64, 128, H100.scaleup_domain, (1, 2), False, "none"))
    assert len(layouts) == len(set(layouts))
    for par in layouts:
        assert par.devices == par.tp * par.cp * par.pp * par.dp == 64
        assert par.tp <= 8 and par.sp == (par.tp > 1)  # tp within the NVLink domain
        assert 128 % (par.dp * par.microbatches) == 0  # whole micro-batches of 1 or 2
        assert par.zero == (1 if par.dp > 1 else 0)  # the distributed optimizer
        if par.vpp > 1:  # Megatron-LM's interleaving: pp > 2, m a multiple of pp
            assert par.pp > 2 and par.microbatches % par.pp == 0
    # tp 4, pp 8, vpp 5, dp 2 at micro-batch 1 (64 microbatches): NVIDIA's recipe
    recipe = Parallel(tp=4, sp=True, dp=2, pp=8, vpp=5, microbatches=64, zero=1)
    assert recipe in layouts


def test_the_layouts_kept_fit_best_first_as_compile_prices_them(found) -> None:
    # tp = 2^a, cp = 2^b (a, b ≤ 3), pp = 2^c with a + b + c ≤ 6: 64 layouts of 64
    # devices (Σ over a, b of 7 − a − b); with 64/dp microbatches (a multiple of pp)
    # those with pp 4 (13 of them: a + b ≤ 4) also at vpp 2, 4, 5 and 10, those with pp 8
    # (10: a + b ≤ 3) at vpp 2, 5 and 10, those with pp 16 (6) at vpp 5: the vpp of
    # VPP whose pp·vpp chunks split 80 layers (or 82): 64 + 52 + 30 + 6 = 152
    assert found.tried == 152
    assert 0 < len(found.layouts) < found.tried
    ranks = [r.estimate_tokens_per_s_device for r in found.layouts]
    assert ranks == sorted(ranks, reverse=True)
    how = costing(estimate="kernels")
    for row in (found.layouts[0], found.layouts[-1]):
        assert row.memory_bytes <= row.capacity_bytes == H100.capacity
        par = Parallel(tp=row.tp, sp=row.tp > 1, cp=row.cp, pp=row.pp, vpp=row.vpp, dp=row.dp,
                       ep=row.ep, microbatches=row.microbatches, zero=row.zero,
                       recompute=row.recompute)  # fmt: skip
        assert par.label == row.layout  # compile's flags for the row
        _, tot = compile_totals(LLAMA70, H100, Workload(Phase.train, 128, 8192, parallel=par),
                                how)  # fmt: skip
        assert (tot.time_s, tot.estimate_s) == (row.step_s, row.estimate_s)
        assert row.micro_batch * row.dp * row.microbatches == 128


def test_nvidias_recipe_is_among_the_layouts_that_fit(found) -> None:
    (recipe,) = [r for r in found.layouts if r.layout == "tp 4, sp, dp 2, pp 8, vpp 5, "
                 "64 microbatches, zero 1"]  # fmt: skip
    assert recipe.recompute == "none"  # as the recipe runs: no recomputation needed
    assert round(recipe.memory_bytes / 2**30, 1) == 77.5  # test_training_layouts


def test_what_was_not_kept_is_counted_by_reason(found) -> None:
    # Llama 3 70B: every layout tried can run it (no vpp that does not split the layers,
    # no more stages than layers is tried), some fit no device
    assert found.refused == ()
    assert found.tried == len(found.layouts) + found.too_big and found.too_big > 0
    # Mixtral 8x7B's 8 experts: ep 16 and more cannot split them, counted by reason
    mixtral = search_training(MODELS / "mixtral-8x7b.model", "mi300x", 64, 256, 4096, (1,))
    said = "--ep N does not divide the N experts of `moe` of `mixtral_8x7b`"
    assert dict(mixtral.refused) == {said: mixtral.tried - len(mixtral.layouts) - mixtral.too_big}


def test_the_command_prints_the_best_layouts_and_the_choice() -> None:
    r = run_cli("train", str(MODELS / "llama3-70b.model"), "--hw", "h100", "--devices", "64",
                "--global-batch", "128", "--seq", "8192", "--micro-batch", "1",
                "--top", "3")  # fmt: skip
    assert r.returncode == 0 and r.stderr == ""
    lines = r.stdout.splitlines()
    assert lines[0] == ("Llama 3 70B on NVIDIA H100 SXM5 80GB: training on 64 devices, global "
                        "batch 128, seq 8,192")  # fmt: skip
    fit = len(search_training(LLAMA70, H100, 64, 128, 8192, (1,), estimate="kernels").layouts)
    assert lines[1] == f"152 layouts tried, {fit} fit; the best 3 by tokens/s per device"
    assert lines[3].split()[:3] == ["layout", "micro-batch", "step"]
    assert len([ln for ln in lines if "microbatches" in ln and not ln.startswith("chosen")]) == 3
    assert any(ln.startswith("chosen: ") and "kernel-aware estimate" in ln for ln in lines)
    data = json.loads(run_cli("train", str(MODELS / "llama3-70b.model"), "--hw", "h100",
                              "--devices", "64", "--global-batch", "128", "--seq", "8192",
                              "--micro-batch", "1", "--format", "json").stdout)  # fmt: skip
    assert len(data["layouts"]) == fit and data["estimated"] is True


def test_a_batch_no_layout_splits_is_refused() -> None:
    # 3 devices: dp 3 (the only layout of tp, cp, pp in powers of two) does not divide 128
    r = run_cli("train", str(MODELS / "llama3-8b.model"), "--hw", "h100", "--devices", "3",
                "--global-batch", "128")  # fmt: skip
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr.startswith(
        "modelcost: error: no layout of 3 devices splits a global batch of 128 into whole "
        "microbatches"
    )
    assert "Traceback" not in r.stderr


def test_the_html_page_escapes_what_the_spec_says(tmp_path) -> None:
    spec = tmp_path / "x.model"
    spec.write_text(f'import "{MODELS / "llama3-8b.model"}"\n'
                    'model x extends llama3_8b {\n  title = "<b>Mine</b> & co"\n}\n')  # fmt: skip
    out = tmp_path / "train.html"
    r = run_cli("train", str(spec), "--hw", "h100", "--devices", "8", "--global-batch", "64",
                "--seq", "4096", "--micro-batch", "1", "--estimate", "roofline",
                "--format", "html", "-o", str(out))  # fmt: skip
    assert r.returncode == 0, r.stderr
    page = out.read_text()
    assert "<b>Mine</b>" not in page and "&lt;b&gt;Mine&lt;/b&gt; &amp; co" in page
    assert "Layouts that fit, best first" in page
    # the roofline ranks them: no estimate column
    assert "bound tokens/s/device" not in page
