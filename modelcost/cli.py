"""The command line: `modelcost check | fmt | params | schema`.

Exit codes: 0 ok, 1 a requested check failed (e.g. `fmt --check`), 2 bad input or usage.
Bad input is reported as `path:line:col: error: message` with the source line, a caret
and a hint, never as a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from tabulate import tabulate

from . import __version__
from .errors import SpecError
from .fmt import format_source
from .params import count_params
from .resolve import load_spec, load_specs
from .spec import Spec

EXIT_OK, EXIT_CHECK_FAILED, EXIT_BAD_INPUT = 0, 1, 2


def _report(err: SpecError) -> None:
    print(err.render(), file=sys.stderr)


def _human(n: int) -> str:
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {suffix}"
    return str(n)


def cmd_check(args: argparse.Namespace) -> int:
    status = EXIT_OK
    for path in args.specs:
        try:
            specs = [load_spec(path, args.model)] if args.model else load_specs(path)
        except SpecError as err:
            _report(err)
            status = EXIT_BAD_INPUT
            continue
        for spec in specs:
            total = count_params(spec).total
            print(f"ok  {path}  {spec.name}  {_human(total)} parameters")
    return status


def _write_atomic(path: Path, text: str) -> None:
    """Replace `path` by `text` without ever leaving a half-written file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise SpecError(f"cannot read file: {reason}", filename=path) from None


def cmd_fmt(args: argparse.Namespace) -> int:
    status = EXIT_OK
    for path in args.specs:
        try:
            text = _read(path)
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
                _write_atomic(Path(path), formatted)
                print(f"reformatted {path}", file=sys.stderr)
        else:
            sys.stdout.write(formatted)
    return status


def cmd_params(args: argparse.Namespace) -> int:
    try:
        spec = load_spec(args.spec, args.model)
    except SpecError as err:
        _report(err)
        return EXIT_BAD_INPUT
    counts = count_params(spec)
    if args.format == "json":
        print(json.dumps(counts.model_dump(mode="json"), indent=2))
        return EXIT_OK
    rows = [
        [c.value, f"{n:,}", f"{counts.active_components[c]:,}"]
        for c, n in counts.components.items()
    ]
    rows.append(["total", f"{counts.total:,}", f"{counts.active:,}"])
    print(
        f"{spec.title} ({spec.name}): {_human(counts.total)} total, "
        f"{_human(counts.active)} active per token"
    )
    print(
        tabulate(
            rows, headers=["component", "total", "active"], colalign=("left", "right", "right")
        )
    )
    return EXIT_OK


def cmd_schema(args: argparse.Namespace) -> int:
    print(json.dumps(Spec.model_json_schema(), indent=2, sort_keys=True))
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="modelcost",
        description="Compile .model architecture specs into analytical cost reports.",
    )
    parser.add_argument("--version", action="version", version=f"modelcost {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, func: Callable[[argparse.Namespace], int], help: str):
        p = sub.add_parser(name, help=help, description=help)
        p.set_defaults(func=func)
        return p

    p = add("check", cmd_check, "parse, resolve and validate every model of each spec")
    p.add_argument("specs", nargs="+", metavar="SPEC")
    p.add_argument("--model", help="check only this model")

    p = add("fmt", cmd_fmt, "print specs in canonical form")
    p.add_argument("specs", nargs="+", metavar="SPEC")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="exit 1 if a file is not formatted")
    mode.add_argument("-w", "--write", action="store_true", help="rewrite files in place")

    p = add("params", cmd_params, "count total and active parameters by component")
    p.add_argument("spec", metavar="SPEC")
    p.add_argument("--model", help="which model, when a file defines several")
    p.add_argument("--format", choices=["text", "json"], default="text")

    add("schema", cmd_schema, "print the JSON Schema of the resolved Spec IR")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except BrokenPipeError:  # e.g. `modelcost schema | head`
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
