"""The `import` command: its arguments and what it runs."""

from __future__ import annotations

import argparse

from modelcost.base.errors import SpecError
from modelcost.base.files import read_text

from .common import EXIT_BAD_INPUT, _emit, _report


def cmd_import(args: argparse.Namespace) -> int:
    from modelcost.importers import import_config

    try:  # what import_config returns compiles (it checks), or it is an error in the config
        text = import_config(read_text(args.config), str(args.config), args.name)
    except SpecError as err:
        _report(err)
        return EXIT_BAD_INPUT
    return _emit(text, args.output)


def arguments(p: argparse.ArgumentParser) -> None:
    """`import`'s arguments."""
    p.add_argument("config", metavar="config.json")
    p.add_argument("--name", help="the model's name (default: the file's)")
    p.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
