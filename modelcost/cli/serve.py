"""The `serve` command: its arguments and what it runs."""

from __future__ import annotations

import argparse

from modelcost.base.errors import SpecError
from modelcost.base.settings import (
    DEFAULT_OBJECTIVE,
    DEFAULT_PROMPTS,
    DEFAULT_REQUESTS,
    DEFAULT_SERVE_ESTIMATE,
    MAX_CURVE_POINTS,
    MAX_EVENTS,
    MAX_MIX_CLASSES,
    MAX_REQUESTS,
    MAX_STEPS,
    OBJECTIVES,
    RATES,
    SHARES,
)

from .common import (
    EXIT_BAD_INPUT,
    SPEC_HELP,
    _check_executor,
    _estimation,
    _executor_options,
    _fraction,
    _layout,
    _report,
    _share,
)
from .options import ESTIMATE, MOE, SITE_LAYOUT, add_options
from .serve_modes import (
    _curve_asked,
    _serve_arrivals,
    _serve_curve,
    _serve_disagg,
    _serve_out,
    _speculation,
)
from .values import concurrencies, length_ratio, positive, rate, requests, seconds, seed


def cmd_serve(args: argparse.Namespace) -> int:
    from modelcost.analyses.serving_records import Engine
    from modelcost.language.resolve import load_spec
    from modelcost.targets.hardware import load_hardware

    try:
        spec, hw = load_spec(args.spec, args.model), load_hardware(args.hw)
        engine = Engine(args.budget or 0, args.prefix_hit / 100, args.engine,
                        args.memory_fraction)  # fmt: skip
        layout = _layout(args, SITE_LAYOUT)
        estimate, calibration = _estimation(args, hw)
        speculation = _speculation(args)
        if args.objective is not None and not args.search:
            raise SpecError("--objective goes with --search", filename="modelcost",
                            hint="add --search, or leave out --objective")  # fmt: skip
        if _curve_asked(args):
            return _serve_curve(args, spec, hw, engine, layout, estimate, calibration)
        if args.concurrency is not None:  # one concurrency: the point's
            args.concurrency = args.concurrency[0]
        shared = args.search and args.disagg is None and args.devices is None
        _check_executor(args, "serve --search" if shared else None)
        if args.disagg is not None or args.devices is not None:
            met, why, text = _serve_disagg(args, spec, hw, engine, layout, estimate, calibration)
            return _serve_out(text, args.output, met, why, args)
        if args.rate is not None or args.requests is not None or args.seed is not None:
            return _serve_arrivals(args, spec, hw, engine, layout, estimate, calibration)
        given = (spec, hw, engine, layout, estimate, calibration, speculation)
        met, why, text = (_serve_mix(args, *given) if args.mix is not None
                          else _serve_requests(args, *given))  # fmt: skip
    except SpecError as err:
        _report(err)
        return EXIT_BAD_INPUT
    return _serve_out(text, args.output, met, why, args)


def arguments(p: argparse.ArgumentParser) -> None:
    """`serve`'s arguments, in the order `--help` lists them: the requests and targets,
    the search, arrivals, speculative decoding, disaggregated pools, then the layout,
    the estimate and the output."""
    _requests(p)
    _search(p)
    _arrivals(p)
    _speculative(p)
    _pools(p)
    add_options(p, SITE_LAYOUT)
    add_options(p, ESTIMATE + MOE, defaults={"estimate": DEFAULT_SERVE_ESTIMATE})
    p.add_argument("--format", choices=("text", "md", "json", "csv", "html"), default="text")
    p.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout (- too)")


