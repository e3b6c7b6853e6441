"""The `calibrate` command: its arguments and what it runs."""

from __future__ import annotations

import argparse

from modelcost.base.errors import SpecError

from .common import EXIT_BAD_INPUT, EXIT_OK, _emit, _report


def cmd_calibrate(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    from modelcost.estimate.calibration import fit, from_tracelens, read_points
    from modelcost.targets.hardware import load_hardware

    try:
        hw = load_hardware(args.hw)
        observations = []
        for path in args.measured:
            if str(path).endswith(".csv"):
                observations += from_tracelens(path, hw)
            else:
                observations += read_points(path, hw)
        if not observations:
            raise SpecError(f"no measurement of a GEMM, attention or other op on {hw.name}",
                            filename="modelcost", hint="check --hw")  # fmt: skip
        cal, rows = fit(observations, hw, args.times)
    except SpecError as err:
        _report(err)
        return EXIT_BAD_INPUT
    table = [[r.kind, r.precision, r.points, f"{r.factor:.3f}",
              f"{r.median_error_before:+.0%} → {r.median_error_after:+.0%}",
              f"{r.within_before}/{r.points} → {r.within_after}/{r.points}"]
             for r in rows]  # fmt: skip
    print(f"calibrating the estimate on {hw.name}: {len(observations)} measured ops")
    print(tabulate(table, headers=["kind", "precision", "points", "factor", "median error",
                                   "within ±25 %"]))  # fmt: skip
    if args.output:
        status = _emit(cal.model_dump_json(indent=2) + "\n", args.output)
        if status == EXIT_OK and args.output != "-":
            print(f"wrote {args.output}: use it with --calibrate")
        return status
    return EXIT_OK


def arguments(p: argparse.ArgumentParser) -> None:
    """`calibrate`'s arguments."""
    p.add_argument("measured", nargs="+", metavar="FILE",
                   help="measured points (JSON) or TraceLens perf-report CSVs")  # fmt: skip
    p.add_argument("--hw", required=True, help="the hardware they were measured on")
    p.add_argument(
        "--times",
        action="store_true",
        help="also keep each measured shape's time (used where a shape matches)",
    )
    p.add_argument("-o", "--output", metavar="FILE", help="write the calibration here")
