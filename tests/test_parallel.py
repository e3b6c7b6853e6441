"""Parallel layouts: per-device lowering against closed forms (Megatron-LM's tensor and
sequence parallelism, ZeRO's memory per stage), collectives priced on the links, and
layouts a spec cannot run refused with exit 2."""

import json
from pathlib import Path

import pytest
from conftest import MODELS, run_cli

from modelcost import SpecError, load_spec, parse_spec
from modelcost.ir.graph import Parallel, Phase, Workload
from modelcost.language.spec import walk
from modelcost.lowering.lower import lower
from modelcost.lowering.params import count_params, device_params
from modelcost.lowering.validate import for_phase
from modelcost.perfmodel import CollectiveOp
from modelcost.roofline.compile import compile_report
from modelcost.targets.hardware import load_hardware
from modelcost.targets.network import bound, collective_time, link, ring_time

LLAMA8 = load_spec(MODELS / "llama3-8b.model")  # 32 layers, d 4096, 32 heads, 8 KV, ff 14336
LLAMA70 = load_spec(MODELS / "llama3-70b.model")  # 80 layers, d 8192, 64 heads, 8 KV
H100 = load_hardware("h100")


def report(spec, phase="prefill", batch=1, seq=2048, **layout):
    return compile_report(
        spec, H100, for_phase(Workload(phase, batch, seq, 2048, "all", Parallel(**layout)))
    )


def kind_flops(r, kind: str) -> float:
    return sum(o.count * o.flops for o in r.ops if o.kind == kind)


@pytest.mark.parametrize("tp", [2, 4, 8])
def test_gemm_flops_per_device_are_one_tp_th(tp: int) -> None:
    # Megatron splits every GEMM of the layers and the vocabulary-parallel LM head
    # (128,256 rows divide by 8): per-device GEMM FLOPs are exactly 1/tp of one device's
    one = report(LLAMA70)
    split = report(LLAMA70, tp=tp)
    assert kind_flops(split, "GEMM") * tp == kind_flops(one, "GEMM")
    assert kind_flops(split, "SDPA") * tp == kind_flops(one, "SDPA")  # heads split too


def test_two_all_reduces_per_layer_forward_and_backward() -> None:
    # Megatron-LM (Shoeybi et al. 2019, fig. 3): one all-reduce after attention and one
    # after the MLP in forward (g), and two in backward (f); each of T·d elements, a ring
    # sending 2(n−1)/n of them: T = 2048, d = 4096, bf16, n = 2 → 2·½·2048·4096·2 bytes
    r = report(LLAMA8, "train", tp=2)
    layer = [o for o in r.ops if o.kind == "Collective" and o.group == "layers.0"]
    assert [o.name for o in layer] == [
        "layers.0.attn.all_reduce",
        "layers.0.mlp.all_reduce",
    ]
    for o in layer:
        assert o.count == 32
        assert o.shape == {"collective": "all_reduce", "elements": 2048 * 4096, "group": 2,
                           "stride": 1}  # fmt: skip
        assert o.bytes == 2 * (1 / 2) * 2048 * 4096 * 2 == 16_777_216
        assert o.backward is not None and o.backward.bytes == o.bytes
        assert o.link == "scale-up"


def test_sequence_parallelism_moves_what_all_reduce_moves() -> None:
    # Korthikanti et al. 2022: an all-reduce is a reduce-scatter plus an all-gather, so
    # sequence parallelism adds no communication volume; norms run on 1/tp of the tokens
    plain, sp = report(LLAMA8, tp=4), report(LLAMA8, tp=4, sp=True)

    def layer_comm(r):
        return sum(o.bytes for o in r.ops if o.kind == "Collective" and o.group == "layers.0")

    kinds = {o.shape["collective"] for o in sp.ops if o.kind == "Collective"}
    assert kinds == {"all_gather", "reduce_scatter"}
    # per layer: AG + RS of T·d each, (n−1)/n · T·d·2 bytes apiece = one all-reduce's
    assert layer_comm(sp) == layer_comm(plain) == 2 * 2 * (3 / 4) * 2048 * 4096 * 2
    norm = next(o for o in sp.ops if o.name == "layers.0.norm.0")
    assert norm.shape["num_elems"] == 2048 * 4096 // 4


def test_kv_heads_replicate_when_tp_exceeds_them() -> None:
    # Llama 3 70B has 8 KV heads: at tp 16 each rank keeps one (replicated twice), so
    # its KV cache is 1/8 of one device's, not 1/16
    one = report(LLAMA70, "decode", tp=1)
    sixteen = report(LLAMA70, "decode", tp=16)
    assert sixteen.totals.memory.kv_cache * 8 == one.totals.memory.kv_cache


@pytest.mark.parametrize("zero", [0, 1, 2, 3])
def test_zero_memory_per_device_by_stage(zero: int) -> None:
    # Rajbhandari et al. 2020 (ZeRO), mixed-precision Adam, Ψ parameters, N_d = 8 ranks:
    # bf16 weights 2Ψ, gradients, fp32 m, v and master 12Ψ; stage 1 shards the 12Ψ,
    # stage 2 the gradients too, stage 3 the weights too. The gradients are fp32, 4Ψ, as
    # Megatron-LM keeps a bf16 model's (megatron/training/arguments.py: "bfloat16
    # requires gradient accumulation and all-reduce to be done in fp32"; the paper's
    # fp16 gradients are 2Ψ)
    psi = count_params(LLAMA8).total
    m = report(LLAMA8, "train", batch=8, dp=8, zero=zero).totals.memory
    nd = 8
    expected = {
        0: (2 * psi, 4 * psi, 12 * psi),
        1: (2 * psi, 4 * psi, 12 * psi / nd),
        2: (2 * psi, 4 * psi / nd, 12 * psi / nd),
        3: (2 * psi / nd, 4 * psi / nd, 12 * psi / nd),
    }[zero]
    assert (m.weights, m.gradients, m.optimizer_states) == pytest.approx(expected, rel=1e-12)