def _requests(p: argparse.ArgumentParser) -> None:
    """The model, the target, the requests and what they must meet."""
    p.add_argument("spec", metavar="SPEC", help=SPEC_HELP)
    p.add_argument("--model", help="which model, when a file defines several")
    p.add_argument("--hw", required=True, help="a shipped target or a .hw file")
    p.add_argument("--isl", type=positive, help="input tokens per request")
    p.add_argument("--osl", type=positive, help="output tokens per request")
    p.add_argument("--mix", metavar="FILE", help="several request classes: `ISL OSL [SHARE]` "
                   f"a line, at most {MAX_MIX_CLASSES:,}; SHARE a weight from {SHARES[0]:g} "
                   f"to {SHARES[1]:g} (default 1)")  # fmt: skip
    p.add_argument("--concurrency", type=concurrencies, help="sequences per replica "
                   "(default: the most that fit and meet the targets); several (a,b,c or "
                   f"lo..hi doubling or lo..hi+step, at most {MAX_CURVE_POINTS}): a curve, "
                   "each concurrency under a benchmark client's load (closed loop, "
                   "vLLM's and SGLang's bench_serving --max-concurrency), with --search "
                   "one a layout")  # fmt: skip
    p.add_argument("--prompts", type=requests, metavar="N", help="a curve's requests at "
                   f"each concurrency (bench_serving's --num-prompts; default "
                   f"{DEFAULT_PROMPTS:,}); gives a curve at one --concurrency too")  # fmt: skip
    p.add_argument("--length-ratio", type=length_ratio, metavar="R", help="a curve's "
                   "request lengths drawn uniformly in [R × L, L] for --isl and --osl "
                   "(bench_serving's --random-range-ratio, as SGLang draws it; default 1: "
                   "every request --isl in, --osl out)")  # fmt: skip
    p.add_argument("--tpot", type=seconds, help="time-per-output-token target, e.g. 50ms")
    p.add_argument("--ttft", type=seconds, help="time-to-first-token target, e.g. 500ms")
    p.add_argument("--budget", type=positive, help="chunked prefill: tokens a step (decodes "
                   "and a prompt chunk together); default: static batches")  # fmt: skip
    p.add_argument(
        "--prefix-hit",
        type=_share,
        default=0.0,
        metavar="PCT",
        help="percent of each prompt already in a prefix cache (default 0)",
    )
    p.add_argument("--memory-fraction", type=_fraction, metavar="F",
                   help="the share of memory the engine's rule gives (vLLM: of the device; "
                   "TensorRT-LLM: of what weights and activations leave; SGLang: of the "
                   "device for weights and KV cache); default: the engine's own")  # fmt: skip


def _search(p: argparse.ArgumentParser) -> None:
    """--search and what it optimises."""
    p.add_argument("--search", action="store_true", help="try tp = 1, 2, 4, … (for MoE "
                   "models also the experts over tp × dp; pipelines where tp fills the "
                   "scale-up domain) and choose by --objective among the layouts meeting "
                   "the targets; with --devices N, disaggregated pools within N "
                   "too")  # fmt: skip
    p.add_argument("--objective", choices=OBJECTIVES,
                   help="with --search: what to optimise over the layouts meeting the "
                   "targets: the most output tokens/s per device (NVIDIA AIConfigurator's "
                   "objective), the fewest devices, or the lowest TPOT (default "
                   f"{DEFAULT_OBJECTIVE})")  # fmt: skip


def _arrivals(p: argparse.ArgumentParser) -> None:
    """Requests arriving at a rate, simulated step by step."""
    p.add_argument("--rate", type=rate, metavar="R", help="requests arriving per second "
                   f"(Poisson, {RATES[0]:g} to {RATES[1]:g}): TTFT, TPOT and latency "
                   "percentiles of in-flight batching, simulated step by step (at most "
                   f"{MAX_EVENTS:,} scheduler events and {MAX_STEPS:,} steps: a run "
                   "reaching them stops and says so)")  # fmt: skip
    p.add_argument("--requests", type=requests, metavar="N", help="with --rate: "
                   f"requests to run (default {DEFAULT_REQUESTS:,}, at most "
                   f"{MAX_REQUESTS:,})")  # fmt: skip
    p.add_argument("--seed", type=seed, metavar="S", help="with --rate: the arrivals' "
                   "random seed; with a curve's --length-ratio: the lengths' (default "
                   "0)")  # fmt: skip


