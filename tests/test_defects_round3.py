"""Regression tests for the wrong answers of issue 32 (no wrong answer, round three).

Each test names the item it guards; each failed before its fix. Item 4 (every
achievable peak at or above the published kernels of its part) is guarded in
tests/test_hardware.py beside the rule's other tests.
"""

import json
import re
import tomllib

import pytest
from conftest import MODELS, ROOT, run_cli

from modelcost import load_spec
from modelcost.analyses.disagg import serve_disagg
from modelcost.analyses.pools import Pool, Pools
from modelcost.analyses.scenario import Scenario
from modelcost.analyses.serving import serve
from modelcost.analyses.serving_records import Engine
from modelcost.base.errors import SpecError
from modelcost.ir.graph import ONE_DEVICE, Parallel, Phase, Workload
from modelcost.roofline.compile import compile_report
from modelcost.targets.hardware import load_hardware

LLAMA8 = load_spec(MODELS / "llama3-8b.model")
H200 = load_hardware("h200")
SERVE_8B = ("serve", str(MODELS / "llama3-8b.model"), "--hw", "h200")

# ---- 1. an engine's cap is not what fits: both said, and which binds


def test_two_token_requests_fit_by_the_hundred_thousand_under_a_cap_of_1024() -> None:
    # vLLM's default: the KV cache within 0.9 of the device with the weights and the
    # activations (gpu_memory_utilization), at most 1,024 sequences (max_num_seqs on
    # a part of at least 70 GiB; specs/kernels/engines.json)
    s = serve(LLAMA8, H200, 1, 1)
    assert (s.max_concurrency, s.engine_cap, s.concurrency_binds) == (1024, 1024, "engine cap")
    n = s.concurrency_in_memory
    # found exactly: n sequences' KV (2 positions × 32 layers × 8 KV heads × 128 × K, V
    # × 2 B = 262,144 B each) fit the room vLLM leaves beside the weights and n's
    # activations, n + 1 do not (before the fix: 1,024 was said to be all that fit)
    sc = Scenario(LLAMA8, H200, ONE_DEVICE, 1, 1, Engine())

    def fits(k: int) -> bool:
        held, kv, act, capacity = sc.memory(k)
        return kv <= sc.profile.memory.kv_room(capacity, held, act)

    assert fits(n) and not fits(n + 1)
    assert n == 227_046
    assert s.concurrency_said == (
        "1,024 sequences per replica: vLLM's max_num_seqs caps them; the memory holds 227,046"
    )
    assert s.engine_cap_said.startswith(
        "1,024 sequences (vLLM's max_num_seqs: vllm/engine/arg_utils.py get_batch_defaults"
    )


def test_the_cap_and_the_fit_in_every_format() -> None:
    args = (*SERVE_8B, "--isl", "1", "--osl", "1")
    text = run_cli(*args)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert "concurrency      1,024 per replica" in lines
    assert ("most that run    1,024 sequences per replica: vLLM's max_num_seqs caps them; the "
            "memory holds 227,046") in lines  # fmt: skip
    assert any(ln.startswith("engine cap       1,024 sequences (vLLM's max_num_seqs: vllm/")
               for ln in lines)  # fmt: skip
    data = json.loads(run_cli(*args, "--format", "json").stdout)
    assert (data["max_concurrency"], data["concurrency_in_memory"], data["engine_cap"],
            data["concurrency_binds"]) == (1024, 227_046, 1024, "engine cap")  # fmt: skip
    csv = run_cli(*args, "--format", "csv").stdout.splitlines()
    head = csv[0].split(",")
    assert {"concurrency_in_memory", "engine_cap", "concurrency_binds"} <= set(head)
    md = run_cli(*args, "--format", "md").stdout
    assert "| most that run | 1,024 sequences per replica: vLLM's max_num_seqs caps them" in md
    html = run_cli(*args, "--format", "html").stdout
    assert "vLLM&#39;s max_num_seqs caps them; the memory holds 227,046" in html


def test_the_memory_binds_where_it_holds_fewer_than_the_cap() -> None:
    s = serve(LLAMA8, H200, 1024, 1024)
    assert (s.max_concurrency, s.concurrency_in_memory, s.concurrency_binds) == (445, 445, "memory")
    assert s.concurrency_said == (
        "445 sequences per replica: the memory holds them; vLLM's max_num_seqs is 1,024"
    )
    # SGLang caps nothing: the memory alone bounds the batch (engines.json)
    g = serve(LLAMA8, H200, 1024, 1024, engine=Engine(name="sglang"))
    assert (g.engine_cap, g.concurrency_binds) == (None, "memory")
    assert g.concurrency_said.endswith("the memory holds them; the engine has no cap")
    assert g.engine_cap_said.startswith("none (SGLang: not found: SGLang sizes")