def test_data_parallel_gradient_sync_by_zero_stage() -> None:
    # ZeRO-0 all-reduces the gradients (2Ψ per rank in a ring); ZeRO-1/2 reduce-scatter
    # them and all-gather the updated weights (the same 2Ψ); ZeRO-3 also gathers the
    # weights for the backward (3Ψ): Rajbhandari et al. 2020, section 7
    psi = count_params(LLAMA8).total

    def sync(zero):
        r = report(LLAMA8, "train", batch=8, dp=8, zero=zero)
        ops = [o for o in r.ops if o.name.startswith("grads.")]
        assert all(o.backward is None for o in ops)  # once per step, no backward
        # the gradients in fp32, as Megatron-LM reduces a bf16 model's; the updated
        # weights gathered in bf16
        return [(o.shape["collective"], o.shape["elements"], o.dtypes["dtype"]) for o in ops]

    grads, weights = ("reduce_scatter", psi, "fp32"), ("all_gather", psi, "bf16")
    assert sync(0) == [("all_reduce", psi, "fp32")]
    assert sync(1) == sync(2) == [grads, weights]
    assert sync(3) == [grads, weights, weights]


def test_device_params_add_up_to_the_model_on_one_device() -> None:
    for path in sorted(MODELS.glob("*.model")):
        spec = load_spec(path)
        total = sum(sum(device_params(op)) * n for op, n in walk(spec.body))
        assert total == count_params(spec).total, path.stem


def test_expert_parallel_all_to_all() -> None:
    # DeepSeek-V3 at ep 8 (from dp 8): each token's 8 expert copies go out and come back
    # by all-to-all over the ep group, T·k·d elements each way; experts/8 per device
    spec = load_spec(MODELS / "deepseek-v3.model")
    r = compile_report(spec, H100, Workload("decode", 64, None, 1024, "all",
                                            Parallel(dp=8, ep=8)))  # fmt: skip
    a2a = [o for o in r.ops if o.kind == "Collective" and "all_to_all" in o.name]
    assert {o.name.rsplit(".", 2)[-2] for o in a2a} == {"dispatch", "combine"}
    tokens = 64 // 8  # sequences per replica, one new token each
    assert all(o.shape["elements"] == tokens * 8 * 7168 and o.shape["group"] == 8 for o in a2a)
    assert all(o.shape["stride"] == 1 for o in a2a)  # tp 1: dp ranks are adjacent


def test_collective_time_closed_forms() -> None:
    # the bound (network.py) on the H100's NVLink (450 GB/s per direction, 1 µs a step,
    # NVLink SHARP): all-reduce of 1 GiB over 8 ranks in the switch, each rank sending
    # and receiving S once in 2 steps: 2³⁰ B / 450e9 + 2 µs (the ring NCCL runs by
    # default moves 2·7/8·2³⁰ B in 14 steps: ring_time)
    ar = CollectiveOp("all_reduce", 2**29, 8)  # bf16: 2^30 bytes
    assert link(ar, H100) == "scale-up"
    assert bound(ar, H100) == (pytest.approx(2**30 / 450e9 + 2e-6), "in-switch")
    assert collective_time(ar, H100) == bound(ar, H100)[0]
    assert ring_time(ar, H100) == pytest.approx(2 * 7 / 8 * 2**30 / 450e9 + 14e-6)
    # 16 ranks, tp-adjacent: 8 per domain, 2 domains → hierarchical: in the switch
    # inside on S (2 steps × 1 µs), one-shot across (50 GB/s, 2 µs) on S/8: (2−1)·S/8;
    # the phases pipeline on their own links, so the slower link's bytes set the time
    big = CollectiveOp("all_reduce", 2**29, 16)
    assert link(big, H100) == "scale-up+out"
    expected = max(2**30 / 450e9, 2**30 / 8 / 50e9) + 2 * 1e-6 + 1 * 2e-6
    assert bound(big, H100) == (pytest.approx(expected), "in-switch inside, one-shot across")
    # the ring's sum of both phases: 2·7/8·S at 450 GB/s + 14 µs + 2·1/2·S/8 at 50 + 2×2 µs
    ring = 2 * 7 / 8 * 2**30 / 450e9 + 14e-6 + 2 * 1 / 2 * 2**30 / 8 / 50e9 + 2 * 2e-6
    assert ring_time(big, H100) == pytest.approx(ring)
    # a data-parallel group with stride 8 has one rank per domain: all scale-out, each
    # rank sending its shard to the 3 others directly: 3/4 · S / 50 GB/s + 1 step × 2 µs
    dp = CollectiveOp("all_gather", 2**29, 4, stride=8)
    assert link(dp, H100) == "scale-out"
    assert bound(dp, H100) == (pytest.approx(3 / 4 * 2**30 / 50e9 + 2e-6), "direct")
    assert ring_time(dp, H100) == pytest.approx(3 / 4 * 2**30 / 50e9 + 3 * 2e-6)


