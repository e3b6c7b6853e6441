"""The `check` command: its arguments and what it runs."""

from __future__ import annotations

import argparse

from modelcost.base.errors import SpecError
from modelcost.render.escape import clean
from modelcost.render.units import count

from .common import EXIT_BAD_INPUT, EXIT_OK, _report


def cmd_check(args: argparse.Namespace) -> int:
    from modelcost.language.resolve import load_spec, load_specs
    from modelcost.lowering.params import count_params

    status = EXIT_OK
    for path in args.specs:
        if path.endswith(".hw"):
            status = max(status, _check_hardware(path))
            continue
        try:
            specs = [load_spec(path, args.model)] if args.model else load_specs(path)
        except SpecError as err:
            _report(err)
            status = EXIT_BAD_INPUT
            continue
        for spec in specs:
            total = count_params(spec).total
            print(f"ok  {clean(path)}  {spec.name}  {count(total)} parameters")
    return status


def _check_hardware(path: str) -> int:
    from modelcost.targets.hardware import load_hardware

    try:
        hw = load_hardware(path)
    except SpecError as err:
        _report(err)
        return EXIT_BAD_INPUT
    print(f"ok  {clean(path)}  {hw.name}  {clean(hw.title)} ({clean(hw.arch)})")
    return EXIT_OK


def arguments(p: argparse.ArgumentParser) -> None:
    """`check`'s arguments."""
    p.add_argument("specs", nargs="+", metavar="SPEC")
    p.add_argument("--model", help="check only this model")
