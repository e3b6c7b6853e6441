"""The `diff` command: its arguments and what it runs."""

from __future__ import annotations

import argparse
import sys

from modelcost.base.errors import SpecError
from modelcost.render import DIFF_FORMATS

from .common import (
    CHART_MODES_CLI,
    CHARTS_HELP,
    EXIT_BAD_INPUT,
    EXIT_CHECK_FAILED,
    EXIT_OK,
    SPEC_HELP,
    _chart_mode,
    _compile_all,
    _emit,
    _emit_files,
    _percent,
    _report,
    _usage,
)
from .options import ENGINE, ESTIMATE, LAYOUT, MOE, ROOFLINE, WORKLOAD, add_options


def cmd_diff(args: argparse.Namespace) -> int:
    from modelcost.analyses.diff import diff, gate
    from modelcost.ir.report import saved_reports
    from modelcost.language.resolve import load_spec
    from modelcost.render import render_diff
    from modelcost.targets.hardware import load_hardware

    try:
        saved_a, saved_b = saved_reports(args.a), saved_reports(args.b)
        if saved_a is not None and saved_b is not None:
            _refuse_given(args, "A and B are saved reports: their workloads are their own")
        if (saved_a is None or saved_b is None) and args.hw is None:
            raise SpecError("give --hw: the target a spec is compiled for",
                            filename="modelcost")  # fmt: skip
        if saved_a is not None:
            a = list(saved_a)
        else:
            a = _compile_all(load_spec(args.a), load_hardware(args.hw), args)
        if saved_b is not None:
            b = list(saved_b)
        else:
            hw_b = load_hardware(args.hw_b or args.hw)
            b = _compile_all(load_spec(args.b), hw_b, args, suffix="_b")
        if len(a) != len(b):
            said = {"A": a, "B": b}
            raise SpecError(
                "A and B hold different numbers of phases: "
                + ", ".join(f"{k} {', '.join(r.workload.phase for r in v)}"
                            for k, v in said.items()),
                filename="modelcost",
                hint="--phase-b names B's phases (as many as --phase)",
            )  # fmt: skip
        d = diff(a, b)
    except SpecError as err:
        _report(err)
        return EXIT_BAD_INPUT
    verdict = gate(d, args.fail_above)
    if args.format == "md":
        from modelcost.render.formats import diff_markdown_files
        from modelcost.render.formats import render_diff as render_md

        mode = _chart_mode(args)
        if mode == "files":
            status = _emit_files(diff_markdown_files(d, args.output, "files", (a, b)), args.output)
        else:
            status = _emit(render_md(d, "md", verdict, mode, sides=(a, b)), args.output)
    elif args.charts:
        return _usage("--charts applies to --format md")
    else:
        status = _emit(render_diff(d, args.format, verdict, (a, b)), args.output)
    if status == EXIT_OK and not verdict.passed:
        print(f"modelcost: {verdict.message}", file=sys.stderr)
        return EXIT_CHECK_FAILED
    return status


_NOT_WORKLOAD = ("a", "b", "func", "command", "format", "output", "fail_above", "charts")


def _refuse_given(args: argparse.Namespace, why: str) -> None:
    """Refuse a workload, layout or costing option given where no side is compiled."""
    own = argparse.ArgumentParser(prog="modelcost diff")
    arguments(own)  # diff's own arguments, at their defaults
    defaults = vars(own.parse_args([args.a, args.b]))
    given = [k for k, v in vars(args).items() if k not in _NOT_WORKLOAD and defaults[k] != v]
    if given:
        flags = ", ".join(f"--{k.replace('_', '-')}" for k in given)
        raise SpecError(f"{flags}: {why}", filename="modelcost",
                        hint="leave the options out, or diff the specs")  # fmt: skip


def arguments(p: argparse.ArgumentParser) -> None:
    """`diff`'s arguments."""
    saved = "; or a report saved by compile --format json"
    p.add_argument("a", metavar="A", help=SPEC_HELP + saved)
    p.add_argument("b", metavar="B", help=SPEC_HELP + saved)
    p.add_argument("--hw", help="target of A (and of B unless --hw-b); a saved report "
                   "keeps its own")  # fmt: skip
    p.add_argument("--hw-b", help="target of B")
    add_options(p, WORKLOAD + ENGINE + LAYOUT + ROOFLINE + ESTIMATE + MOE, sides=True)
    p.add_argument("--charts", choices=CHART_MODES_CLI, help=CHARTS_HELP)
    p.add_argument("--format", choices=DIFF_FORMATS, default="text",
                   help="text, md, gfm (a pull-request summary with the gate's verdict), "
                   "html or json")  # fmt: skip
    p.add_argument("--fail-above", type=_percent, metavar="PCT", help="exit 1 when the "
                   "total time grows by more than PCT percent")  # fmt: skip
    p.add_argument("-o", "--output", metavar="FILE")
