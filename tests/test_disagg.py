"""Disaggregated prefill and decode (issue 23, item 2): the KV transfer of one request,
TTFT = the prefill + the transfer, throughput = the slower pool's, the pool search, and
what serve --disagg refuses."""

import json

import pytest
from conftest import MODELS, run_cli

from modelcost import load_spec
from modelcost.analyses.disagg import search_disagg, serve_disagg
from modelcost.analyses.pools import Pool, Pools, parse_pools
from modelcost.analyses.serving import serve
from modelcost.base.errors import SpecError
from modelcost.ir.graph import Parallel
from modelcost.targets.hardware import load_hardware

LLAMA70_FP8 = load_spec(MODELS / "llama3-70b-fp8.model")  # kv_dtype fp8_e4m3
LLAMA8 = load_spec(MODELS / "llama3-8b.model")
H200 = load_hardware("h200")
# Llama 3 70B's KV cache per token: 2 (K and V) × 80 layers × 8 KV heads × 128 × 1 B (fp8)
PER_TOKEN = 2 * 80 * 8 * 128 * 1
assert PER_TOKEN == 163_840
REQUEST = PER_TOKEN * 4096  # isl 4096: 671,088,640 B
# H200 (specs/hardware/h200.hw): scale-out 400 Gb/s = 50 GB/s per device and direction,
# 2 µs; scale-up 900 GB/s bidirectional = 450 GB/s a direction, 1 µs; domain 8
OUT_BW, OUT_LAT, UP_BW, UP_LAT = 50e9, 2e-6, 450e9, 1e-6
# Mooncake Transfer Engine, 190 GB/s on 8 × 400 Gb/s NICs (specs/kernels/disagg.json)
MOONCAKE = 190e9 / 8


def pools(text: str) -> Pools:
    return parse_pools(text)


def test_parse_pools() -> None:
    p = parse_pools("2xtp4:1xtp8")
    assert p.prefill == Pool(count=2, parallel=Parallel(tp=4))
    assert p.decode == Pool(count=1, parallel=Parallel(tp=8))
    assert p.devices == 16
    # TensorRT-LLM's CTX=1×TEP4 : GEN=2×DEP8 (attention tp 4 with the experts folded
    # over ep 4; attention dp 8 with ep 8)
    p = parse_pools("tp4ep4:2xdp8ep8")
    assert p.prefill == Pool(count=1, parallel=Parallel(tp=4, ep=4))
    assert p.prefill.parallel.folded
    assert p.decode == Pool(count=2, parallel=Parallel(dp=8, ep=8))
    assert p.devices == 4 + 16


def test_the_kv_transfer_of_one_request_over_the_scale_out_link() -> None:
    # 8 prefill devices and 1 decode device: 9 > the scale-up domain of 8, so the cache
    # crosses the scale-out link, whole (tp 1 on both sides): 671,088,640 B
    d = serve_disagg(LLAMA70_FP8, H200, 4096, 128, pools("8xtp1:1xtp1"), concurrency=1)
    t = d.transfer
    assert t.bytes == REQUEST == 671_088_640
    assert t.sent_per_device == t.received_per_device == REQUEST
    assert t.link == "scale-out"
    assert t.link_bandwidth == OUT_BW
    # bound: 2 µs + 671,088,640 B / 50 GB/s = 2 µs + 13.4217728 ms
    assert t.bound_s == pytest.approx(OUT_LAT + REQUEST / OUT_BW, rel=1e-12)
    assert t.bound_s == pytest.approx(0.0134237728, rel=1e-12)
    # estimate: Mooncake's 23.75 GB/s a NIC: 28.2564 ms + 2 µs
    assert t.bandwidth == MOONCAKE
    assert t.time_s == pytest.approx(OUT_LAT + REQUEST / MOONCAKE, rel=1e-12)


def test_the_transfer_moves_the_larger_shard_of_the_two_layouts() -> None:
    # prefill tp 4 holds 2 KV heads a device (1/4: 167,772,160 B), decode tp 8 holds 1
    # (1/8: 83,886,080 B); 2 × 4 + 8 = 16 devices: scale-out
    d = serve_disagg(LLAMA70_FP8, H200, 4096, 128, pools("2xtp4:1xtp8"), concurrency=8)
    t = d.transfer
    assert (t.sent_per_device, t.received_per_device) == (REQUEST / 4, REQUEST / 8)
    assert t.link == "scale-out"
    assert t.bound_s == pytest.approx(OUT_LAT + 167_772_160 / OUT_BW, rel=1e-12)  # 3.357 ms
    # both pools in one scale-up domain (4 + 4 = 8 devices): NVLink, at the link (no
    # published scale-up transfer rate)
    d = serve_disagg(LLAMA70_FP8, H200, 4096, 128, pools("1xtp4:1xtp4"), concurrency=8)
    t = d.transfer
    assert t.link == "scale-up"
    assert t.link_bandwidth == t.bandwidth == UP_BW
    assert t.time_s == t.bound_s == pytest.approx(UP_LAT + 167_772_160 / UP_BW, rel=1e-12)