def test_the_issue_commands_fit_and_show_their_collectives() -> None:
    spec = load_spec(MODELS / "llama3.1-405b.model")
    h200 = load_hardware("h200")
    for phase in (Phase.prefill, Phase.decode):
        r = compile_report(spec, h200, Workload(phase, parallel=Parallel(tp=8)))
        assert r.totals.memory.fits
        assert any(o.kind == "Collective" for o in r.ops)
        assert r.workload.layout.devices == 8 and r.totals.comm_s > 0
    one = compile_report(spec, h200, Workload("decode"))
    assert not one.totals.memory.fits  # 810 GB of bf16 weights on one 141 GB device


@pytest.mark.parametrize(
    ("spec", "layout", "batch", "message"),
    [
        (LLAMA8, {"tp": 3}, 1, "--tp 3 does not divide the 32 heads"),
        (LLAMA8, {"tp": 64}, 1, "--tp 64 does not divide the 32 heads"),
        (LLAMA8, {"dp": 4}, 2, "batch 2 does not split over dp = 4"),
        (
            LLAMA8,
            {"microbatches": 3, "pp": 2},
            4,
            "batch 4 does not split over dp = 1 replicas of 3",
        ),
        (LLAMA8, {"dp": 2, "ep": 2}, 2, "has no experts to split"),
        (LLAMA8, {"tp": 4, "sp": True}, 2, "splits 2 tokens over tp = 4 ranks unevenly"),
    ],
)
def test_layouts_a_spec_cannot_run_are_refused(spec, layout, batch, message) -> None:
    phase = "decode" if layout.get("sp") else "prefill"  # decode: one token a sequence
    with pytest.raises(SpecError, match=message):
        lower(spec, Workload(phase, batch, parallel=Parallel(**layout)))


def test_cli_layout_errors_exit_2_without_a_traceback() -> None:
    spec = str(MODELS / "llama3-8b.model")
    for args, message in (
        (["--tp", "3"], "does not divide the 32 heads"),
        (["--sp"], "needs tp > 1"),
        (["--dp", "2", "--ep", "4"], "ep × etp = 4 × 1 = 4 must divide tp × dp = 1 × 2 = 2"),
        (["--zero", "5"], "expected 0, 1, 2 or 3"),
    ):
        r = run_cli("compile", spec, "--hw", "h100", *args)
        assert r.returncode == 2, args
        assert message in r.stderr and "Traceback" not in r.stderr


