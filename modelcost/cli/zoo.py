"""The `zoo` command: its arguments and what it runs."""

from __future__ import annotations

import argparse
import json

from modelcost.render.escape import terminal
from modelcost.render.units import count

from .common import EXIT_OK


def cmd_zoo(args: argparse.Namespace) -> int:
    """The shipped models by name (a SPEC argument or an `import` may give the name
    alone, from any folder): each file's models, titles and parameters."""
    from tabulate import tabulate

    from modelcost.base.resources import shipped_models
    from modelcost.language.resolve import load_specs
    from modelcost.lowering.params import count_params

    found = [(name, spec, count_params(spec).total) for name, path in shipped_models().items()
             for spec in load_specs(path)]  # fmt: skip
    if args.format == "json":
        rows = [{"name": name, "model": spec.name, "title": spec.title, "parameters": total}
                for name, spec, total in found]  # fmt: skip
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    table = [[name, spec.name, spec.title, count(total)] for name, spec, total in found]
    print(terminal(tabulate(table, headers=["name", "model", "title", "parameters"])))
    return EXIT_OK


def arguments(p: argparse.ArgumentParser) -> None:
    """`zoo`'s arguments."""
    p.add_argument("--format", choices=["text", "json"], default="text")