def test_a_token_budget_binds_below_the_memory() -> None:
    # 8,192 tokens a step hold 444 decodes and the ⌈444 × 1024 / 1024⌉ = 444 prompt
    # tokens of the chunk beside them, and their 1 prompt a step: the memory holds 445
    s = serve(LLAMA8, H200, 1024, 1024, engine=Engine(budget=8192))
    assert (s.max_concurrency, s.concurrency_in_memory) == (444, 445)
    assert s.concurrency_binds == "token budget"


def test_pools_and_arrivals_say_the_cap_too() -> None:
    d = serve_disagg(LLAMA8, H200, 64, 64, Pools(Pool(1, ONE_DEVICE), Pool(1, ONE_DEVICE)))
    assert (d.decode.max_batch, d.decode.in_memory, d.decode.binds) == (1024, 7019, "engine cap")
    r = run_cli(*SERVE_8B, "--isl", "64", "--osl", "64", "--rate", "10", "--requests", "10",
                "--concurrency", "5000")  # fmt: skip
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == (
        "modelcost: error: --concurrency 5,000: at most 1,024 sequences per replica: vLLM's "
        "max_num_seqs caps them; the memory holds 7,019\n"
    )


# ---- 2. an imbalance past every routed token: refused, not a traceback


def test_an_imbalance_past_every_routed_token_is_refused() -> None:
    r = run_cli("serve", str(MODELS / "deepseek-v3.model"), "--hw", "h200", "--tp", "8",
                "--isl", "128", "--osl", "128", "--moe-imbalance", "1e308")  # fmt: skip
    assert (r.returncode, r.stdout) == (2, ""), r.stderr
    assert "Traceback" not in r.stderr
    # the hottest expert holds at most every token: 256 experts, top 8, so 256/8 = 32×
    # the mean load (tokens × 8 / 256 an expert)
    assert r.stderr == (
        "modelcost: error: --moe-imbalance 1e+308: the hottest expert holds at most every "
        "routed token, 32× the mean (256 experts, each token routed to 8)\n"
        "  hint: use a load over the mean from 1 to 32\n"
    )


def test_the_limit_itself_runs_and_the_api_refuses_past_it() -> None:
    deepseek = load_spec(MODELS / "deepseek-v3.model")
    w = Workload(Phase.decode, 64, context=256, parallel=Parallel(tp=8))
    at = compile_report(deepseek, H200, w, estimate="kernels", how=None)
    assert at.totals.estimate_s is not None
    from modelcost.estimate.costing import costing

    # every routed token on one expert (32× the mean): the hottest takes all 64 × 8 rows
    # of the layer, and the estimate stays finite
    full = compile_report(deepseek, H200, w, how=costing(estimate="kernels", moe_imbalance=32))
    assert full.totals.estimate_s is not None and full.totals.estimate_s > at.totals.estimate_s
    with pytest.raises(SpecError, match="at most every routed token, 32× the mean"):
        compile_report(deepseek, H200, w, how=costing(estimate="kernels", moe_imbalance=32.5))
    # Mixtral: 8 experts, top 2: at most 4× the mean
    mixtral = load_spec(MODELS / "mixtral-8x7b.model")
    with pytest.raises(SpecError, match=re.escape("4× the mean (8 experts, each token routed")):
        serve(mixtral, H200, 128, 128, moe_imbalance=5)


# ---- 3. advice ranked by what it costs, the cheapest first, each with its step time

TRAIN_70B = ("compile", str(MODELS / "llama3-70b.model"), "--hw", "h100", "--phase", "train",
             "--batch", "512", "--seq", "4096", "--tp", "8", "--pp", "4", "--dp", "8",
             "--zero", "1", "--recompute", "selective", "--microbatches", "16")  # fmt: skip


def test_the_advice_names_the_cheapest_fix_first() -> None:
    r = run_cli(*TRAIN_70B)
    assert r.returncode == 0, r.stderr
    (warning,) = [ln for ln in r.stdout.splitlines() if ln.startswith("warning:")]
    # before: "it fits with --recompute full", a third more compute; more microbatches
    # (a smaller 1F1B bubble and fewer sequences alive) and sequence parallelism (each
    # tp rank keeps 1/8 of the norms' and dropouts' activations) fit for less
    assert warning.endswith(
        "it does not fit; it fits with, the least step time × devices first: "
        "--microbatches 32 (step 6.3 s); --sp (step 6.74 s); --recompute full (step 8.62 s); "
        "--pp 32 (step 3.47 s on 2,048 devices); the rest as given (tp 8, dp 8, pp 4, 16 "
        "microbatches, zero 1, recompute selective)"
    )