def test_a_layout_diff() -> None:
    spec = str(MODELS / "llama3-70b.model")
    r = run_cli("diff", spec, spec, "--hw", "h100", "--tp", "8", "--tp-b", "4", "--dp-b", "2",
                "--batch", "2", "--format", "json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    (phase,) = json.loads(r.stdout)["phases"]
    assert (phase["a"]["shape"], phase["b"]["shape"]) == ("seq 2048, tp 8", "seq 2048, tp 4, dp 2")


def test_expert_parallel_ranks_sit_tp_apart_even_when_ep_equals_tp() -> None:
    # ranks are numbered tp-innermost: an ep group is made of data-parallel ranks, tp
    # apart, whatever its size; with tp 2 and ep 2 the all-to-all spans 4 devices
    spec = load_spec(MODELS / "mixtral-8x7b.model")
    layout = Parallel(tp=2, dp=2, ep=2)
    r = compile_report(spec, H100, Workload("decode", 2, parallel=layout))
    a2a = [o for o in r.ops if o.kind == "Collective" and "all_to_all" in o.name]
    tp = [o for o in r.ops if o.kind == "Collective" and o.name.endswith("attn.all_reduce")]
    assert a2a and all((o.shape["group"], o.shape["stride"]) == (2, 2) for o in a2a)
    assert tp and all((o.shape["group"], o.shape["stride"]) == (2, 1) for o in tp)


def test_a_pipeline_stage_and_its_bubble() -> None:
    # Llama 3 70B's 80 layers over 4 stages: the report is the last stage's device,
    # layers 60-79 with the final norm and the head; each op runs once per microbatch;
    # 1F1B idles pp − 1 microbatch times: the bubble is (p − 1)/(m + p − 1) = 3/11
    layout = Parallel(pp=4, microbatches=8)
    r = compile_report(LLAMA70, H100, Workload("prefill", 8, parallel=layout))
    assert [(g.group, g.layers, g.count) for g in r.layers] == [
        ("model", "", 1),
        ("layers.60", "60-79", 20),
    ]
    names = [o.name for o in r.ops]
    assert "embed" not in names and names[-2:] == ["norm", "lm_head"]
    recv = r.ops[0]
    assert recv.name == "pipeline.recv" and recv.count == 8  # one per microbatch
    # one sequence of 2048 tokens × d 8192 in bf16, sent whole across the domain
    # boundary (stages are dp·tp = 1 apart, so inside the 8-GPU domain here)
    assert recv.shape["collective"] == "p2p" and recv.bytes == 2048 * 8192 * 2
    t = r.totals
    assert t.bubble_s / t.time_s == pytest.approx(3 / 11, rel=1e-12)
    assert (r.workload.batch, r.workload.tokens) == (8, 8 * 2048)


def test_more_stages_than_layers_are_refused() -> None:
    with pytest.raises(SpecError, match="--pp 33 is more pipeline stages than the 32 layers"):
        lower(LLAMA8, Workload("prefill", parallel=Parallel(pp=33)))


def test_overlap_hides_collectives_behind_compute() -> None:
    # with overlap, the step is the longer of compute and communication: exposed
    # collective time is max(0, comm − other work)
    plain = report(LLAMA70, tp=8).totals
    hidden = report(LLAMA70, tp=8, overlap="full").totals
    other = plain.busy_s - plain.comm_s
    assert plain.comm_exposed_s == plain.comm_s and plain.time_s == plain.busy_s
    assert hidden.comm_exposed_s == max(0.0, hidden.comm_s - other)
    assert hidden.time_s == pytest.approx(max(other, hidden.comm_s), rel=1e-12)


def test_megatron_overlap_hides_what_megatron_runs_beside_compute() -> None:
    # Llama 3 70B as Megatron-Bridge's recipe lays it out (tp 4, sp, pp 8, vpp 5, dp 2,
    # ZeRO 1): Megatron-Core runs beside compute the gradient reduce-scatter and the
    # parameter all-gather (overlap_grad_reduce, overlap_param_gather), the sp gathers
    # and reduce-scatters (tp_comm_overlap), and the interleaved pipeline's receives
    # (overlap_p2p_comm, on where vpp > 1); nothing else here is a collective but the
    # LM head's gather and the loss's all-reduce, which stay exposed
    layout = dict(tp=4, sp=True, pp=8, vpp=5, dp=2, zero=1, microbatches=64)
    w = Workload("train", 128, 8192, parallel=Parallel(**layout, overlap="megatron"))
    graph = lower(LLAMA70, w)
    beside = {n.name for n in graph.nodes if n.beside}
    assert beside == {
        "pipeline.recv",
        "layers.14.attn.all_gather",
        "layers.14.attn.reduce_scatter",
        "layers.14.mlp.all_gather",
        "layers.14.mlp.reduce_scatter",
        "grads.reduce_scatter",
        "grads.params.all_gather",
    }
    r = compile_report(LLAMA70, H100, w)
    by_name = {o.name: o.total_time_s for o in r.ops}
    t = r.totals
    hidden = sum(by_name[n] for n in beside)
    other = t.busy_s - t.comm_s
    # exposed = what is not beside compute + what beside it outlasts the compute
    assert hidden < other
    assert t.comm_exposed_s == pytest.approx(t.comm_s - hidden, rel=1e-12)
    # plain 1F1B waits on its receives; tp without sp all-reduces, exposed
    plain = lower(LLAMA70, Workload("train", 128, 8192, parallel=Parallel(
        tp=4, pp=8, dp=2, zero=1, microbatches=64, overlap="megatron")))  # fmt: skip
    assert {n.name for n in plain.nodes if n.beside} == {
        "grads.reduce_scatter",
        "grads.params.all_gather",
    }


def test_zero3_syncs_weights_and_gradients_every_microbatch() -> None:
    # Megatron-FSDP (optim_grads_params) gathers the weights before each microbatch's
    # forward and backward and reduce-scatters its gradients (grad_reduce_every_bprop):
    # 8 microbatches, 8 of each, every one beside compute
    w = Workload("train", 16, 4096, parallel=Parallel(dp=8, zero=3, microbatches=2))
    graph = lower(LLAMA8, w)
    sync = {n.name: (n.count, n.beside) for n in graph.nodes if n.name.startswith("grads.")}
    assert sync == {
        "grads.reduce_scatter": (2, True),
        "grads.params.all_gather": (2, True),
        "grads.params.all_gather.backward": (2, True),
    }


def test_llama3_405b_pretraining_layout_stays_an_upper_bound() -> None:
    # The Llama 3 Herd of Models (Dubey et al. 2024), table 4: 16,384 H100s, TP 8,
    # PP 16, DP 128, sequence 8,192, 16 sequences per data-parallel rank (2,048 in all),
    # 400 TFLOPS per GPU (41% BF16 MFU), communication overlapped with compute. The
    # modelled step may not be slower than that: its MFU bound is at least 41%
    spec = load_spec(MODELS / "llama3.1-405b.model")
    layout = Parallel(tp=8, pp=16, dp=128, microbatches=16, overlap="full")
    r = compile_report(spec, H100, Workload("train", 2048, 8192, parallel=layout))
    assert r.workload.layout.devices == 16_384
    assert r.totals.mfu_bound >= 0.41
    assert r.totals.mfu_bound * 989.4e12 >= 400e12


def test_full_recomputation_keeps_layer_inputs_and_runs_forward_again() -> None:
    # Korthikanti et al. 2022, section 4.1: full recomputation keeps 2·s·b·h bytes per
    # layer (its 16-bit input) and one layer's activations while it is recomputed; the
    # backward runs that layer's forward again, so the layers' GEMM FLOPs go from
    # 3 forwards' worth (forward, input and weight gradients) to 4
    from modelcost.roofline.cost import cost
    from modelcost.roofline.footprint import footprint, kept_for_backward

    none = lower(LLAMA8, Workload("train", 1, 2048))
    full = lower(LLAMA8, Workload("train", 1, 2048, parallel=Parallel(recompute="full")))
    s, b, h, layers = 2048, 1, 4096, 32
    kept = kept_for_backward(none)  # what the backward reads (the next test)
    per_layer, model_level = kept["layers.0"] / layers, kept["model"]
    assert footprint(full)["activations"] == 2 * s * b * h * layers + per_layer + model_level

    def layer_gemm_flops(graph):
        costed = cost(graph)
        return sum(
            cn.node.count * (cn.fwd.flops + cn.bwd.flops)
            for cn in costed.nodes
            if cn.node.group != "model" and cn.node.op.kind == "GEMM" and cn.bwd is not None
        )

    assert layer_gemm_flops(full) * 3 == layer_gemm_flops(none) * 4
    # the MFU counts the model's FLOPs only: recomputation costs time, not model FLOPs
    r_none = report(LLAMA8, "train")
    r_full = report(LLAMA8, "train", recompute="full")
    assert r_full.totals.flops > r_none.totals.flops
    assert r_full.totals.mfu_bound < r_none.totals.mfu_bound
    assert r_full.totals.mfu_bound * r_full.totals.time_s == pytest.approx(
        r_none.totals.mfu_bound * r_none.totals.time_s, rel=1e-12
    )


def test_context_parallelism_splits_tokens_and_rings_keys() -> None:
    # cp 4 on Llama 3 8B at seq 8192: each rank runs 2,048 of the tokens through every
    # GEMM (exactly 1/4 of the FLOPs); its load-balanced queries attend exactly 1/4 of
    # the causal (query, key) pairs, S(S+1)/2; keys and values go round the ring, an
    # all-gather's volume of B·S·2·KV·hd elements per layer (gradients back in train)
    one = report(LLAMA8, seq=8192)
    four = report(LLAMA8, seq=8192, cp=4)
    assert kind_flops(four, "GEMM") * 4 == kind_flops(one, "GEMM")
    sdpa = next(o for o in four.ops if o.kind == "SDPA")
    S, H, hd = 8192, 32, 128
    pairs = S * (S + 1) // 2
    # SDPA's forward FLOPs: 2·(d_qk + d_v) per (query, key) pair and head
    assert sdpa.flops == 2 * H * (hd + hd) * pairs / 4
    ring = next(o for o in four.ops if o.name == "layers.0.attn.kv_ring")
    assert ring.shape == {"collective": "all_gather", "elements": S * 2 * 8 * hd, "group": 4,
                          "stride": 1}  # fmt: skip
    assert (four.workload.seq, four.workload.tokens) == (8192, 8192)
    assert four.totals.memory.kv_cache * 4 == one.totals.memory.kv_cache  # its own chunk


def test_ring_attentions_bookkeeping_as_transformer_engine_runs_it() -> None:
    # Transformer Engine's p2p ring (AttnFuncWithCPAndKVP2P @e7c550c5), bf16, on the rank
    # that does the most: Llama 3 8B at cp 4, seq 8192, batch 2 in training: each rank
    # holds T = 2 × 2,048 tokens, q = o = T·32·128 and k and v T·2·8·128 elements
    r = report(LLAMA8, "train", batch=2, seq=8192, cp=4)
    (merge,) = [o for o in r.ops if o.name == "layers.0.attn.ring_merge"]
    T = 2 * 2048
    q = o = T * 32 * 128
    kv = T * 2 * 8 * 128
    assert merge.kind == "RingMerge"
    assert merge.shape == {"q": q, "o": o, "kv": kv, "steps": 4, "causal": True}
    # forward: k, v concatenated into the send buffer (read, write), O initialised from
    # the first step (read, write) and corrected by the other 3 (read two, write one),
    # 2 bytes an element; a multiply, then a multiply and an add an element
    assert merge.bytes == (2 * kv + 2 * o + 3 * 3 * o) * 2
    assert merge.flops == o + 2 * 3 * o
    # backward: k, v copied into the ring's buffer; dq set and added to 3 times; dk, dv
    # set over half the chunk, added to over half twice and whole at the diagonal; an
    # add an element
    dkv = kv + 2 * 3 * kv // 2 + 3 * kv
    assert merge.backward.bytes == (2 * kv + (2 * q + 9 * q) + dkv) * 2
    assert merge.backward.flops == 3 * q + 2 * kv // 2 + kv
    # a side node off the attention: no output of its own, and it keeps nothing for
    # the backward (the corrections write the O flash attention keeps)
    graph = lower(LLAMA8, Workload("train", 2, 8192, parallel=Parallel(cp=4)))
    (node,) = [n for n in graph.nodes if n.name == "layers.0.attn.ring_merge"]
    assert node.inputs == ("layers.0.attn.sdpa",) and node.out_bytes == 0
    assert not node.op.backward_reads_inputs()
    assert not [n for n in graph.nodes if "layers.0.attn.ring_merge" in n.inputs]
    # one rank (no ring), and prefill's forward only: no node, or no backward
    assert not [o for o in report(LLAMA8, "train", batch=2, seq=8192).ops
                if o.kind == "RingMerge"]  # fmt: skip
    pre = report(LLAMA8, seq=8192, cp=4)
    (merge,) = [o for o in pre.ops if o.kind == "RingMerge"]
    assert merge.bytes == (2 * kv // 2 + 2 * o // 2 + 9 * o // 2) * 2 and merge.backward is None


def test_mla_rings_each_heads_key_and_value() -> None:
    # DeepSeek-V3 (MLA: 128 heads, nope 128, rope 64, v 128) prefilling 4,096 tokens at
    # tp 8, cp 2: 16 heads a rank, 2,048 tokens a rank. Megatron-Core builds each head's
    # key with the rope part broadcast to it, and Transformer Engine's ring sends the
    # keys and values as they are: 16 · (128 + 64 + 128) = 5,120 elements a token
    spec = load_spec(MODELS / "deepseek-v3.model")
    g = lower(spec, Workload("prefill", 1, 4096, parallel=Parallel(tp=8, cp=2)))
    ring = next(n.op for n in g.nodes if n.name == "layers.0.attn.kv_ring")
    assert (ring.collective, ring.elements, ring.group) == ("all_gather", 4096 * 5120, 2)
    merge = next(n.op for n in g.nodes if n.name == "layers.0.attn.ring_merge")
    assert (merge.q, merge.o, merge.kv, merge.steps, merge.causal) == (
        2048 * 16 * 192, 2048 * 16 * 128, 2048 * 5120, 2, True)  # fmt: skip


def test_context_parallelism_refuses_decode_and_ssms() -> None:
    with pytest.raises(SpecError, match="decode has one per sequence"):
        lower(LLAMA8, Workload("decode", parallel=Parallel(cp=2)))
    mamba = load_spec(MODELS / "mamba2-2.7b.model")
    with pytest.raises(SpecError, match="runs along the whole sequence"):
        lower(mamba, Workload("prefill", parallel=Parallel(cp=2)))


def test_gradients_sync_over_data_and_context_parallel_ranks() -> None:
    # Megatron-LM: context-parallel ranks hold the same weights, so gradients are
    # reduced over dp × cp ranks
    psi = count_params(LLAMA8).total
    r = report(LLAMA8, "train", batch=2, seq=4096, dp=2, cp=2)
    (sync,) = [o for o in r.ops if o.name.startswith("grads.")]
    assert sync.shape == {"collective": "all_reduce", "elements": psi, "group": 4, "stride": 1}


def test_the_smallest_tensor_parallel_size_that_fits_is_named(tmp_path) -> None:
    # DeepSeek-V3's 671 B parameters (fp8 weights) on H100s: tp 8 puts ~84.2 GB on a
    # device, within the 85.5 GB (81559 MiB) nvidia-smi reports (specs/hardware/h100.hw);
    # tp 4 ~168 GB does not fit; its 128 heads allow both
    spec = load_spec(MODELS / "deepseek-v3.model")
    m = compile_report(spec, H100, Workload("decode")).totals.memory
    assert not m.fits and m.warning is not None
    # pp 16 fits too (about 4 of the 61 layers a stage), dearer in step time × devices
    assert m.warning.endswith(
        "it does not fit on one device; it fits with, the least step time × devices first: "
        "--tp 8 (step 1.92 ms on 8 devices); --pp 16 (step 20.2 ms on 16 devices)"
    )
    # a device too small for any split says what else to try (decode: neither ZeRO nor
    # recomputation applies, and tp 1 has no sequence parallelism to add)
    tiny = tmp_path / "tiny.hw"
    tiny.write_text(
        'hardware tiny {\n  title = "Tiny"\n  vendor = "Acme"\n  arch = "x1"\n'
        "  memory = 100 MB\n  memory_bandwidth = 1 TB/s\n  scaleup_bandwidth = 100 GB/s\n"
        "  compute_units = 10\n  clock = 1 GHz\n  matrix { bf16 = 100 TFLOPS }\n"
        "  vector { fp32 = 10 TFLOPS }\n}\n"
    )
    r = compile_report(LLAMA8, load_hardware(str(tiny)), Workload("decode"))
    assert r.totals.memory.warning is not None
    assert r.totals.memory.warning.endswith(
        "no layout the advice tries makes it fit (--tp up to 64, --pp up to 64, alone or together)"
    )


def test_a_site_of_a_layout(tmp_path) -> None:
    out = tmp_path / "site"
    spec = str(MODELS / "llama3-8b.model")
    r = run_cli("site", spec, "--hw", "h100", "--tp", "2", "--pp", "2", "-o", str(out))
    assert r.returncode == 0, r.stderr
    page = (out / "llama3-8b-h100.md").read_text()
    assert "seq 2048, tp 2, pp 2" in page and "context 2048, tp 2, pp 2" in page
    # GPT-2's 12 heads do not split 8 ways: the site says so, writes nothing
    gpt2 = str(MODELS / "gpt2.model")
    bad = run_cli("site", gpt2, "--hw", "h100", "--tp", "8", "-o", str(tmp_path / "none"))
    assert bad.returncode == 2 and "--tp 8 does not divide the 12 heads" in bad.stderr
    assert not (tmp_path / "none").exists()


SERVING = json.loads((Path(__file__).parent / "data" / "measured-tp-serving.json").read_text())

# Llama 3 as Meta's config.json files give it (the specs cite them): layers, hidden size,
# query and KV heads of 128, intermediate size, vocabulary (untied head)
LLAMA = {
    "llama3-70b": (80, 8192, 64, 8, 128, 28_672, 128_256),
    "llama3.1-405b": (126, 16_384, 128, 8, 128, 53_248, 128_256),
}
# what the bound reads of each target (specs/hardware/*.hw, datasheet figures): the
# matrix peak of the run's format (FP8 on Hopper, FP4 on Blackwell), HBM bandwidth,
# NVLink bandwidth per direction, and the memory the driver reports (the fit's)
TARGETS = {
    "h100": (1978.9e12, 3.35e12, 450e9, 81_559 * 2**20),
    "h200": (1978.9e12, 4.8e12, 450e9, 143_771 * 2**20),
    "b200": (9000e12, 8.0e12, 900e9, 183_359 * 2**20),
}
LINK_STEP = 1e-6  # NVLink's latency a collective step (the same .hw files)
# bytes an element: FP8 one; NVFP4 four bits and an 8-bit E4M3 scale per 16 elements
FORMAT_BYTES = {"fp8": 1.0, "nvfp4": 0.5 + 1 / 16}


def hand_decode_step(spec: str, target: str, tp: int, batch: int, context: int, b: float):
    """A decode step of a Llama on one device of tp, by hand: each op's (count, FLOPs or
    None where the op is vector work, bytes, seconds). Every operand in the run's format
    (the bound's generous choice); Megatron's layout: heads, the MLP's columns and the
    vocabulary split tp ways, the norms whole on every rank."""
    L, d, H, KV, hd, ff, V = LLAMA[spec]
    peak, hbm, link, _ = TARGETS[target]
    B, n, h, kv, f = batch, context, H // tp, KV // tp, ff // tp

    def gemm(M: int, N: int, K: int) -> tuple:
        # 2MNK FLOPs; reads A (M×K) and the weight shard (K×N), writes C (M×N)
        flops, nbytes = 2 * M * N * K, (M * K + K * N + M * N) * b
        return flops, nbytes, max(flops / peak, nbytes / hbm)

    def vector(nbytes: float) -> tuple:
        # a norm, rotation, copy or elementwise op: under 4 FLOPs a byte, below the
        # vector units' knee (133.8 TFLOPS over 3.35 or 4.8 TB/s, 150 over 8: 19 to 40)
        return None, nbytes, nbytes / hbm

    def all_reduce(elements: int) -> tuple:
        # Megatron's all-reduce of B·d partial sums. Its bytes as the ring counts them,
        # 2(n−1)/n·S; its time the least of network.py's algorithms on the NVSwitch:
        # one-shot (n−1)·S in 1 step, two-shot 2(n−1)/n·S in 2, NVLS S in 2
        S = elements * b
        time = min((tp - 1) * S / link + LINK_STEP, 2 * (tp - 1) / tp * S / link + 2 * LINK_STEP,
                   S / link + 2 * LINK_STEP)  # fmt: skip
        return None, 2 * (tp - 1) / tp * S, time

    def all_gather(elements: int) -> tuple:
        S = elements * b  # the gathered logits; each rank sends (n−1)/n of them once
        return None, (tp - 1) / tp * S, (tp - 1) / tp * S / link + LINK_STEP

    # attention reads the whole cache, keys and values of its kv heads at n positions
    sdpa_flops = 2 * 2 * B * h * n * hd  # QKᵀ and PV, 2·d_h FLOPs a (query, key) pair each
    sdpa_bytes = (2 * B * n * kv * hd + 2 * B * h * hd) * b  # K, V; Q in, O out
    layer = {
        "norm.0": vector(2 * B * d * b + d * b),  # read x, write y; its weight
        "attn.q_proj": gemm(B, h * hd, d),
        "attn.k_proj": gemm(B, kv * hd, d),
        "attn.v_proj": gemm(B, kv * hd, d),
        "attn.rope": vector(2 * B * (h + kv) * hd * b),  # queries and keys, read and written
        "attn.kv_cache_write": vector(2 * 2 * B * kv * hd * b),  # the new key and value
        "attn.sdpa": (sdpa_flops, sdpa_bytes, max(sdpa_flops / peak, sdpa_bytes / hbm)),
        "attn.o_proj": gemm(B, d, h * hd),
        "attn.all_reduce": all_reduce(B * d),
        "residual.0": vector(3 * B * d * b),
        "norm.1": vector(2 * B * d * b + d * b),
        "mlp.gate_proj": gemm(B, f, d),
        "mlp.up_proj": gemm(B, f, d),
        "mlp.act": vector(2 * B * f * b),
        "mlp.gate_mul": vector(3 * B * f * b),
        "mlp.down_proj": gemm(B, d, f),
        "mlp.all_reduce": all_reduce(B * d),
        "residual.1": vector(3 * B * d * b),
    }
    # the vocabulary-parallel embedding reads B rows (and B int64 ids) and all-reduces
    # them; the head's logits are gathered whole
    return {
        "embed": (1, *vector(2 * B * d * b + 8 * B)),
        "embed.all_reduce": (1, *all_reduce(B * d)),
        **{f"layers.0.{name}": (L, *op) for name, op in layer.items()},
        "norm": (1, *vector(2 * B * d * b + d * b)),
        "lm_head": (1, *gemm(B, V // tp, d)),
        "lm_head.all_gather": (1, *all_gather(B * V)),
    }


def hand_memory(spec: str, tp: int, batch: int, context: int, b: float) -> tuple:
    """(the model's parameters; weights, KV cache and activations on one device) by
    hand."""
    L, d, H, KV, hd, ff, V = LLAMA[spec]
    layer = d * H * hd + 2 * d * KV * hd + H * hd * d + 3 * d * ff  # q, k, v, o; the MLP
    norms = (2 * L + 1) * d  # whole on every rank; everything else splits tp ways
    params = 2 * V * d + L * layer + norms
    weights = ((params - norms) / tp + norms) * b
    kv_cache = L * batch * context * 2 * (KV // tp) * hd * b
    # the most alive at once: the logits' all-gather, its 1/tp input and whole output
    activations = batch * (V // tp + V) * b
    return params, weights, kv_cache, activations


# the best bound over the published figure, each point (the ratio the issue names): the
# 128-in, 2,048-out runs are 2.8-4.5× under it, the 2,048-in, 128-out ones 13-36×, the
# bound leaving their prefill out (2,048 prompt tokens a request, 16 times its 128
# output tokens' GEMM FLOPs)
RATIO = {
    ("llama3-70b", "h100", 128): 3.30,
    ("llama3-70b", "h100", 2048): 12.98,
    ("llama3.1-405b", "b200", 128): 4.46,
    ("llama3.1-405b", "b200", 2048): 35.89,
    ("llama3.1-405b", "h200", 128): 2.79,
    ("llama3.1-405b", "h200", 2048): 27.21,
    ("llama3.1-405b", "h100", 128): 3.28,
    ("llama3.1-405b", "h100", 2048): 24.54,
}


@pytest.mark.parametrize(
    "point", SERVING["points"], ids=lambda p: f"{p['spec']}-{p['hardware']}-tp{p['tp']}-{p['isl']}"
)
def test_published_tensor_parallel_serving_stays_under_the_bound(point: dict) -> None:
    # TensorRT-LLM's max-throughput runs (tests/data/measured-tp-serving.json). The
    # bound is made generous where the run's details are unknown: decode only (prefill
    # costs nothing), every sequence at its shortest context (the input length), the
    # weights' format for the activations and KV cache too, and the largest power-of-two
    # batch whose memory fits each device. No published figure may beat it.
    path = MODELS / f"{point['spec']}.model"
    text = path.read_text()
    base = load_spec(path).name
    spec = parse_spec(text + f"\nmodel q extends {base} {{ dtype = {point['dtype']} }}\n",
                      str(path), "q")  # fmt: skip
    hw = load_hardware(point["hardware"])
    tp, n, b = point["tp"], point["isl"], FORMAT_BYTES[point["dtype"]]
    best, batch, picked = 0.0, 1, None
    while batch <= 16_384:
        w = Workload("decode", batch, context=n, parallel=Parallel(tp=tp))
        r = compile_report(spec, hw, w)
        if not r.totals.memory.fits:
            break
        if r.totals.per_token.tokens_per_s > best:
            best, picked = r.totals.per_token.tokens_per_s, r
        batch *= 2
    assert picked is not None
    assert best >= point["output_tokens_per_s"]
    assert best / point["output_tokens_per_s"] == pytest.approx(
        RATIO[point["spec"], point["hardware"], n], abs=0.005
    )

    # the batch it picks: the most that fit (tokens/s rises with the batch), up to 16,384
    capacity = TARGETS[point["hardware"]][3]

    def fits(batch: int) -> bool:
        return sum(hand_memory(point["spec"], tp, batch, n, b)[1:]) <= capacity

    most = max(2**i for i in range(15) if fits(2**i))
    assert picked.workload.batch == most and (most == 16_384 or not fits(2 * most))
    params, weights, kv_cache, activations = hand_memory(point["spec"], tp, most, n, b)
    assert picked.model.params_total == params
    m = picked.totals.memory
    assert (m.weights, m.kv_cache, m.activations) == pytest.approx(
        (weights, kv_cache, activations), rel=1e-9
    )

    # every op of the step by hand, and the step their roofline times summed one after
    # another (roofline.py: no overlap, so the step is the busy time)
    hand = hand_decode_step(point["spec"], point["hardware"], tp, most, n, b)
    ops = {o.name: o for o in picked.ops}
    assert set(ops) == set(hand)
    for name, (count, flops, nbytes, seconds) in hand.items():
        o = ops[name]
        assert o.count == count, name
        assert o.bytes == pytest.approx(nbytes, rel=1e-9), name
        assert o.time_s == pytest.approx(seconds, rel=1e-9), name
        if flops is not None:
            assert o.flops == flops, name
    step = sum(count * seconds for count, _, _, seconds in hand.values())
    assert picked.totals.time_s == pytest.approx(step, rel=1e-9)
    assert best == pytest.approx(most / step, rel=1e-9)

    # the terms the bound is made of, summed over the step
    def total(kind: str) -> float:
        return sum(o.count * o.bytes for o in picked.ops if o.kind == kind)

    L, d, H, KV, hd, ff, V = LLAMA[point["spec"]]
    # each linear layer's weight shard and the head's read once a step: every weight
    # on the device but the embedding's shard and the norms
    h, kv, f = H // tp, KV // tp, ff // tp
    gemm_params = L * (d * h * hd + 2 * d * kv * hd + h * hd * d + 3 * d * f) + d * V // tp
    assert gemm_params * b == pytest.approx(weights - (V // tp * d + (2 * L + 1) * d) * b,
                                            rel=1e-12)  # fmt: skip
    # beside the weights, a token's rows: q, k, v, gate and up read d each, o h·hd, down
    # ff/tp; they write (h + 2kv)·hd, d, 2·ff/tp and d; the head reads d, writes V/tp
    rows = L * (5 * d + h * hd + f + (h + 2 * kv) * hd + 2 * d + 2 * f) + d + V // tp
    assert total("GEMM") == pytest.approx((gemm_params + most * rows) * b, rel=1e-9)
    # the KV cache read whole once a step, beside the queries and outputs
    assert total("SDPA") == pytest.approx(kv_cache + L * most * 2 * h * hd * b, rel=1e-9)
    # GEMM FLOPs: 2 a weight the GEMMs read, for each of the batch's tokens
    assert kind_flops(picked, "GEMM") == 2 * most * gemm_params
    # tensor-parallel all-reduces: 2 a layer and the embedding's, 2(tp−1)/tp·B·d each
    reduces = [o for o in picked.ops if o.name.endswith("all_reduce")]
    assert sum(o.count for o in reduces) == 2 * L + 1
    link = sum(o.count * o.bytes for o in reduces)
    assert link == pytest.approx((2 * L + 1) * 2 * (tp - 1) / tp * most * d * b, rel=1e-9)


def test_sequence_parallelism_divides_a_layers_activations_by_tp() -> None:
    # Korthikanti et al. 2022, table 2: tensor parallelism alone leaves the norms',
    # residuals' and layer inputs' activations whole on every rank (10·s·b·h of their
    # 34·s·b·h); with sequence parallelism every activation of the layer is split, so a
    # layer keeps 1/t of one device's (the partial sums and gathered inputs are not kept)
    from modelcost.roofline.footprint import kept_for_backward

    def layer(**layout):
        graph = lower(LLAMA8, Workload("train", 1, 2048, parallel=Parallel(**layout)))
        return kept_for_backward(graph)["layers.0"]

    one, tp, sp = layer(), layer(tp=4), layer(tp=4, sp=True)
    assert sp * 4 == one
    assert one / 4 < tp < one  # without SP the replicated parts stay whole
