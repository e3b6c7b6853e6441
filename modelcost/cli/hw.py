"""The `hw` command: its arguments and what it runs."""

from __future__ import annotations

import argparse
import json

from modelcost.base.errors import SpecError
from modelcost.base.settings import GIB
from modelcost.render.escape import clean, terminal
from modelcost.render.units import fixed

from .common import EXIT_BAD_INPUT, EXIT_OK, _report


def cmd_hw_list(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    from modelcost.targets.hardware import load_hardware, shipped_hardware

    targets = [load_hardware(name) for name in shipped_hardware()]
    if args.format == "json":  # every figure of every target, as `hw show --format json`
        print(json.dumps([h.model_dump(mode="json") for h in targets], indent=2))
        return EXIT_OK
    rows = []
    for h in targets:
        name = h.name
        bf16 = h.peak("matrix", "bf16")[0]
        rows.append([name, h.title, h.arch, _tflops(bf16), f"{h.memory_bandwidth / 1e12:g}",
                     f"{h.capacity / GIB:.1f}", h.capacity_basis])  # fmt: skip
    headers = ["name", "title", "arch", "bf16 TFLOPS", "TB/s", "GiB", "capacity"]
    print(terminal(tabulate(rows, headers=headers)))
    return EXIT_OK


def cmd_hw_show(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    from modelcost.targets.hardware import load_hardware

    try:
        h = load_hardware(args.name)
    except SpecError as err:
        _report(err)
        return EXIT_BAD_INPUT
    if args.format == "json":
        print(h.model_dump_json(indent=2))
        return EXIT_OK
    print(f"{clean(h.title)} ({h.name}, {clean(h.arch)}, {clean(h.vendor)})")
    datasheet = f"; datasheet {h.memory / GIB:g} GiB" if h.memory_reported else ""
    print(f"HBM {h.capacity / GIB:.1f} GiB ({h.capacity_basis}{datasheet}) "
          f"at {h.memory_bandwidth / 1e12:g} TB/s; "
          f"scale-up {h.scaleup_bandwidth / 1e9:g} GB/s; {h.compute_units} CUs at "
          f"{h.clock / 1e6:g} MHz")  # fmt: skip
    precisions = sorted(set(h.matrix) | set(h.vector) | set(h.achievable.matrix))
    rows = [
        [p, _tflops(h.matrix.get(p)), _tflops(h.achievable.matrix.get(p)), _tflops(h.vector.get(p))]
        for p in precisions
    ]
    print(tabulate(rows, headers=["precision", "matrix TFLOPS", "achievable", "vector TFLOPS"]))
    if h.achievable.source:
        print(f"achievable: {clean(h.achievable.source)}")
    if h.memory_source:
        print(f"memory: {clean(h.memory_source)}")
    return EXIT_OK


def _tflops(value: float | None) -> str:
    return "" if value is None else fixed(value / 1e12, 1)


def arguments(hw: argparse.ArgumentParser) -> None:
    """`hw list` and `hw show`, each with its handler."""
    hw_sub = hw.add_subparsers(dest="hw_command", required=True, metavar="COMMAND")
    p = hw_sub.add_parser("list", help="list the shipped targets")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.set_defaults(func=cmd_hw_list)
    p = hw_sub.add_parser("show", help="one target's figures")
    p.add_argument("name", help="a shipped name or a .hw file")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.set_defaults(func=cmd_hw_show)
