"""The `serve` command's other answers: disaggregated pools, a concurrency curve,
requests arriving at a rate, speculative decoding's settings, and writing what it
found."""

from __future__ import annotations

import argparse
import sys

from modelcost.base.errors import SpecError
from modelcost.base.settings import (
    DEFAULT_OBJECTIVE,
    DEFAULT_PROMPTS,
    DEFAULT_REQUESTS,
)
from modelcost.render.escape import clean

from .common import (
    EXIT_CHECK_FAILED,
    EXIT_OK,
    _emit,
)


def _serve_out(text: str, output, met: bool, why: str, args: argparse.Namespace) -> int:
    """Write serve's answer; exit 1 when targets were given and are not met."""
    status = _emit(text, output)
    if status == EXIT_OK and not met and (args.tpot or args.ttft):
        print(f"modelcost: the targets are not met: {clean(why)}", file=sys.stderr)
        return EXIT_CHECK_FAILED
    return status


def _check_pool_flags(args: argparse.Namespace, layout_given: bool) -> None:
    """What --disagg and --search --devices refuse: --devices without a search, the
    flags of other serving modes, layout flags (the pools or the search give the
    layouts), and requests without lengths."""
    what = "--disagg" if args.disagg is not None else "--search --devices"
    if args.disagg is None and not args.search:
        raise SpecError("--devices is a search's budget: it goes with --search (aggregated "
                        "and disaggregated) or --disagg --search", filename="modelcost",
                        hint="add --search")  # fmt: skip
    given = (("--mix", args.mix is not None), ("--rate", args.rate is not None),
             ("--speculative", args.speculative),
             (f"the layout flags ({what} chooses the layouts)" if args.search else
              "the layout flags (--disagg gives the pools')", layout_given))  # fmt: skip
    others = [flag for flag, on in given if on]
    if others:
        raise SpecError(f"{what}: leave out {', '.join(others)}", filename="modelcost",
                        hint="e.g. --disagg 2xtp4:1xtp8" if args.disagg is not None
                        else "e.g. --search --devices 16")  # fmt: skip
    if not (args.isl and args.osl):
        raise SpecError("give --isl and --osl", filename="modelcost")


def _serve_disagg(args: argparse.Namespace, spec, hw, engine, layout, estimate,
                  calibration) -> tuple[bool, str, str]:  # fmt: skip
    """`serve --disagg`: a prefill pool and a decode pool (disagg.py), or `--search`
    choosing them within `--devices`; `serve --search --devices N` without `--disagg`:
    aggregated layouts and disaggregated pools within N devices, the better of the two
    (deployment.py); (targets met, why not, the answer). SpecError for flags that do
    not go with it."""
    from modelcost.analyses.deployment import search_deployment
    from modelcost.analyses.disagg import search_disagg, serve_disagg
    from modelcost.analyses.pools import parse_pools
    from modelcost.ir.graph import Parallel
    from modelcost.render.disagg_format import (
        render_deployment,
        render_disagg,
        render_disagg_search,
    )

    _check_pool_flags(args, layout != Parallel())
    objective = args.objective or DEFAULT_OBJECTIVE
    if args.disagg is None:  # both modes within the budget
        if args.concurrency:
            raise SpecError("--search chooses the concurrency too: leave out --concurrency",
                            filename="modelcost")  # fmt: skip
        both = search_deployment(spec, hw, args.isl, args.osl, args.devices, args.tpot,
                                 args.ttft, engine, estimate, calibration, objective,
                                 args.moe_imbalance)  # fmt: skip
        return both.chosen is not None, both.why, render_deployment(both, args.format)
    if args.search:
        if args.disagg or args.concurrency:
            raise SpecError("--search chooses the pools and the concurrency: give --disagg "
                            "without a value and leave out --concurrency",
                            filename="modelcost")  # fmt: skip
        if args.devices is None:
            raise SpecError("--disagg --search needs a device budget", filename="modelcost",
                            hint="--devices N, e.g. --devices 16")  # fmt: skip
        found = search_disagg(spec, hw, args.isl, args.osl, args.devices, args.tpot, args.ttft,
                              engine, estimate, calibration, args.moe_imbalance,
                              objective)  # fmt: skip
        return found.chosen is not None, found.why, render_disagg_search(found, args.format)
    if args.devices is not None:
        raise SpecError("--devices is --disagg --search's budget: the pools give the "
                        "devices", filename="modelcost", hint="leave out --devices")  # fmt: skip
    if not args.disagg:
        raise SpecError("--disagg needs the pools (or --search to choose them)",
                        filename="modelcost", hint="e.g. --disagg 2xtp4:1xtp8")  # fmt: skip
    one = serve_disagg(spec, hw, args.isl, args.osl, parse_pools(args.disagg),
                       args.concurrency, args.tpot, args.ttft, engine, estimate,
                       calibration, args.moe_imbalance)  # fmt: skip
    return one.meets_targets, one.why, render_disagg(one, args.format)


