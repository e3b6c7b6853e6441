"""Time the CLI on hostile inputs that sit at or just past every bound.

    python benchmarks/hostile.py [--out DIR]

Writes each input (tests/hostile.py builds them; the fuzz suite checks their errors),
runs `modelcost check` and `modelcost compile --format html` on it in a fresh
interpreter, and prints the wall time of each beside `modelcost check` of the largest
shipped spec, so the ratios are read side by side on a noisy machine. Every input
within the size limit must be answered (an error or a report) in under 2 s.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tabulate import tabulate

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from hostile import HOSTILE  # noqa: E402


def wall(*args: str) -> tuple[float, str]:
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "modelcost", *args], capture_output=True, text=True)
    first = (r.stderr or r.stdout).splitlines()[0] if (r.stderr or r.stdout) else ""
    return time.perf_counter() - t, f"exit {r.returncode}: {first[:90]}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=None, help="keep the inputs here")
    args = ap.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="modelcost-hostile-"))
    out.mkdir(parents=True, exist_ok=True)
    base, _ = wall("check", str(ROOT / "specs" / "models" / "deepseek-v3.model"))
    rows = [["deepseek-v3 (shipped)", f"{base:.2f}", "", "1.0", "ok"]]
    for name, (text, _) in HOSTILE.items():
        path = out / f"{name}.model"
        path.write_text(text)
        check, said = wall("check", str(path))
        html, _ = wall("compile", str(path), "--hw", "h100", "--format", "html", "-o", "/dev/null")
        rows.append([name, f"{check:.2f}", f"{html:.2f}", f"{max(check, html) / base:.1f}", said])
    print(tabulate(rows, headers=["input", "check (s)", "compile html (s)", "× shipped", "answer"]))


if __name__ == "__main__":
    main()