@pytest.mark.parametrize(("flag", "value", "said"), [("--microbatches", "32", 6.3),
                                                     ("--sp", None, 6.74),
                                                     ("--recompute", "full", 8.62)])  # fmt: skip
def test_each_fix_gives_the_step_time_it_says(flag, value, said) -> None:
    args = list(TRAIN_70B)
    i = args.index(flag) if flag in args else None
    if i is not None:
        args[i + 1] = value
    else:
        args.append(flag)
    r = run_cli(*args, "--format", "json")
    report = json.loads(r.stdout)["reports"][0]
    assert report["totals"]["memory"]["fits"]
    assert round(report["totals"]["time_s"], 2) == said


# ---- 5. the docs say how to build the docs, and the extra holds what that needs


def test_the_docs_extra_holds_what_mkdocs_yml_needs() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    names = {re.split(r"[<>=\[ ]", d)[0] for d in extras["docs"]}
    assert names == {"mkdocs", "pymdown-extensions"}  # nothing more
    yml = (ROOT / "mkdocs.yml").read_text()
    # every extension outside Python-Markdown's own is pymdown-extensions'
    assert set(re.findall(r"^  - (pymdownx)\.", yml, re.M)) == {"pymdownx"}
    assert "modelcost[docs]" in extras["dev"]  # the tests build the site too


@pytest.mark.parametrize("page", ["README.md", "docs/docs-site.md", "docs/getting-started.md"])
def test_the_pages_that_speak_of_the_site_say_how_to_serve_it(page: str) -> None:
    text = " ".join((ROOT / page).read_text().split())
    assert "pip install -e '.[docs]' && mkdocs serve" in text


# ---- 6. a static batch's TTFT: its mean with its worst beside it, each with its bound


def test_a_static_batch_says_its_mean_and_worst_ttft() -> None:
    s = serve(LLAMA8, H200, 1024, 1024)
    sc = Scenario(LLAMA8, H200, ONE_DEVICE, 1024, 1024, Engine(), estimate="kernels")
    # 445 prompts, 16 a step (vLLM's 16,384 tokens a step over 1,024-token prompts):
    # 27 steps of 16 and one of 13; the k-th step's prompts start at its end, so the
    # mean is Σ k·(the time to step k's end) / 445 and the worst the whole prefill
    t16, t13 = sc.prefill(16), sc.prefill(13)
    ends = [t16 * k for k in range(1, 28)]
    mean = (sum(16 * e for e in ends) + 13 * (ends[-1] + t13)) / 445
    assert s.ttft_s == pytest.approx(mean, rel=1e-12)
    assert s.ttft_worst_s == pytest.approx(27 * t16 + t13, rel=1e-12)
    # the bounds: one prompt alone (no request beats it) and the whole batch in one
    # roofline step (no last request beats it)
    assert s.bound.ttft_s == sc.prefill(1, bound=True)
    assert s.bound.ttft_worst_s == sc.prefill(445, bound=True)
    r = run_cli(*SERVE_8B, "--isl", "1024", "--osl", "1024")
    (line,) = [ln for ln in r.stdout.splitlines() if ln.startswith("TTFT")]
    assert line == ("TTFT             4.862 s mean, 9.388 s worst (bound 16.685 ms one prompt "
                    "alone, 7.328 s the whole batch)")  # fmt: skip


def test_under_the_roofline_the_ttft_is_said_as_the_bounds_it_is() -> None:
    r = run_cli(*SERVE_8B, "--isl", "1024", "--osl", "1024", "--estimate", "roofline")
    (line,) = [ln for ln in r.stdout.splitlines() if ln.startswith("TTFT")]
    assert line == "TTFT             16.685 ms one prompt alone, 7.328 s the whole batch"


def test_chunked_prefill_has_one_ttft() -> None:
    r = run_cli(*SERVE_8B, "--isl", "1024", "--osl", "1024", "--budget", "8192")
    (line,) = [ln for ln in r.stdout.splitlines() if ln.startswith("TTFT")]
    assert re.fullmatch(r"TTFT {13}[\d.,]+ ms \(bound [\d.,]+ ms\)", line), line
