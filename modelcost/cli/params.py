"""The `params` command: its arguments and what it runs."""

from __future__ import annotations

import argparse
import json

from modelcost.base.errors import SpecError
from modelcost.render.escape import clean
from modelcost.render.units import count

from .common import EXIT_BAD_INPUT, EXIT_OK, SPEC_HELP, _report


def cmd_params(args: argparse.Namespace) -> int:
    from modelcost.language.resolve import load_spec
    from modelcost.lowering.params import count_params

    try:
        spec = load_spec(args.spec, args.model)
    except SpecError as err:
        _report(err)
        return EXIT_BAD_INPUT
    counts = count_params(spec)
    if args.format == "json":
        print(json.dumps(counts.model_dump(mode="json"), indent=2))
        return EXIT_OK
    from tabulate import tabulate

    rows = [
        [c.value, f"{n:,}", f"{counts.active_components[c]:,}"]
        for c, n in counts.components.items()
    ]
    rows.append(["total", f"{counts.total:,}", f"{counts.active:,}"])
    rows += [[f"  of which stream `{name}`", f"{n:,}", ""] for name, n in counts.streams.items()]
    rows += [[f"apart: `{name}` (auxiliary)", f"{n:,}", ""] for name, n in counts.apart.items()]
    print(f"{clean(spec.title)} ({spec.name}): {count(counts.total)} total, "
          f"{count(counts.active)} active per token")  # fmt: skip
    print(
        tabulate(
            rows, headers=["component", "total", "active"], colalign=("left", "right", "right")
        )
    )
    return EXIT_OK


def arguments(p: argparse.ArgumentParser) -> None:
    """`params`'s arguments."""
    p.add_argument("spec", metavar="SPEC", help=SPEC_HELP)
    p.add_argument("--model", help="which model, when a file defines several")
    p.add_argument("--format", choices=["text", "json"], default="text")