def _speculative(p: argparse.ArgumentParser) -> None:
    """Speculative decoding's draft and its settings."""
    from modelcost.analyses.speculative import DEFAULT_DRAFT_TOKENS

    p.add_argument("--speculative", action="store_true", help="speculative decoding: a "
                   "draft proposes tokens, one decode step of the target verifies them "
                   "(static batches); the draft is the model's own multi-token-prediction "
                   "module unless --draft")  # fmt: skip
    p.add_argument("--draft", metavar="FILE.model", help="with --speculative: a draft "
                   "model (the target's vocabulary)")  # fmt: skip
    p.add_argument("--draft-model", metavar="NAME", help="which model of --draft, when it "
                   "defines several")  # fmt: skip
    p.add_argument("--draft-tokens", type=positive, metavar="K", help="with --speculative: "
                   f"tokens proposed a step (default {DEFAULT_DRAFT_TOKENS})")  # fmt: skip
    p.add_argument(
        "--acceptance",
        type=_fraction,
        metavar="A",
        help="with --speculative: "
        "the chance each proposed token is accepted, in (0, 1] (default: the "
        "published acceptance length at K, specs/kernels/speculative.json)",
    )


def _pools(p: argparse.ArgumentParser) -> None:
    """Disaggregated pools, a search's device budget and its workers."""
    p.add_argument("--disagg", nargs="?", const="", metavar="P:D", help="prefill and "
                   "decode on separate pools, each [COUNTx]LAYOUT with the layout's axes "
                   "(tp, dp, ep, etp, pp) written together: `2xtp4:1xtp8` is two prefill "
                   "instances of tp 4 and one decode instance of tp 8; with --search, no "
                   "value: the pools are chosen")  # fmt: skip
    p.add_argument("--devices", type=positive, metavar="N", help="a search's device "
                   "budget: with --search, aggregated layouts and disaggregated pools "
                   "within N devices, the better by --objective; with --disagg --search, "
                   "the pools alone")  # fmt: skip
    p.add_argument("--jobs", type=positive, default=1,
                   help="with --search: worker processes serving a rank count's "
                   "layouts at once (default 1)")  # fmt: skip
    _executor_options(p, "searched layouts")


def _serve_mix(args: argparse.Namespace, spec, hw, engine, layout, estimate, calibration,
               speculation) -> tuple[bool, str, str]:  # fmt: skip
    """`serve --mix`: a request mix on one layout; (targets met, why not, the answer)."""
    from modelcost.analyses.serving_mix import load_mix, serve_mix
    from modelcost.render.serving_format import render_mix

    if args.isl or args.osl or args.search or args.concurrency:
        raise SpecError("--mix gives the requests: leave out --isl, --osl, "
                        "--concurrency and --search", filename="modelcost")  # fmt: skip
    mix = serve_mix(spec, hw, load_mix(args.mix), layout, args.tpot, args.ttft, engine,
                    estimate, calibration, speculation, args.moe_imbalance)  # fmt: skip
    return mix.meets_targets, "a request class misses them", render_mix(mix, args.format)


def _serve_requests(args: argparse.Namespace, spec, hw, engine, layout, estimate, calibration,
                    speculation) -> tuple[bool, str, str]:  # fmt: skip
    """`serve --isl --osl`: one layout at one concurrency (or the most that meets the
    targets), or with `--search` the layouts tried and the one chosen; (targets met, why
    not, the answer)."""
    from modelcost.analyses.serving import serve
    from modelcost.analyses.serving_search import search
    from modelcost.render.serving_format import render_search, render_serving

    if not (args.isl and args.osl):
        raise SpecError("give --isl and --osl (or a --mix file)", filename="modelcost")
    if not args.search:
        one = serve(spec, hw, args.isl, args.osl, layout, args.concurrency, args.tpot,
                    args.ttft, engine, estimate, calibration, speculation,
                    args.moe_imbalance)  # fmt: skip
        return one.meets_targets, one.why, render_serving(one, args.format)
    if args.concurrency:
        raise SpecError("--search chooses the concurrency too: leave out "
                        "--concurrency", filename="modelcost")  # fmt: skip
    found = search(spec, hw, args.isl, args.osl, args.tpot, args.ttft, engine, layout,
                   estimate, calibration, speculation,
                   args.objective or DEFAULT_OBJECTIVE, args.moe_imbalance,
                   jobs=args.jobs, executor=args.executor, address=args.address)  # fmt: skip
    return found.chosen is not None, found.why, render_search(found, args.format)