def test_ttft_is_the_prefill_and_the_transfer() -> None:
    d = serve_disagg(LLAMA70_FP8, H200, 4096, 256, pools("2xtp4:1xtp8"), concurrency=16)
    assert d.ttft_s == d.prefill.step_s + d.transfer.time_s
    # the bound: one request's prefill alone, serve's bound TTFT on the prefill layout
    alone = serve(LLAMA70_FP8, H200, 4096, 256, Parallel(tp=4), concurrency=1).bound.ttft_s
    assert d.bound.ttft_s == alone + d.transfer.bound_s
    # the prefill pool's step: the engine's prefill tokens a step, whole prompts (vLLM's
    # 16,384 on H200: 4 prompts of 4,096)
    assert d.prefill.batch == 4
    # the decode pool's TPOT is serve's on its layout at the same concurrency
    same = serve(LLAMA70_FP8, H200, 4096, 256, Parallel(tp=8), concurrency=16)
    assert (d.tpot_s, d.bound.tpot_s) == (same.tpot_s, same.bound.tpot_s)
    assert d.latency_s == d.ttft_s + 256 * d.tpot_s  # vLLM adds no decode step


def test_throughput_is_the_slower_pools() -> None:
    d = serve_disagg(LLAMA70_FP8, H200, 4096, 1024, pools("2xtp4:1xtp8"))
    p, q = d.prefill, d.decode
    # prefill: 2 instances × 4 prompts a step; decode: 1 instance × n sequences over
    # 1,024 steps of TPOT
    assert p.requests_per_s == 2 * 4 / p.step_s
    assert q.requests_per_s == pytest.approx(q.batch / (1024 * q.step_s), rel=1e-12)
    assert p.requests_per_s < q.requests_per_s
    assert d.limited_by == "prefill"
    assert d.output_tokens_per_s == p.requests_per_s * 1024
    assert d.devices == 16
    assert d.output_tokens_per_s_device == d.output_tokens_per_s / 16
    assert d.bound.output_tokens_per_s == min(p.bound_requests_per_s,
                                              q.bound_requests_per_s) * 1024  # fmt: skip
    # more prefill instances: the decode pool limits it
    e = serve_disagg(LLAMA70_FP8, H200, 4096, 1024, pools("4xtp4:1xtp8"))
    assert e.limited_by == "decode"
    assert e.output_tokens_per_s == e.decode.requests_per_s * 1024


def test_the_pool_search_picks_the_most_tokens_per_device() -> None:
    # Llama 3 8B on H200 within 4 devices: each pool tp 1, 2 or 4; no pair of counts
    # within the budget beats the chosen one (every count tried below by serve_disagg)
    found = search_disagg(LLAMA8, H200, 1024, 256, 4, tpot=0.02)
    assert found.chosen is not None
    # tp 4 and a device of the other pool exceed the budget: tp 1 and 2 each
    layouts = ("one device", "tp 2")
    assert [(s.prefill.layout, s.decode.layout) for s in found.tried] == [
        (a, b) for a in layouts for b in layouts
    ]
    best = found.chosen.output_tokens_per_s_device
    for a in (1, 2):
        for b in (1, 2):
            for xp in range(1, 4):
                for yd in range(1, 4):
                    if xp * a + yd * b > 4:
                        continue
                    one = serve_disagg(LLAMA8, H200, 1024, 256,
                                       pools(f"{xp}xtp{a}:{yd}xtp{b}"), tpot=0.02)  # fmt: skip
                    assert not one.meets_targets or one.output_tokens_per_s_device <= best
    # the chosen point is what serve_disagg says of its pools
    c = found.chosen
    again = serve_disagg(LLAMA8, H200, 1024, 256,
                         parse_pools(f"{c.prefill.count}x{_axes(c.prefill.layout)}:"
                                     f"{c.decode.count}x{_axes(c.decode.layout)}"),
                         tpot=0.02)  # fmt: skip
    assert again == c


