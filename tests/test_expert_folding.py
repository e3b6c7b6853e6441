"""Expert parallelism folded onto the tp × dp ranks (Megatron-Core's MoE parallel
folding; vLLM's --enable-expert-parallel, SGLang's --tp 8 --ep 8), and the routing
imbalance the kernel-aware estimate takes: figures derived by hand in the comments."""

from __future__ import annotations

import json

import pytest
from conftest import MODELS, run_cli

from modelcost import SpecError, load_spec
from modelcost.estimate.costing import Costing
from modelcost.estimate.estimate import estimate
from modelcost.estimate.kernel_rates import moe_imbalance
from modelcost.ir.graph import Parallel, Workload
from modelcost.language.spec import walk
from modelcost.language.spec_mixers import MoE
from modelcost.lowering.lower import lower
from modelcost.lowering.params import device_params
from modelcost.perfmodel import CollectiveOp
from modelcost.roofline.compile import compile_report, compile_totals
from modelcost.targets.hardware import load_hardware
from modelcost.targets.network import bound, link

DSV3 = load_spec(MODELS / "deepseek-v3.model")
MIXTRAL = load_spec(MODELS / "mixtral-8x7b.model")
H200 = load_hardware("h200")

# DeepSeek-V3 (config.json): d 7168, 256 routed experts of width 2048 (SwiGLU: gate,
# up and down, no bias), top 8, 58 MoE layers of 61 (3 dense first), FP8 weights
# with one fp32 scale per 128 × 128 block
EXPERT = 3 * 7168 * 2048  # 44,040,192 parameters
MOE_LAYERS = 61 - 3


def _moe_op() -> MoE:
    return next(op for op, _ in walk(DSV3.body) if isinstance(op, MoE))


def test_folded_layout_resolves_megatron_cores_groups() -> None:
    # --tp 8 --ep 8 on 8 devices: ep does not divide dp = 1, so the experts fold onto
    # the tp ranks, each expert whole (etp 1), no expert-data-parallel copy
    par = Parallel(tp=8, ep=8)
    assert (par.folded, par.expert_tp, par.expert_gather, par.expert_copies) == (True, 1, 1, 1)
    assert (par.devices, par.label) == (8, "tp 8, ep 8, etp 1")
    # today's attention-DP layout is not folded: ep from dp, each expert over tp
    old = Parallel(tp=2, dp=4, ep=2)
    assert (old.folded, old.expert_tp, old.expert_gather, old.expert_copies) == (False, 2, 1, 2)
    assert old.label == "tp 2, dp 4, ep 2"
    # EP 16 over two nodes of tp 8: the group gathers the tokens of its 2 dp replicas;
    # ep × etp = 8 × 2 over tp × dp = 16 also folds, with each expert over 2 ranks
    assert Parallel(tp=8, dp=2, ep=16).expert_gather == 2
    assert Parallel(tp=8, dp=2, ep=8, etp=2).expert_gather == 2
    # Megatron-Core's rule: ep × etp divides tp × dp; the rest are copies (edp)
    half = Parallel(tp=8, dp=2, ep=8, etp=1)
    assert (half.folded, half.expert_gather, half.expert_copies) == (True, 1, 2)


