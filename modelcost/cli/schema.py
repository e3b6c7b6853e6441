"""The `schema` command: its arguments and what it runs."""

from __future__ import annotations

import argparse
import json

from .common import EXIT_OK


def cmd_schema(args: argparse.Namespace) -> int:
    from modelcost.ir.report import ReportSet
    from modelcost.language.spec import Spec

    model = ReportSet if args.report else Spec
    print(json.dumps(model.model_json_schema(), indent=2, sort_keys=True))
    return EXIT_OK


def arguments(p: argparse.ArgumentParser) -> None:
    """`schema`'s arguments."""
    p.add_argument("--report", action="store_true", help="the schema of compile's JSON")