def _axes(layout: str) -> str:
    return "tp1" if layout == "one device" else layout.replace(" ", "")


def test_the_cli_answers_in_every_format() -> None:
    base = ("serve", str(MODELS / "llama3-70b-fp8.model"), "--hw", "h200", "--isl", "4096",
            "--osl", "1024", "--disagg", "2xtp4:1xtp8")  # fmt: skip
    r = run_cli(*base, "--format", "json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["transfer"]["bytes"] == REQUEST
    assert got["prefill"]["count"] == 2 and got["decode"]["layout"] == "tp 8"
    text = run_cli(*base).stdout
    assert "KV transfer" in text and "671 MB a request over the scale-out link" in text
    assert "Mooncake" in text
    html = run_cli(*base, "--format", "html").stdout
    assert "KV transfer" in html and "<table" in html
    csv = run_cli(*base, "--format", "csv").stdout
    assert "transfer_bytes" in csv.splitlines()[0]
    r = run_cli("serve", str(MODELS / "llama3-8b.model"), "--hw", "h200", "--isl", "1024",
                "--osl", "256", "--disagg", "--search", "--devices", "4",
                "--format", "md")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "chosen: " in r.stdout and "| prefill | decode |" in r.stdout


@pytest.mark.parametrize(("value", "column", "message"), [
    ("0xtp4:1xtp8", 1, "the prefill pool needs 1 to 1,024 instances, got 0"),
    ("2xtp4:0xtp8", 7, "the decode pool needs 1 to 1,024 instances, got 0"),
    ("2xtp4", 6, "expected PREFILL:DECODE"),
    ("2xtq4:tp8", 3, "'tq' is not a layout axis"),
    ("2xtp0:tp8", 3, "tp must be at least 1, got 0"),
    ("tp4:tp8tp8", 8, "tp given twice in the decode pool"),
])  # fmt: skip
def test_malformed_pools_are_refused_at_their_column(value: str, column: int,
                                                     message: str) -> None:  # fmt: skip
    with pytest.raises(SpecError) as err:
        parse_pools(value)
    assert message in err.value.message
    assert (err.value.line, err.value.column) == (1, column)
    r = run_cli("serve", str(MODELS / "llama3-8b.model"), "--hw", "h200", "--isl", "1024",
                "--osl", "256", "--disagg", value)  # fmt: skip
    assert r.returncode == 2
    assert f"--disagg:1:{column}: error: " in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize(("flags", "message"), [
    (["--disagg", "1xtp3:1xtp8"], "the prefill pool (tp 3): --tp 3 does not divide the 64 heads"),
    (["--disagg", "1xtp8:1xtp3"], "the decode pool (tp 3)"),
    (["--disagg", "1xtp1:1xtp1", "--isl", "128K"], "the prefill pool (one device): not one"),
    (["--disagg", "1xtp4:1xtp8", "--budget", "8192"], "runs no prefill chunk"),
    (["--disagg", "1xtp4:1xtp8", "--tp", "2"], "leave out the layout flags"),
    (["--disagg", "1xtp4:1xtp8", "--search"], "--search chooses the pools"),
    (["--disagg", "--search"], "needs a device budget"),
    (["--disagg", "--search", "--devices", "1"], "the device budget must be 2 to 512"),
    (["--disagg"], "--disagg needs the pools"),
    (["--devices", "8"], "--devices is a search's budget"),
    (["--disagg", "1xtp4:1xtp8", "--devices", "8"], "--devices is --disagg --search's"),
    (["--disagg", "1xtp4:1xtp8", "--speculative"], "leave out --speculative"),
])  # fmt: skip
def test_serve_disagg_refuses_what_it_cannot_run(flags: list[str], message: str) -> None:
    args = ["serve", str(MODELS / "llama3-70b.model"), "--hw", "h200", "--isl", "4096",
            "--osl", "256", *flags]  # fmt: skip
    r = run_cli(*args)
    assert r.returncode == 2, r.stdout
    assert message in r.stderr and "Traceback" not in r.stderr


# docs/serving.md's disaggregated rows, as the table gives them (tokens/s per device of
# the estimate and of the bound, one decimal)
@pytest.mark.parametrize(("args", "device", "bound", "limited_by"), [
    (["specs/models/llama3-70b-fp8.model", "--hw", "h200", "--isl", "4096", "--osl", "1024",
      "--disagg", "2xtp4:1xtp8"], 701.0, 1043.8, "prefill"),
    (["specs/models/deepseek-v3.model", "--hw", "gb200", "--isl", "4400", "--osl", "1200",
      "--engine", "trtllm", "--tpot", "20ms", "--disagg", "tp4ep4:2xdp8ep8"],
     288.4, 499.3, "decode"),
])  # fmt: skip
def test_the_documented_commands(args: list[str], device: float, bound: float,
                                 limited_by: str) -> None:  # fmt: skip
    r = run_cli("serve", *args, "--format", "json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert round(got["output_tokens_per_s_device"], 1) == device
    assert round(got["bound"]["output_tokens_per_s_device"], 1) == bound
    assert got["limited_by"] == limited_by


def test_the_pool_search_never_goes_over_the_device_budget() -> None:
    # 6 devices: a tp 4 pool beside a tp 4 pool is 8, over the budget, so it is refused
    # (said so), never tried; every pair tried fits in 6
    spec = load_spec(MODELS / "llama3-70b-fp8.model")
    found = search_disagg(spec, "h200", 1024, 256, devices=6)
    assert found.tried and all(s.devices <= 6 for s in found.tried)
    assert any(r.endswith("over the budget of 6 devices (one instance each), e.g. tp 4 : tp 4")
               for r in found.refused)  # fmt: skip
    assert found.chosen is None or found.chosen.devices <= 6


def test_the_disaggregated_search_takes_each_objective() -> None:
    # Llama 3 8B on H100 within 4 devices, 128 + 128 tokens: `devices` takes the smallest
    # pair, one instance each (1 + 1 devices: 2, the fewest two pools can have);
    # `latency` decodes one sequence a replica (the lowest TPOT a pool can give); the
    # default the most output tokens/s per device
    spec = load_spec(MODELS / "llama3-8b.model")
    fewest = search_disagg(spec, "h100", 128, 128, devices=4, objective="devices").chosen
    assert fewest is not None and fewest.devices == 2
    assert (fewest.prefill.count, fewest.decode.count) == (1, 1)
    fastest = search_disagg(spec, "h100", 128, 128, devices=4, objective="latency")
    assert fastest.objective == "latency"
    assert fastest.chosen is not None and fastest.chosen.decode.batch == 1
    assert fastest.chosen.tpot_s == min(s.tpot_s for s in fastest.tried)
    most = search_disagg(spec, "h100", 128, 128, devices=4).chosen
    assert most is not None and most.output_tokens_per_s_device == max(
        s.output_tokens_per_s_device for s in search_disagg(spec, "h100", 128, 128, 4).tried
    )
    r = run_cli("serve", str(MODELS / "llama3-8b.model"), "--hw", "h100", "--isl", "128",
                "--osl", "128", "--disagg", "--search", "--devices", "4",
                "--objective", "devices", "--format", "json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["chosen"]["devices"] == 2


def test_the_pool_search_tries_expert_parallel_pools_for_a_moe_model() -> None:
    # a MoE model's pools are tried as `serve --search` tries layouts: tp, and the experts
    # over all ranks with attention over tp × dp (TensorRT-LLM's TEP and DEP pools); for
    # a dense model only tp. DeepSeek-R1's published CTX = TEP4, GEN = DEP8 is among them
    from modelcost.analyses.disagg import candidate_layouts

    moe = {p.label for p in candidate_layouts(load_spec(MODELS / "deepseek-v3.model"),
                                              load_hardware("gb200"))}  # fmt: skip
    assert {"tp 4, ep 4, etp 1", "dp 8, ep 8"} <= moe
    dense = [p.label or "tp 1" for p in candidate_layouts(load_spec(MODELS / "llama3-8b.model"),
                                                          load_hardware("h100"))]  # fmt: skip
    assert dense == ["tp 1", "tp 2", "tp 4", "tp 8"]


def test_a_pool_the_model_cannot_run_on_is_pointed_at() -> None:
    # the decode side of `1xtp8:1xtp3` starts at column 7 and is 5 wide: tp 3 does not
    # split 64 heads
    r = run_cli("serve", str(MODELS / "llama3-70b.model"), "--hw", "h200", "--isl", "4096",
                "--osl", "256", "--disagg", "1xtp8:1xtp3")  # fmt: skip
    assert r.returncode == 2 and "Traceback" not in r.stderr
    lines = r.stderr.splitlines()
    assert lines[0].startswith("--disagg:1:7: error: the decode pool (tp 3)")
    assert lines[1:3] == ["  1xtp8:1xtp3", "        ^^^^^"]