def test_tp8_ep8_deepseek_v3_expert_weights_per_device() -> None:
    # 256 routed experts over 8 ranks: 32 whole experts a device and layer,
    # 32 × 44,040,192 = 1,409,286,144 parameters; the shared expert and the router
    # shard under tp as before (shared width 2048 / 8 = 256)
    op = _moe_op()
    dense, experts = device_params(op, 8, 8, 1)
    assert experts == 32 * EXPERT == 1_409_286_144
    shared = 3 * 7168 * 256
    router = 7168 * 256 + 256  # Linear(7168, 256) and the fp32 correction bias
    assert dense == shared + router
    graph = lower(DSV3, Workload("decode", 64, context=2048, parallel=Parallel(tp=8, ep=8)))
    assert graph.facts.device_experts == MOE_LAYERS * 32 * EXPERT == 81_738_596_352

    # bytes: FP8 (1 B) plus 4 B of scale per 128 × 128 block: per expert 44,040,192 B
    # + (7168/128)·(2048/128)·3 blocks · 4 B = 44,040,192 + 10,752 = 44,050,944 B; at
    # EP 16 (--tp 8 --dp 2) a device holds 16 experts a layer instead of 32, the dense
    # part unchanged (tp 8): 58 · 16 · 44,050,944 = 40,879,276,032 B fewer
    def weight_bytes(par: Parallel) -> float:
        return lower(DSV3, Workload("decode", 128, context=2048, parallel=par)).facts.weight_bytes

    drop = weight_bytes(Parallel(tp=8, ep=8)) - weight_bytes(Parallel(tp=8, dp=2, ep=16))
    assert drop == MOE_LAYERS * 16 * 44_050_944 == 40_879_276_032
    # and 32 whole experts weigh what 1/8 of each of the 256 does (tp 8 alone)
    assert weight_bytes(Parallel(tp=8, ep=8)) == weight_bytes(Parallel(tp=8))


def test_tp8_ep8_moves_no_tokens_beyond_the_tp_all_reduce() -> None:
    # vLLM runs no all-to-all for TP with EP on one replica (use_all2all_kernels is
    # dp_size > 1 and use_ep): each rank holds all 64 tokens after attention, runs
    # its 32 experts on the rows routed to them (64 · 8 / 8 = 64 on the mean) and the
    # layer's tp all-reduce (64 · 7168 elements) sums the ranks' partial outputs
    r = compile_report(DSV3, H200, Workload("decode", 64, None, 2048, None, Parallel(tp=8, ep=8)))
    moe = [o for o in r.ops if ".moe." in o.name]
    coll = [o for o in moe if o.kind == "Collective"]
    assert [(o.name.split(".moe.")[1], o.shape["elements"]) for o in coll] == [
        ("all_reduce", 64 * 7168)
    ]
    gate_up = next(o for o in moe if o.name.endswith("experts.gate_up"))
    # M = 64 rows; N = 2 · 2048 (gate and up, whole: etp 1); hit: the expected experts
    # of 256 that 64 tokens' top-8 reach, E·(1 − (248/256)^64) / 8 of this rank's 32
    assert (gate_up.shape["M"], gate_up.shape["N"]) == (64, 4096)
    assert gate_up.shape["G"] == pytest.approx(256 * (1 - (248 / 256) ** 64) / 8)


def test_ep16_over_two_nodes_gathers_over_the_scale_out_link() -> None:
    # --tp 8 --dp 2 --ep 16, decode batch 128: each replica holds T = 64 tokens; the
    # expert group spans both replicas, so it all-gathers their tokens before the
    # experts (vLLM's default allgather_reducescatter) and reduce-scatters after:
    # S = 2 · 64 · 7168 = 917,504 elements, bf16, of which each rank sends and
    # receives (2 − 1)/2 · S · 2 B = 917,504 B. Its 2 ranks are tp = 8 apart, one per
    # 8-GPU node: the scale-out link, 400 Gb/s = 50 GB/s a direction, 2 µs a step,
    # bound 917,504 / 50e9 + 2e-6 = 20.35008 µs
    r = compile_report(DSV3, H200, Workload("decode", 128, None, 2048, None,
                                            Parallel(tp=8, dp=2, ep=16)))  # fmt: skip
    moe = [o for o in r.ops if o.name.startswith("layers.3.moe.")]
    coll = {o.name.removeprefix("layers.3.moe."): o for o in moe if o.kind == "Collective"}
    assert sorted(coll) == ["all_reduce", "combine.reduce_scatter", "dispatch.all_gather"]
    for name in ("dispatch.all_gather", "combine.reduce_scatter"):
        o = coll[name]
        assert (o.shape["elements"], o.shape["group"], o.shape["stride"]) == (917_504, 2, 8)
        assert o.bytes == 917_504
        assert o.link == "scale-out"
        assert o.time_s == pytest.approx(917_504 / 50e9 + 2e-6)
    op = CollectiveOp("all_gather", 917_504, 2, stride=8)
    assert link(op, H200) == "scale-out"
    assert bound(op, H200)[0] == pytest.approx(20.35008e-6)
    # each rank's experts take the mean 2 · 64 · 8 / 16 = 64 rows
    gate_up = next(o for o in moe if o.name.endswith("experts.gate_up"))
    assert gate_up.shape["M"] == 64


