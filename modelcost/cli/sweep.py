"""The `sweep` command: its arguments and what it runs."""

from __future__ import annotations

import argparse
import sys

from modelcost.base.errors import SpecError
from modelcost.base.settings import MAX_POINTS, MAX_STREAMED
from modelcost.render import SWEEP_FORMATS
from modelcost.render.escape import clean

from .common import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    SPEC_HELP,
    _check_executor,
    _emit,
    _estimation,
    _executor_options,
    _report,
)
from .options import ENGINE, ESTIMATE, LAYOUT, ROOFLINE, add_options
from .values import positive


def cmd_sweep(args: argparse.Namespace) -> int:
    from modelcost.analyses.sweeps import ENGINE_AXES, LAYOUT_AXES, plan
    from modelcost.language.resolve import load_specs
    from modelcost.perfmodel import Conventions
    from modelcost.render import STREAMED_FORMATS
    from modelcost.targets.hardware import load_hardware

    streamed = args.format in STREAMED_FORMATS
    try:
        _check_executor(args, "sweep")
        specs = [spec for path in args.specs for spec in load_specs(path)]
        targets = [load_hardware(h.strip()) for h in args.hw.split(",") if h.strip()]
        if not targets:
            raise SpecError(f"--hw names no target: {args.hw!r}", filename="modelcost",
                            hint="e.g. --hw mi300x,h200")  # fmt: skip
        estimate, calibration = _estimation(args)
        found = plan(
            specs, targets, args.phase, args.batch, args.seq, args.context,
            {name: getattr(args, name) for name in LAYOUT_AXES}, args.sp,
            {name: getattr(args, name) for name in ENGINE_AXES},
            Conventions(args.conventions), args.peak, args.bandwidth,
            estimate, calibration, args.engine,
            limit=MAX_STREAMED if streamed else MAX_POINTS,
        )  # fmt: skip
        if streamed:
            return _stream_sweep(found, args)
        return _held_sweep(found, args)
    except SpecError as err:
        _report(err)
        return EXIT_BAD_INPUT


def _swept(found, args: argparse.Namespace, as_values: bool = False):
    """The plan's rows (or, `as_values`, each row's values) and skips as they are
    computed, with the progress line."""
    from modelcost.analyses.sweeps import row_values, run

    from .progress import Progress

    progress = Progress(found.size, enabled=False if args.quiet else None)
    results = (row_values if as_values else run)(found, args.jobs, executor=args.executor,
                                                 address=args.address)  # fmt: skip
    try:
        for done, result in enumerate(results, 1):
            yield result
            progress.update(done)
    finally:
        progress.close()


def _said_skips(summary, total: int) -> None:
    """Skipped points summed up on stderr: one line per reason, its count, an example."""
    if not summary.total:
        return
    print(f"modelcost: skipped {summary.total:,} of {total:,} points:", file=sys.stderr)
    for line in summary.lines():
        print(f"  {clean(line)}", file=sys.stderr)


def _held_sweep(found, args: argparse.Namespace) -> int:
    """A sweep written once whole (md, json, html): its rows held in memory."""
    from modelcost.analyses.sweeps import Skip, SkipSummary, Sweep, SweepRow
    from modelcost.render.sweep_format import render_sweep

    rows, skips, summary = [], [], SkipSummary()
    for result in _swept(found, args):
        if isinstance(result, SweepRow):
            rows.append(result)
        elif isinstance(result, Skip):
            skips.append(result.said)
            summary.add(result)
    _said_skips(summary, found.size)
    if not rows:
        print("modelcost: error: no point of the sweep can run", file=sys.stderr)
        return EXIT_BAD_INPUT
    result = Sweep.trusted(rows=tuple(rows), skipped=tuple(skips))
    return _emit(render_sweep(result, args.format), args.output)


class _NoRows(Exception):
    """No point of a streamed sweep ran: its file is not written."""


def _stream_sweep(found, args: argparse.Namespace) -> int:
    """A sweep written row by row (csv, jsonl, parquet) as the points are computed:
    none held, a file renamed into place when the sweep ends (files.streamed)."""
    from modelcost.analyses.sweeps import Skip, SkipSummary
    from modelcost.base.files import streamed
    from modelcost.render.sweep_stream import writer

    summary, rows = SkipSummary(), 0
    try:
        with streamed(args.output) as out:
            w = None
            for result in _swept(found, args, as_values=True):
                if isinstance(result, Skip):
                    summary.add(result)
                    continue
                if w is None:  # the header (a Parquet file's schema) with the first row
                    w = writer(args.format, out)
                w.write(result)
                rows += 1
            if w is None:
                raise _NoRows
            w.close()
    except _NoRows:
        _said_skips(summary, found.size)
        print("modelcost: error: no point of the sweep can run", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as exc:
        if args.output in (None, "-"):
            raise  # standard output closed or a broken pipe: main says so
        print(f"{args.output}: error: cannot write: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    _said_skips(summary, found.size)
    return EXIT_OK


def arguments(p: argparse.ArgumentParser) -> None:
    """`sweep`'s arguments."""
    p.add_argument("specs", nargs="+", metavar="SPEC", help=SPEC_HELP)
    p.add_argument("--hw", required=True, help="targets, separated by commas")
    add_options(p, ("phase", "batch", "seq", "context", *ENGINE, *LAYOUT), lists=True)
    add_options(p, ROOFLINE + ESTIMATE)
    p.add_argument("--jobs", type=positive, default=1,
                   help="worker processes sharing the points (default 1)")  # fmt: skip
    p.add_argument("--format", choices=SWEEP_FORMATS, default="md",
                   help="csv, jsonl and parquet (pip install 'modelcost[parquet]') are "
                   f"written as the points are computed (CSV in blocks, no row held "
                   f"over half a second), up to "
                   f"{MAX_STREAMED:,} points; md, json and html once whole, up to "
                   f"{MAX_POINTS:,} (default md)")  # fmt: skip
    p.add_argument("--quiet", action="store_true",
                   help="no progress line on standard error (there is none when it is "
                   "not a terminal)")  # fmt: skip
    _executor_options(p, "points")
    p.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout (- too)")
