"""The command line: `modelcost check | fmt | params | compile | diff | site | hw | schema`.

Exit codes: 0 ok, 1 a requested check failed (e.g. `fmt --check`), 2 bad input or usage.
Bad input is reported as `path:line:col: error: message` with the source line, a caret
and a hint, never as a traceback.

One module a command (its `arguments` and its handler), imported only when it runs;
`common` holds what several share."""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import re
import sys
from collections.abc import Sequence
from typing import NoReturn

from modelcost.base.files import ClosedStdout, StdoutClosedError
from modelcost.base.settings import MAX_POINTS, MAX_STREAMED
from modelcost.base.version import __version__

from .common import EXIT_BAD_INPUT, EXIT_OK

# the commands in the order `--help` lists them: (name, module, handler, help); `hw`
# sets its subcommands' handlers itself
_REGISTRY: tuple[tuple[str, str, str, str], ...] = (
    ("check", "check", "cmd_check", "validate every model of each spec (and .hw hardware files)"),
    ("fmt", "fmt", "cmd_fmt", "print specs in canonical form"),
    ("params", "params", "cmd_params", "count total and active parameters by component"),
    ("compile", "compile", "cmd_compile", "lower, cost and roofline a spec on a hardware target"),
    (
        "sweep",
        "sweep",
        "cmd_sweep",
        "one row per combination of specs, targets and option values "
        f"(at most {MAX_POINTS:,} in all; {MAX_STREAMED:,} streamed)",
    ),
    ("import", "importing", "cmd_import", "write a .model from a Hugging Face config.json"),
    (
        "calibrate",
        "calibrate",
        "cmd_calibrate",
        "fit the kernel-aware estimate to measured op times",
    ),
    ("serve", "serve", "cmd_serve", "serving a request mix: concurrency, TTFT, TPOT, throughput"),
    (
        "train",
        "train",
        "cmd_train",
        "search the training layouts of N devices for the "
        "fastest step (Megatron-LM's: tp, sp, cp, pp, vpp, dp, ep, ZeRO, recompute, "
        "micro-batch)",
    ),
    (
        "diff",
        "diff",
        "cmd_diff",
        "compare two specs (or one on two targets or workloads, or two saved reports)",
    ),
    ("site", "site", "cmd_site", "write a docs site: a page per model × hardware, diffs, an index"),
    ("hw", "hw", "", "shipped hardware targets"),
    ("zoo", "zoo", "cmd_zoo", "the shipped models: each name works as a SPEC from anywhere"),
    ("schema", "schema", "cmd_schema", "print the JSON Schema of the Spec IR (or of reports)"),
)
COMMANDS = tuple(name for name, _, _, _ in _REGISTRY)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser. Given the `command` being run, only its own module is
    imported and its arguments added: every command is still listed with its help
    (`modelcost --help`), and a command's arguments cost nothing when another one runs."""
    parser = argparse.ArgumentParser(
        prog="modelcost",
        description="Compile .model architecture specs into analytical cost reports.",
    )
    parser.add_argument("--version", action="version", version=f"modelcost {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module, handler, said in _REGISTRY:
        p = sub.add_parser(name, help=said, description=said)
        if command in (None, name):
            found = importlib.import_module(f".{module}", __name__)
            found.arguments(p)
            if handler:
                p.set_defaults(func=getattr(found, handler))
    return parser


def _negatives_joined(words: list[str]) -> list[str]:
    """`--tpot -5ms` as `--tpot=-5ms`: argparse reads a word starting with `-` (and not
    a plain number) as an option, so a negative value would be told "expected one
    argument"; joined, its option's parser names it (a duration must be positive)."""
    out: list[str] = []
    for word in words:
        if out and re.match(r"-\.?\d", word) and out[-1].startswith("--") and "=" not in out[-1]:
            out[-1] = f"{out[-1]}={word}"
        else:
            out.append(word)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    words = _negatives_joined(sys.argv[1:] if argv is None else list(argv))
    command = words[0] if words and words[0] in COMMANDS else None  # else: all of them
    args = build_parser(command).parse_args(words)
    if sys.stdout is None:  # started with it closed (`>&-`): writing to it is an error
        sys.stdout = ClosedStdout()
    try:
        status = args.func(args)
        sys.stdout.flush()  # a broken pipe shows here, not as a warning at exit
    except BrokenPipeError:  # `modelcost schema | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing more to flush
        return EXIT_OK
    except StdoutClosedError as exc:
        print(f"modelcost: error: cannot write: {exc.strerror}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return status


def run() -> NoReturn:
    """The `modelcost` program (the console script, `python -m modelcost`): `main`, then
    exit with its status. First the objects the command made are moved out of the cyclic
    garbage collector's sight (gc.freeze): the collections the interpreter runs while it
    shuts down would walk every one of them (about 45,000 after compiling DeepSeek-V3),
    a sixth of the command's wall time; reference counting frees them as before."""
    status = main()
    gc.freeze()
    sys.exit(status)


if __name__ == "__main__":
    run()