def _speculation(args: argparse.Namespace):
    """serve's speculative decoding (speculative.Speculation), or None; SpecError for
    its options given without --speculative."""
    from modelcost.analyses.speculative import Speculation
    from modelcost.language.resolve import load_spec

    if not args.speculative:
        given = [f for f, v in (("--draft", args.draft), ("--draft-tokens", args.draft_tokens),
                                ("--acceptance", args.acceptance)) if v is not None]  # fmt: skip
        if given:
            raise SpecError(f"{', '.join(given)} go{'es' if len(given) == 1 else ''} with "
                            "--speculative", filename="modelcost",
                            hint="add --speculative")  # fmt: skip
        return None
    draft = load_spec(args.draft, args.draft_model) if args.draft is not None else None
    tokens = args.draft_tokens if args.draft_tokens is not None else Speculation().tokens
    return Speculation(tokens, args.acceptance, draft)


def _curve_asked(args: argparse.Namespace) -> bool:
    """Whether `serve` answers a curve: several concurrencies, or a client's load."""
    several = args.concurrency is not None and len(args.concurrency) > 1
    return several or args.prompts is not None or args.length_ratio is not None


def _serve_curve(args: argparse.Namespace, spec, hw, engine, layout, estimate,
                 calibration) -> int:  # fmt: skip
    """`serve --concurrency a,b,…` (or --prompts, --length-ratio): a curve a layout under
    a benchmark client's load (curve.py); SpecError for flags that do not go with it."""
    from modelcost.analyses.curve import BenchLoad, curves
    from modelcost.render.curve_format import CURVE_FORMATS, render_curves

    given = (("--rate", args.rate is not None), ("--requests", args.requests is not None),
             ("--mix", args.mix is not None), ("--disagg", args.disagg is not None),
             ("--devices", args.devices is not None), ("--tpot", args.tpot),
             ("--ttft", args.ttft), ("--objective", args.objective is not None),
             ("--speculative", args.speculative))  # fmt: skip
    others = [flag for flag, on in given if on]
    if others:
        raise SpecError(f"a curve runs every concurrency of one request class under a "
                        f"benchmark client's load: leave out {', '.join(others)}",
                        filename="modelcost")  # fmt: skip
    if args.concurrency is None:
        raise SpecError("a curve needs its concurrencies", filename="modelcost",
                        hint="--concurrency 1..512 (doubling), or e.g. 4,16,64")  # fmt: skip
    if not (args.isl and args.osl):
        raise SpecError("give --isl and --osl", filename="modelcost")
    if args.format not in CURVE_FORMATS:
        raise SpecError(f"a curve writes {', '.join(CURVE_FORMATS)}, not {args.format}",
                        filename="modelcost")  # fmt: skip
    load = BenchLoad(prompts=DEFAULT_PROMPTS if args.prompts is None else args.prompts,
                     ratio=1.0 if args.length_ratio is None else args.length_ratio,
                     seed=args.seed or 0)  # fmt: skip
    found = curves(spec, hw, args.isl, args.osl, args.concurrency, load, (layout,), engine,
                   estimate, calibration, args.moe_imbalance, search=args.search)  # fmt: skip
    return _emit(render_curves(found, args.format), args.output)


def _serve_arrivals(args: argparse.Namespace, spec, hw, engine, layout, estimate,
                    calibration) -> int:  # fmt: skip
    """`serve --rate`: requests arriving over time (arrivals.py); SpecError for flags
    that do not go with it."""
    from modelcost.analyses.arrivals import simulate
    from modelcost.render.serving_format import ARRIVAL_FORMATS, render_arrivals

    if args.rate is None:
        raise SpecError("--requests and --seed go with --rate", filename="modelcost",
                        hint="add --rate R, the requests arriving per second")  # fmt: skip
    given = (("--mix", args.mix is not None), ("--search", args.search),
             ("--tpot", args.tpot), ("--ttft", args.ttft),
             ("--speculative", args.speculative))  # fmt: skip
    others = [flag for flag, on in given if on]
    if others:
        raise SpecError(f"--rate simulates one request class: leave out {', '.join(others)}",
                        filename="modelcost")  # fmt: skip
    if args.format not in ARRIVAL_FORMATS:
        raise SpecError(f"--rate writes {', '.join(ARRIVAL_FORMATS)}, not {args.format}",
                        filename="modelcost")  # fmt: skip
    if not (args.isl and args.osl):
        raise SpecError("give --isl and --osl", filename="modelcost")
    n = DEFAULT_REQUESTS if args.requests is None else args.requests
    run = simulate(spec, hw, args.isl, args.osl, args.rate, n, args.seed or 0, layout,
                   engine, args.concurrency, estimate, calibration,
                   args.moe_imbalance)  # fmt: skip
    return _emit(render_arrivals(run, args.format), args.output)