def test_moe_imbalance_moves_the_estimate_and_not_the_bound() -> None:
    assert moe_imbalance()[0] == 2.56  # specs/kernels/library.json `moe`: TensorRT-LLM
    # a prefill of 4 × 4096 tokens, whose expert GEMMs are compute-bound (a decode
    # step's read their weights whatever the rows' spread): TP 8 + EP 8 (the hottest
    # expert's rows), and attention-DP with EP 8 (its all-to-all too)
    for par in (Parallel(tp=8, ep=8), Parallel(dp=8, ep=8)):
        w = Workload("prefill", 4 if par.tp > 1 else 8, 4096, parallel=par)
        flat = compile_totals(DSV3, H200, w, Costing(kernels=True, moe_imbalance=1.0))[1]
        hot = compile_totals(DSV3, H200, w, Costing(kernels=True, moe_imbalance=4.0))[1]
        default = compile_totals(DSV3, H200, w, Costing(kernels=True))[1]
        assert flat.time_s == hot.time_s == default.time_s  # the bound keeps the mean load
        assert flat.estimate_s < default.estimate_s < hot.estimate_s
    # an all-to-all (attention-DP's dispatch): the hottest rank receives imbalance ×
    # the mean, so its estimate is the same exchange of 2 × the elements
    a2a = CollectiveOp("all_to_all", 8 * 8 * 7168, 8)
    double = CollectiveOp("all_to_all", 2 * 8 * 8 * 7168, 8)
    roof = bound(a2a, H200)[0]
    assert estimate(a2a, 0, a2a.bytes(), roof, H200, imbalance=2.0).time_s == pytest.approx(
        estimate(double, 0, double.bytes(), roof, H200, imbalance=1.0).time_s
    )
    with pytest.raises(ValueError, match="at least 1"):
        Costing(moe_imbalance=0.5)


def test_moe_imbalance_on_the_command_line() -> None:
    spec = str(MODELS / "deepseek-v3.model")
    base = ("compile", spec, "--hw", "h200", "--tp", "8", "--ep", "8", "--batch", "4",
            "--seq", "4096", "--estimate", "kernels", "--format", "json")  # fmt: skip

    def totals(*more: str) -> dict:
        r = run_cli(*base, *more)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)["reports"][0]["totals"]

    one, four = totals("--moe-imbalance", "1"), totals("--moe-imbalance", "4")
    assert one["time_s"] == four["time_s"] and one["estimate_s"] < four["estimate_s"]
    r = run_cli(*base, "--moe-imbalance", "0.5")
    assert r.returncode == 2 and "at least 1" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        # ep × etp = 4 is not whole tp groups of 8
        (
            ["--tp", "8", "--ep", "4"],
            "ep × etp = 4 × 1 = 4 must divide tp × dp = 8 × 1 = 8 and be a multiple of tp = 8",
        ),
        # 16 ranks of experts on 8 devices
        (["--tp", "8", "--ep", "16"], "ep × etp = 16 × 1 = 16 must divide tp × dp"),
        (["--tp", "8", "--ep", "8", "--etp", "2"], "ep × etp = 8 × 2 = 16 must divide"),
    ],
)
def test_folded_layouts_that_cannot_be_are_exit_2_errors(args, message) -> None:
    r = run_cli("compile", str(MODELS / "deepseek-v3.model"), "--hw", "h200", *args)
    assert r.returncode == 2, args
    assert message in r.stderr and "Traceback" not in r.stderr


