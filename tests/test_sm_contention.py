"""The compute beside a data-parallel sync runs on the SMs NCCL leaves it
(collectives_achieved.ctas, estimated.held_share, step_time's `held`): NCCL's channel
counts by hand from their sources, the step's composition in closed form, and one
training report taken apart."""

import pytest
from conftest import MODELS

from modelcost import compile_report, load_spec
from modelcost.estimate.collectives_achieved import ctas
from modelcost.estimate.costing import costing
from modelcost.ir.graph import Parallel, Workload
from modelcost.perfmodel import CollectiveOp
from modelcost.roofline.step import step_time
from modelcost.targets.hardware import load_hardware

H100, H200, B200, MI300X = (load_hardware(n) for n in ("h100", "h200", "b200", "mi300x"))


def test_nccl_channels_on_h100_by_the_algorithm_its_time_is_priced_on() -> None:
    # specs/kernels/collectives.json nvlink4 `ctas` (NCCL v2.21.5 search.cc/connect.cc;
    # an 8xH100 log's "24 coll channels, ... 16 nvls channels"; NVIDIA/nccl#689's 16 SMs
    # with 8 NICs): one CTA, one SM, a channel
    ring = CollectiveOp("reduce_scatter", 2**28, 8)  # 8 ranks behind one NVSwitch
    assert ctas(ring, H100) == (24, "NCCL holds 24 of the 132 SMs while it runs (the "
                                    "ring's channels in one scale-up domain)")  # fmt: skip
    nvls = CollectiveOp("all_reduce", 2**28, 8)  # priced as NVLink SHARP's all-reduce
    assert ctas(nvls, H100)[0] == 16
    across = CollectiveOp("all_gather", 2**28, 8, stride=8)  # one rank a node, 8 nodes
    assert ctas(across, H100)[0] == 16
    assert "(the ring's channels across scale-up domains)" in ctas(across, H100)[1]
    # H200 takes its family's figure, and says so
    assert ctas(ring, H200) == (24, "NCCL holds 24 of the 132 SMs while it runs (the "
                                    "ring's channels in one scale-up domain, h100's "
                                    "figure)")  # fmt: skip
    # no sourced channel count for Blackwell's NCCL or for RCCL; nothing sent, nothing held
    assert ctas(ring, B200) is None and ctas(ring, MI300X) is None
    assert ctas(CollectiveOp("reduce_scatter", 2**28, 1), H100) is None


def test_held_compute_is_added_for_the_part_of_the_sync_hidden() -> None:
    # 10 s busy of which 2 s collectives beside compute: 8 s of compute outlasts them,
    # so all 2 s are hidden and the 0.5 s of compute their SMs took is added: 8.5 s
    assert step_time(10.0, 0.0, 2.0, 1, 1, "megatron", 1, 2.0, 0.5) == (8.5, 0.0, 0.0)
    # 1.2 s beside 1 s of compute, their SMs half the device (held 0.6 s): the compute
    # overlaps 1/1.2 of them and loses 0.5 s of work, which runs 0.3 s past their 0.2 s
    # tail: max(1.2, 1 + 0.5) = 1.5 s
    step, exposed, _ = step_time(2.2, 0.0, 1.2, 1, 1, "megatron", 1, 1.2, 0.6)
    assert (step, exposed) == (pytest.approx(1.5, rel=1e-15), pytest.approx(0.2, rel=1e-15))
    # 4 s beside 1 s of compute, held 0.4 s: the compute loses 0.1 s of work, inside
    # their 3 s tail, so the step is theirs: 4 s
    step, exposed, _ = step_time(5.0, 0.0, 4.0, 1, 1, "megatron", 1, 4.0, 0.4)
    assert (step, exposed) == (4.0, 3.0)
    # nothing overlapped: no compute beside them, nothing taken
    assert step_time(10.0, 0.0, 2.0, 1, 1, "none", 1, 2.0, 0.5) == (10.0, 2.0, 0.0)
    # overlap full hides every collective as far as compute lasts: 2 s of 8 here, the
    # other 6 exposed; the 0.2 s lost (a quarter of 0.8) fits in that tail
    step, exposed, _ = step_time(10.0, 0.0, 8.0, 1, 1, "full", 1, 0.0, 0.8)
    assert (step, exposed) == (8.0, 6.0)
    # and past it when compute outlasts them: 2 s of collectives behind 8 s, 0.8 s added
    assert step_time(10.0, 0.0, 2.0, 1, 1, "full", 1, 0.0, 0.8) == (8.8, 0.0, 0.0)


def test_a_training_step_with_its_sync_beside_compute() -> None:
    # Llama 3 8B on 8 H100, dp 8 with the distributed optimizer (ZeRO 1), one stage, the
    # sync beside compute as Megatron-Core runs it: the gradient reduce-scatter and the
    # weights' all-gather are the step's only collectives, both hidden behind compute,
    # so the estimated step is the compute's time plus 24/132 of theirs
    spec = load_spec(MODELS / "llama3-8b.model")
    par = Parallel(dp=8, zero=1, overlap="megatron", microbatches=4)
    r = compile_report(spec, H100, Workload("train", 32, 4096, parallel=par),
                       how=costing(estimate="kernels"))  # fmt: skip
    syncs = [o for o in r.ops if o.kind == "Collective"]
    assert [o.name for o in syncs] == ["grads.reduce_scatter", "grads.params.all_gather"]
    compute = sum(o.total_estimate_s for o in r.ops if o.kind != "Collective")
    synced = sum(o.total_estimate_s for o in syncs)
    assert synced < compute  # compute outlasts them: all hidden
    assert r.totals.estimate_s == pytest.approx(compute + synced * 24 / 132, rel=1e-12)
    said = (
        "; NCCL holds 24 of the 132 SMs while it runs (the ring's channels in one "
        "scale-up domain): compute overlapping it does 18% less work meanwhile"
    )
    assert all(o.estimate_reason.endswith(said) for o in syncs)
    # the bound keeps them free: its step is the compute's roofline time alone (nothing
    # exposed, one stage: no bubble)
    bound = sum(o.total_time_s for o in r.ops if o.kind != "Collective")
    assert r.totals.comm_exposed_s == 0.0
    assert r.totals.time_s == pytest.approx(bound, rel=1e-12)
