"""One declaration of the workload options: every command's flags and the Python API's
defaults come from modelcost/cli/options.py (issue 9, item 5)."""

import inspect

from modelcost.cli import build_parser
from modelcost.cli.options import OPTIONS
from modelcost.ir.graph import Phase, Workload
from modelcost.publish.site import SiteOptions
from modelcost.roofline.compile import compile_report


def _defaults(*argv: str):
    return build_parser().parse_args(list(argv))


def test_cli_defaults_are_the_python_apis() -> None:
    c = _defaults("compile", "x.model", "--hw", "h100")
    w = Workload(Phase.prefill)
    assert (c.phase, c.batch, c.seq, c.context, c.logits) == (
        [w.phase], w.batch, w.seq, w.context, w.logits,
    )  # fmt: skip
    api = inspect.signature(compile_report).parameters
    assert (c.conventions, c.peak, c.bandwidth) == (
        api["conventions"].default.value, api["peak"].default, api["bandwidth"].default,
    )  # fmt: skip
    s = _defaults("site", "x.model", "--hw", "h100", "-o", "out")
    site = SiteOptions()
    assert (s.batch, s.seq, s.context, s.peak, s.bandwidth) == (
        site.batch, site.seq, site.context, site.costing.peak, site.costing.bandwidth,
    )  # fmt: skip


def test_every_workload_option_reaches_compile_diff_and_site() -> None:
    help_of = {cmd: build_parser()._subparsers._group_actions[0].choices[cmd].format_help()
               for cmd in ("compile", "diff", "site")}  # fmt: skip
    for name, o in OPTIONS.items():
        assert f"--{name}" in help_of["compile"]
        assert f"--{name}" in help_of["diff"]
        assert (f"--{name}-b" in help_of["diff"]) == o.sided
    for name in ("batch", "seq", "context", "conventions", "peak", "bandwidth"):
        assert f"--{name}" in help_of["site"]


def _commands(parser):
    return parser._subparsers._group_actions[0].choices


def test_a_command_alone_parses_as_with_every_command() -> None:
    """`main` builds only the running command's arguments (start-up, issue 22 item 6):
    each command's help and parse are those of the parser with every command, and
    COMMANDS names every command, so none is ever built without its arguments."""
    from modelcost.cli import COMMANDS

    full = _commands(build_parser())
    assert tuple(full) == COMMANDS
    for cmd in COMMANDS:
        alone = _commands(build_parser(cmd))
        assert tuple(alone) == COMMANDS  # every command still listed
        assert alone[cmd].format_help() == full[cmd].format_help(), cmd
    argv = ["compile", "x.model", "--hw", "h100", "--phase", "decode", "--tp", "2"]
    assert build_parser("compile").parse_args(argv) == build_parser().parse_args(argv)
