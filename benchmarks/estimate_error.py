"""The kernel-aware estimate against published kernel measurements: the error
distribution per group (kind and part) of the out-of-sample points, the in-sample ones
(a figure of the model was taken from them: `built`) counted apart, and any measurement
that beats its roofline.

    python benchmarks/estimate_error.py [tests/data/measured-kernels.json] [-v]
"""

from __future__ import annotations

import statistics
import sys
from collections import defaultdict
from pathlib import Path

from tabulate import tabulate

from modelcost.estimate.measured import check, load_points

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    args = [a for a in sys.argv[1:] if a != "-v"]
    path = Path(args[0]) if args else ROOT / "tests" / "data" / "measured-kernels.json"
    every = [check(p) for p in load_points(path)]
    checks = [c for c in every if not c.in_sample]
    groups = defaultdict(list)
    for c in checks:
        groups[(c.kind, c.hardware)].append(c)
        groups[(c.kind, "all")].append(c)
    rows = []
    for (kind, part), cs in sorted(groups.items()):
        errors = sorted(c.error for c in cs)
        within = sum(abs(e) <= 0.25 for e in errors)
        rows.append([kind, part, len(cs), f"{statistics.median(errors):+.0%}",
                     f"{errors[0]:+.0%}", f"{errors[-1]:+.0%}", f"{within}/{len(cs)}",
                     sum(c.beaten for c in cs)])  # fmt: skip
    print(tabulate(rows, headers=["kind", "part", "points", "median error", "min", "max",
                                  "within ±25 %", "roofline beaten"]))  # fmt: skip
    within = sum(abs(c.error) <= 0.25 for c in checks)
    print(f"\nout of sample: {within}/{len(checks)} within ±25 % ({within / len(checks):.0%}); "
          f"roofline beaten by {sum(c.beaten for c in every)} of all {len(every)}; "
          f"{len(every) - len(checks)} in-sample points not counted")  # fmt: skip
    if "-v" in sys.argv:
        print()
        misses = [[c.id, c.hardware, c.what, f"{c.error:+.0%}", c.reason] for c in checks
                  if abs(c.error) > 0.25]  # fmt: skip
        print(tabulate(misses, headers=["id", "part", "shape", "error", "why"]))


if __name__ == "__main__":
    main()
