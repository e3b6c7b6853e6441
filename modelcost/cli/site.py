"""The `site` command: its arguments and what it runs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from modelcost.base.errors import SpecError
from modelcost.base.files import write_text

from .common import EXIT_BAD_INPUT, EXIT_OK, SPEC_HELP, _estimation, _layout, _report
from .options import ESTIMATE, ROOFLINE, SITE_LAYOUT, add_options


def cmd_site(args: argparse.Namespace) -> int:
    from modelcost.estimate.costing import costing
    from modelcost.language.resolve import load_specs
    from modelcost.publish.site import SiteOptions, build_site, foreign_files, write_site
    from modelcost.targets.hardware import load_hardware

    try:
        specs = []
        for path in args.specs:
            in_file = load_specs(path, root=Path(args.root) if args.root else None)
            for spec in in_file:
                specs.append((Path(path).stem if len(in_file) == 1 else spec.name, spec))
        names = [h.strip() for h in args.hw.split(",") if h.strip()]
        if not names:
            raise SpecError(f"--hw names no target: {args.hw!r}", filename="modelcost",
                            hint="e.g. --hw mi300x,h200")  # fmt: skip
        targets = [load_hardware(h) for h in names]
        diffs = []
        for pair in args.diff:
            a, sep, b = pair.partition(":")
            if not sep or not a or not b:
                raise SpecError(f"--diff takes A:B, got {pair!r}", filename="modelcost")
            diffs.append((a, b))
        estimate, calibration = _estimation(args)
        how = costing(args.conventions, args.peak, args.bandwidth, estimate, calibration,
                      args.engine)  # fmt: skip
        options = SiteOptions(args.batch, args.seq, args.context, _layout(args, SITE_LAYOUT), how)
        files = build_site(specs, targets, diffs, options)
    except SpecError as err:
        _report(err)
        return EXIT_BAD_INPUT
    foreign = [] if args.force else foreign_files(files, Path(args.output))
    if foreign:
        shown = ", ".join(foreign[:5]) + (
            f" and {len(foreign) - 5} more" if len(foreign) > 5 else ""
        )
        print(f"{args.output}: error: would overwrite files that modelcost site did not write: "
              f"{shown}\n  hint: pass --force to replace them, or choose another -o folder",
              file=sys.stderr)  # fmt: skip
        return EXIT_BAD_INPUT
    try:
        removed = write_site(files, Path(args.output), write_text)
    except OSError as exc:
        print(f"{args.output}: error: cannot write: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    gone = f"; removed {len(removed)} it wrote before and no longer writes" if removed else ""
    print(f"wrote {len(files)} files to {args.output}{gone}", file=sys.stderr)
    return EXIT_OK


def arguments(p: argparse.ArgumentParser) -> None:
    """`site`'s arguments."""
    p.add_argument("specs", nargs="+", metavar="SPEC", help=SPEC_HELP)
    p.add_argument("--hw", required=True, help="comma-separated targets, e.g. mi300x,mi355x,h200")
    p.add_argument("-o", "--output", required=True, metavar="DIR")
    p.add_argument("--force", action="store_true",
                   help="replace files in DIR that modelcost site did not write")  # fmt: skip
    p.add_argument("--root", metavar="DIR",
                   help="the project's root: no spec or import outside it is read, but "
                   "the shipped models (as the MkDocs plugin's `root:`)")  # fmt: skip
    p.add_argument("--diff", action="append", default=[], metavar="A:B",
                   help="also a diff page of spec A against B (file stems)")  # fmt: skip
    add_options(p, ("batch", "seq", "context", *SITE_LAYOUT, *ROOFLINE, *ESTIMATE))
