"""The `fmt` command: its arguments and what it runs."""

from __future__ import annotations

import argparse
import sys

from modelcost.base.errors import SpecError
from modelcost.base.files import read_text, write_stdout, write_text

from .common import EXIT_BAD_INPUT, EXIT_CHECK_FAILED, EXIT_OK, _report


def cmd_fmt(args: argparse.Namespace) -> int:
    from modelcost.language.fmt import format_source

    status = EXIT_OK
    for path in args.specs:
        try:
            text = read_text(path)
            formatted = format_source(text, path)
        except SpecError as err:
            _report(err)
            status = EXIT_BAD_INPUT
            continue
        if args.check:
            if formatted != text:
                print(f"would reformat {path}", file=sys.stderr)
                status = max(status, EXIT_CHECK_FAILED)
        elif args.write:
            if formatted != text:
                try:
                    write_text(path, formatted)
                except OSError as exc:
                    print(f"{path}: error: cannot write: {exc.strerror or exc}", file=sys.stderr)
                    status = EXIT_BAD_INPUT
                    continue
                print(f"reformatted {path}", file=sys.stderr)
        else:
            write_stdout(formatted)
    return status


def arguments(p: argparse.ArgumentParser) -> None:
    """`fmt`'s arguments."""
    p.add_argument("specs", nargs="+", metavar="SPEC")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="exit 1 if a file is not formatted")
    mode.add_argument("-w", "--write", action="store_true", help="rewrite files in place")
