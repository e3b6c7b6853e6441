"""Activation offloading (--offload N, Megatron-Core's cpu_offloading_num_layers over
Transformer Engine's CPU offload): what the device keeps, what crosses the host link,
what it costs a step, and the layouts Megatron-Core refuses."""

from __future__ import annotations

import pytest
from conftest import MODELS, run_cli

from modelcost import load_spec
from modelcost.base.errors import SpecError
from modelcost.ir.graph import Parallel, Workload
from modelcost.lowering.lower import lower
from modelcost.roofline.compile import compile_report
from modelcost.roofline.footprint import footprint, kept_for_backward
from modelcost.targets.hardware import hardware_dir, load_hardware, parse_hardware

LLAMA8 = load_spec(MODELS / "llama3-8b.model")  # 32 layers, d 4096, bf16
H100 = load_hardware("h100")  # host link: PCIe Gen5 x16, 64 GB/s per direction
# one 8192-token sequence through a Llama 3 8B layer keeps 34·s·b·h bytes in bf16:
# test_training_layouts's 33.5 for a Llama layer (Korthikanti et al. 2022's
# accounting), with K and V at 8 of 32 heads (0.5 each) instead of 8 of 64 (0.25)
LAYER_SET = 34 * 8192 * 4096  # 1,140,850,688 bytes


def train(offload: int = 0, overlap: str = "megatron", **layout) -> Workload:
    par = Parallel(offload=offload, overlap=overlap, **layout)
    return Workload("train", 1, 8192, parallel=par)


def test_a_layer_set_is_what_its_backward_keeps() -> None:
    graph = lower(LLAMA8, train())
    (layer,) = [g for g in graph.groups if g.block != "model"]
    assert kept_for_backward(graph)[layer.name] == LAYER_SET * 32


def test_the_device_holds_the_layers_not_offloaded() -> None:
    # Transformer Engine's default schedule: at most layers − N layers' activations on
    # the device (cpu_offloading.rst @d0067d0d): 8 of 32 offloaded leaves 24 sets, so
    # the footprint's activations drop by exactly 8 sets; the rest is unchanged
    plain, off = footprint(lower(LLAMA8, train())), footprint(lower(LLAMA8, train(8)))
    assert plain["activations"] - off["activations"] == 8 * LAYER_SET
    assert {k: v for k, v in plain.items() if k != "activations"} == {
        k: v for k, v in off.items() if k != "activations"
    }


def test_the_first_layers_cross_the_host_link_each_way() -> None:
    r = compile_report(LLAMA8, H100, train(8))
    (op,) = [o for o in r.ops if o.kind == "Offload"]
    # 8 layers' sets out in the forward and back in the backward, once per microbatch
    assert (op.count, op.bytes, op.link, op.bound) == (1, 8 * LAYER_SET, "host", "host")
    assert op.time_s == 8 * LAYER_SET / 64e9  # 0.1426 s at 64 GB/s
    assert op.total_time_s == 2 * 8 * LAYER_SET / 64e9


def test_the_copies_run_beside_compute_as_far_as_it_lasts() -> None:
    plain = compile_report(LLAMA8, H100, train()).totals
    hidden = compile_report(LLAMA8, H100, train(8)).totals
    exposed = compile_report(LLAMA8, H100, train(8, overlap="none")).totals
    copies = 2 * 8 * LAYER_SET / 64e9
    # megatron: Transformer Engine copies on its own stream, and the step's ~1 s of
    # compute outlasts 0.29 s of copies: the step is the step without them
    assert hidden.comm_exposed_s == 0.0
    assert hidden.time_s == pytest.approx(plain.time_s, rel=1e-12)
    assert hidden.comm_s == pytest.approx(copies, rel=1e-12)
    # none: every transfer counted exposed, the copies added to the step
    assert exposed.time_s == pytest.approx(plain.time_s + copies, rel=1e-12)


def test_megatron_refuses_a_pipeline_recomputation_or_every_layer() -> None:
    with pytest.raises(SpecError, match="one pipeline stage only"):
        compile_report(LLAMA8, H100, Workload("train", 2, 8192, parallel=Parallel(
            pp=2, microbatches=2, offload=4)))  # fmt: skip
    with pytest.raises(SpecError, match="does not offload activations that --recompute"):
        lower(LLAMA8, train(4, recompute="full"))
    with pytest.raises(SpecError, match="has 32 layers") as err:
        lower(LLAMA8, train(32))
    assert err.value.hint is not None and "at most 31" in err.value.hint


def test_offloading_is_training_only() -> None:
    par = Parallel(offload=4)
    with pytest.raises(SpecError, match="--offload 4 applies to train"):
        lower(LLAMA8, Workload("prefill", 1, 8192, parallel=par))


def test_a_target_without_a_host_link_refuses_it() -> None:
    text = (hardware_dir() / "h100.hw").read_text()
    kept = "\n".join(ln for ln in text.splitlines() if "host_bandwidth" not in ln)
    bare = parse_hardware(kept, "bare.hw")
    assert bare.host_bandwidth is None
    with pytest.raises(SpecError, match="states no `host_bandwidth`"):
        compile_report(LLAMA8, bare, train(8))


def test_the_cli_says_what_crosses_the_host_link() -> None:
    out = run_cli("compile", "llama3-8b", "--hw", "h100", "--phase", "train", "--seq",
                  "8192", "--offload", "8", "--overlap", "megatron")  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "offload 8" in out.stdout
    assert "collectives and host copies" in out.stdout
    bad = run_cli("compile", "llama3-8b", "--hw", "h100", "--phase", "prefill", "--offload", "8")
    assert bad.returncode == 2 and "--offload 8 applies to train" in bad.stderr


def test_the_fitting_advice_names_the_offload_that_makes_it_fit() -> None:
    # 4 sequences of 8192 tokens a replica over 8 H100s with ZeRO 3: 32 layers' sets of
    # 4 · 34·s·h bytes (146 GB) do not fit 79.6 GiB beside 18 GB of sharded state;
    # offloading 24 of the 32 layers leaves 8 (36.5 GB): the advice tries a quarter,
    # half, three quarters of the layers and all but two, and names the first that fits
    par = Parallel(dp=8, zero=3, overlap="megatron")
    r = compile_report(LLAMA8, H100, Workload("train", 32, 8192, parallel=par))
    assert not r.totals.memory.fits
    warning = r.totals.memory.warning or ""
    assert "--offload 24 (step" in warning and "--offload 16" not in warning


def test_the_device_holds_the_largest_sets_the_offload_leaves() -> None:
    # Transformer Engine keeps at most layers − N layers' activations on the device
    # (cpu_offloading.rst): with sets of 1, 5 and 3 and one layer offloaded, the two
    # largest, 5 + 3 = 8, are resident; none offloaded, all 9; all three, none
    from modelcost.lowering.memory import resident_bytes

    assert resident_bytes([1, 5, 3], 1) == 8
    assert resident_bytes([1, 5, 3], 0) == 9
    assert resident_bytes([1, 5, 3], 3) == 0
