"""Fitting advice without a second compile (issue 35, item 5): a candidate layout is
judged first by what its stage holds besides activations (advice.held_bytes, from the
rooms' per-shard figures, unlowered), and only a candidate that leaves room for
activations is lowered. The screen is exact where it speaks (the figures lowering
itself puts in the footprint) and never changes an answer: the advice with it equals
the advice that lowers every candidate."""

from __future__ import annotations

from pathlib import Path

import pytest
from heterogeneous_spec import distinct_layers

import modelcost.roofline.advice as advice
from modelcost import load_spec, parse_spec
from modelcost.estimate.costing import DEFAULT_COSTING
from modelcost.ir.graph import Parallel, Phase, Workload, settled
from modelcost.lowering.lower import lower
from modelcost.roofline.footprint import footprint
from modelcost.targets.hardware import load_hardware

MODELS = Path(__file__).resolve().parent.parent / "specs" / "models"
H100 = load_hardware("h100")


def _workload(phase: Phase, batch: int, seq: int | None = None, **layout) -> Workload:
    w = Workload(phase, batch, seq=seq, parallel=Parallel(**layout))
    return settled(w, DEFAULT_COSTING.conventions)


CASES = [
    ("llama3-70b", _workload(Phase.train, 64, 4096, tp=8, pp=4, dp=2, zero=1, microbatches=8)),
    ("llama3-70b", _workload(Phase.train, 32, 4096, tp=8, dp=4, zero=3, recompute="full")),
    ("llama3-70b", _workload(Phase.decode, 16, tp=2)),
    ("mixtral-8x7b", _workload(Phase.train, 16, 4096, tp=2, ep=4, dp=4, pp=2)),
    ("deepseek-v3", _workload(Phase.prefill, 4, 4096, tp=8, pp=4)),
    ("mamba2-2.7b", _workload(Phase.decode, 64, tp=2)),
]


@pytest.mark.parametrize(("model", "workload"), CASES, ids=[f"{m}-{i}" for i, (m, _) in
                                                           enumerate(CASES)])  # fmt: skip
def test_the_screen_is_the_footprint_but_its_activations(model, workload) -> None:
    # the same figures, to the byte: held_bytes reads what lowering puts on the graph
    spec = load_spec(MODELS / f"{model}.model")
    parts = footprint(lower(spec, workload))
    unlowered = advice.held_bytes(spec, workload)
    assert unlowered == sum(v for k, v in parts.items() if k != "activations")
    assert unlowered > 0


ADVISED = [
    # not fitting one H100 (weights alone: 141 GB in bf16), in each phase
    ("llama3-70b", _workload(Phase.decode, 8)),
    ("llama3-70b", _workload(Phase.prefill, 1, 8192, tp=2)),
    # training: the levers alone and together (tests/test_defects_round3.py's layout)
    ("llama3-70b", _workload(Phase.train, 512, 4096, tp=8, pp=4, dp=8, zero=1,
                             recompute="selective", microbatches=16)),
    ("llama3-70b", _workload(Phase.train, 32, 4096, tp=8, dp=4, zero=3)),
    ("mixtral-8x7b", _workload(Phase.train, 64, 4096, ep=8, dp=8)),
]  # fmt: skip


@pytest.mark.parametrize(("model", "workload"), ADVISED, ids=[f"{m}-{i}" for i, (m, _) in
                                                             enumerate(ADVISED)])  # fmt: skip
def test_the_screen_never_changes_the_advice(model, workload, monkeypatch) -> None:
    spec = load_spec(MODELS / f"{model}.model")
    screened = advice.fitting_advice(spec, H100, workload)
    monkeypatch.setattr(advice, "held_bytes", lambda *_: 0.0)  # lower every candidate
    assert advice.fitting_advice(spec, H100, workload) == screened
    assert screened.startswith("it fits with")


def test_a_thousand_distinct_layers_lower_only_the_fix(monkeypatch) -> None:
    # 1,000 layers of 4,096 wide (tests/heterogeneous_spec.py): 192 GiB of bf16 weights
    # (bench.py's scale spec), on one 79.6 GiB H100. Of the 20 candidates (tp 2…64, pp
    # 2…64, alone then together), only pp 4 leaves room for activations: it alone is
    # lowered, where every candidate was before
    spec = parse_spec(distinct_layers(1000))
    lowered: list[Parallel] = []

    def counted(spec_, workload, *rest):
        lowered.append(workload.parallel)
        return lower(spec_, workload, *rest)

    monkeypatch.setattr(advice, "lower", counted)
    said = advice.fitting_advice(spec, H100, _workload(Phase.prefill, 1, 2048))
    assert said == "it fits with --pp 4 (step 561 ms on 4 devices)"
    assert lowered == [Parallel(pp=4)]