def test_an_etp_that_does_not_divide_the_expert_width_is_refused() -> None:
    # Mixtral's experts are 14,336 wide, which 3 does not divide (14,336 = 2^11 · 7)
    with pytest.raises(SpecError, match="--etp 3 does not divide the expert width d_ff = 14336"):
        lower(MIXTRAL, Workload("decode", 3, parallel=Parallel(dp=3, etp=3)))
    r = run_cli("compile", str(MODELS / "mixtral-8x7b.model"), "--hw", "h200", "--dp", "3",
                "--etp", "3", "--batch", "3")  # fmt: skip
    assert r.returncode == 2
    assert "--etp 3 does not divide the expert width" in r.stderr
    assert "Traceback" not in r.stderr


def test_serve_takes_the_folded_layouts() -> None:
    spec = str(MODELS / "deepseek-v3.model")
    for layout, devices in ((("--tp", "8", "--ep", "8"), 8),
                            (("--tp", "8", "--dp", "2", "--ep", "16"), 16)):  # fmt: skip
        r = run_cli("serve", spec, "--hw", "h200", *layout, "--isl", "1000", "--osl", "1000",
                    "--concurrency", "64", "--format", "json")  # fmt: skip
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        assert (out["devices"], out["layout"].endswith("etp 1")) == (devices, True)


def test_serve_takes_the_moe_imbalance() -> None:
    # DeepSeek-V3 attention-DP 8 + EP 8 on 8 H200, 64 sequences a replica: the
    # estimate's TPOT reads the hottest expert rank's load (the default 2.56,
    # specs/kernels/library.json `moe`), the bound keeps the mean (docs/conventions.md)
    from modelcost.analyses.disagg import serve_disagg
    from modelcost.analyses.pools import Pool, Pools
    from modelcost.analyses.serving import serve

    par = Parallel(dp=8, ep=8)
    flat = serve(DSV3, H200, 1024, 1024, par, 64, moe_imbalance=1.0)
    default = serve(DSV3, H200, 1024, 1024, par, 64)
    same = serve(DSV3, H200, 1024, 1024, par, 64, moe_imbalance=2.56)
    assert flat.bound.tpot_s == default.bound.tpot_s
    assert flat.tpot_s < default.tpot_s == same.tpot_s
    # the decode pool of a disaggregated run builds its scenario with it too
    pools = Pools(prefill=Pool(count=1, parallel=par), decode=Pool(count=1, parallel=par))
    d_flat = serve_disagg(DSV3, H200, 1024, 1024, pools, 64, moe_imbalance=1.0)
    d_default = serve_disagg(DSV3, H200, 1024, 1024, pools, 64)
    assert d_flat.tpot_s == flat.tpot_s and d_default.tpot_s == default.tpot_s

    base = ("serve", str(MODELS / "deepseek-v3.model"), "--hw", "h200", "--isl", "1024",
            "--osl", "1024", "--dp", "8", "--ep", "8", "--concurrency", "64",
            "--format", "json")  # fmt: skip
    r1, r0 = run_cli(*base, "--moe-imbalance", "1"), run_cli(*base)
    assert r1.returncode == 0 and r0.returncode == 0, r1.stderr + r0.stderr
    one, dflt = json.loads(r1.stdout), json.loads(r0.stdout)
    assert one["tpot_s"] == flat.tpot_s and dflt["tpot_s"] == default.tpot_s
    assert one["bound"]["tpot_s"] == dflt["bound"]["tpot_s"]
    r = run_cli(*base, "--moe-imbalance", "0.5")
    assert r.returncode == 2 and "at least 1" in r.stderr and "Traceback" not in r.stderr
