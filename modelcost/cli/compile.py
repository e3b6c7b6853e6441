"""The `compile` command: its arguments and what it runs."""

from __future__ import annotations

import argparse
import sys

from modelcost.base.errors import SpecError
from modelcost.render import FORMATS
from modelcost.render.escape import clean, terminal

from .common import (
    CHART_MODES_CLI,
    CHARTS_HELP,
    EXIT_BAD_INPUT,
    SPEC_HELP,
    _chart_mode,
    _compile_all,
    _emit,
    _emit_files,
    _kinds,
    _report,
    _usage,
)
from .options import ENGINE, ESTIMATE, LAYOUT, MOE, ROOFLINE, WORKLOAD, add_options
from .values import positive


def cmd_compile(args: argparse.Namespace) -> int:
    from modelcost.language.resolve import load_spec
    from modelcost.targets.hardware import load_hardware

    try:
        spec = load_spec(args.spec, args.model)
        reports = _compile_all(spec, load_hardware(args.hw), args, phases=_phases(spec, args))
    except SpecError as err:
        _report(err)
        return EXIT_BAD_INPUT
    if args.format != "text" or args.output:  # the text summary already says it
        for r in reports:
            if r.totals.memory.warning:
                print(f"modelcost: warning: {clean(r.totals.memory.warning)}", file=sys.stderr)
    if args.format == "md":
        from modelcost.render.formats import markdown_files, render_markdown

        mode = _chart_mode(args)
        if mode == "files":
            return _emit_files(markdown_files(reports, args.output), args.output)
        return _emit(render_markdown(reports, mode), args.output)
    if args.charts:
        return _usage("--charts applies to --format md")
    return _emit(_render_reports(reports, args.format), args.output)


def _phases(spec, args: argparse.Namespace) -> list:
    """The phases to compile: of several, decode is skipped (with a note) for a model
    that has none (an encoder); asked alone, lowering refuses it."""
    from modelcost.ir.graph import Phase
    from modelcost.lowering.validate import decodes

    phases = list(args.phase)
    if len(phases) > 1 and Phase.decode in phases and not decodes(spec):
        print(terminal(f"modelcost: note: `{spec.name}` has no causal attention or SSM, so no "
                       "decode step: decode skipped"), file=sys.stderr)  # fmt: skip
        phases.remove(Phase.decode)
    return phases


def _render_reports(reports: list, fmt: str) -> str:
    from modelcost.render import render

    return render(reports, fmt)


def arguments(p: argparse.ArgumentParser) -> None:
    """`compile`'s arguments."""
    p.add_argument("spec", metavar="SPEC", help=SPEC_HELP)
    p.add_argument("--model", help="which model, when a file defines several")
    p.add_argument("--hw", required=True, help="a shipped target (modelcost hw list) or a .hw file")
    add_options(p, WORKLOAD + ENGINE + LAYOUT + ROOFLINE + ESTIMATE + MOE)
    p.add_argument(
        "--global-batch",
        dest="batch",
        type=positive,
        default=argparse.SUPPRESS,
        metavar="B",
        help="train: --batch by Megatron's name "
        "(--global-batch-size: sequences a step, over every replica)",
    )
    p.add_argument(
        "--micro-batch",
        type=positive,
        metavar="M",
        help="train: sequences a microbatch, per replica (Megatron's "
        "--micro-batch-size): the microbatches a step follow, --batch / "
        "(dp × M), in place of --microbatches",
    )
    p.add_argument("--only", type=_kinds, default=None, metavar="KINDS",
                   help="count only these op kinds, e.g. GEMM,SDPA")  # fmt: skip
    p.add_argument("--format", choices=list(FORMATS), default="text")
    p.add_argument("--charts", choices=CHART_MODES_CLI, help=CHARTS_HELP)
    p.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout (- too)")
