"""Time compile + cost of every shipped spec, in process and through the CLI.

    python benchmarks/bench.py [--repeat N] [--hw mi355x]

In process, per spec: `load` = read, parse and resolve the file; `compile` = lower,
cost and roofline one workload into a report model; `total` = both. Medians of N runs.
Through the CLI: wall time of `modelcost compile SPEC --hw HW --format json` (a fresh
interpreter each time), median of N runs, with bytecode caching on (as on a user's
machine: PYTHONDONTWRITEBYTECODE is dropped for these runs), next to a bare interpreter
and a bare `import pydantic` for scale.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from tabulate import tabulate

from modelcost import load_spec
from modelcost.compile import compile_report
from modelcost.graph import Phase, Workload
from modelcost.hardware import load_hardware
from modelcost.resources import specs_dir


def median_ms(fn, repeat: int) -> float:
    fn()  # warm (first-use caches: the grammar, pydantic validators)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--hw", default="mi355x")
    args = ap.parse_args()
    hw = load_hardware(args.hw)
    rows = []
    for path in sorted((specs_dir() / "models").glob("*.model")):
        spec = load_spec(path)
        load = median_ms(lambda p=path: load_spec(p), args.repeat)
        cells = [path.stem, f"{load:.2f}"]
        for phase in Phase:
            n = 1024 if path.stem == "gpt2" else 2048
            wl = Workload(phase, 1, None if path.stem == "vit-l16" else n, n)  # ViT: its image
            if phase is Phase.decode and path.stem == "vit-l16":
                cells.append("-")
                continue
            cells.append(
                f"{median_ms(lambda s=spec, w=wl: compile_report(s, hw, w), args.repeat):.2f}"
            )
        total = load + max(float(c) for c in cells[2:] if c != "-")
        cells.append(f"{total:.2f}")
        rows.append(cells)
    print(f"in process, median of {args.repeat} (ms), hardware {args.hw}:")
    print(tabulate(rows, headers=["spec", "load", "prefill", "decode", "train", "load + worst"],
                   colalign=("left",) + ("right",) * 5))  # fmt: skip
    print()
    n = max(5, args.repeat // 5)
    cli = [
        ["(python -c pass)", f"{median_ms(lambda: _run([sys.executable, '-c', 'pass']), n):.0f}"],
        [
            "(import pydantic)",
            f"{median_ms(lambda: _run([sys.executable, '-c', 'import pydantic']), n):.0f}",
        ],
    ]
    for name in ("deepseek-v3", "llama3.1-405b", "gpt2"):
        spec = Path(specs_dir() / "models" / f"{name}.model")
        cmd = [sys.executable, "-m", "modelcost", "compile", str(spec), "--hw", args.hw,
               "--phase", "decode", "--context", "1024", "--format", "json"]  # fmt: skip
        cli.append([name, f"{median_ms(lambda c=cmd: _run(c), n):.0f}"])
    print("through the CLI, median wall time (ms):")
    print(tabulate(cli, headers=["spec", "modelcost compile"], colalign=("left", "right")))


ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _run(cmd: list[str]) -> None:
    subprocess.run(cmd, check=True, capture_output=True, env=ENV)


if __name__ == "__main__":
    main()
