"""Time compile + cost of every shipped spec, in process and through the CLI.

    python benchmarks/bench.py [--repeat N] [--hw mi355x]
    python benchmarks/bench.py --grid
    python benchmarks/bench.py --grid-cli [--against DIR] [--ten-million]

`--grid` measures sweeps at scale instead (issue 24): the points/s of the 225,280-point
grid (Llama 3 70B decode on 5 targets × 4 layouts × 11 batches × 1,024 contexts) in one
process, streamed as `modelcost sweep --format csv` streams it, and on a tenth of its
contexts the shared lowering (modelcost/analyses/grid.py) against each point compiled on its own,
taking turns; then the wall time and peak resident memory of a 1,000,000-point streamed
sweep through the CLI (written to /dev/null).

`--grid-cli` runs issue 36's grid through the CLI (`modelcost sweep`, Llama 3 70B decode
on 5 targets × tp 1, 2, 4, 8 × 11 batches × 128 contexts = 28,160 points, CSV to
/dev/null), with the roofline and with `--estimate kernels`: the CPU seconds each run
takes, start-up included (the children's user + system time), and its wall time, as
points per CPU second and per wall second, medians of N interleaved runs; with
`--against DIR` the same commands of another checkout (a `git worktree` of an earlier
commit) take turns with these, so a noisy machine moves both alike. `--ten-million`
adds a 10,000,000-point streamed CSV sweep (1,000 batches × 10,000 contexts, H200): its
wall time and peak resident memory.

In process, per spec: `load` = read, parse and resolve the file; `compile` = lower,
cost and roofline one workload into a report model; `total` = both. Medians of N runs.
Through the CLI: wall time of `modelcost compile SPEC --hw HW --format json` (a fresh
interpreter each time), median of N runs, with bytecode caching on (as on a user's
machine: PYTHONDONTWRITEBYTECODE is dropped for these runs), next to a bare interpreter
and the floor of importing its runtime dependencies (`python -c "import lark, pydantic,
jinja2, tabulate, msgspec"`), with each command's ratio to the floor (measured
interleaved, so a noisy machine moves both alike).

Scale: a spec of 1,000 distinct layers (a block called with 1,000 different widths:
16,003 ops) loaded, compiled for prefill and decode and rendered to JSON in process,
within the bounds the CLI enforces (20,000 layer statements, 30,000 ops: README); then
the time per layer at 250, 500, 1,000 and 2,000 layers (linear: it stays flat), the
bounds lifted for the 2,000 (32,003 ops).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from tabulate import tabulate

from modelcost import load_spec
from modelcost.base.resources import specs_dir
from modelcost.ir.graph import Phase, Workload
from modelcost.language.spec import walk
from modelcost.language.spec_layers import PatchEmbed, PositionEmbedding
from modelcost.lowering.validate import for_phase
from modelcost.roofline.compile import compile_report
from modelcost.targets.hardware import load_hardware

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the inputs the tests check (tests/hostile.py's way)

from heterogeneous_spec import distinct_layers  # noqa: E402


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
    ap.add_argument("--grid", action="store_true", help="sweeps at scale only")
    ap.add_argument("--grid-cli", action="store_true", help="issue 36's grid through the CLI")
    ap.add_argument("--against", metavar="DIR", help="another checkout, with --grid-cli")
    ap.add_argument("--ten-million", action="store_true", help="with --grid-cli")
    args = ap.parse_args()
    if args.grid:
        print(_grid())
        return
    if args.grid_cli:
        print(_grid_cli(max(3, args.repeat // 10), args.against, args.ten_million))
        return
    print(_in_process(args.hw, args.repeat))
    print()
    print(_through_cli(args.hw, max(5, args.repeat // 5)))
    print()
    print(_scale())
    print(_layouts(args.repeat))
    print(_sweep_rate())


def _in_process(hw_name: str, repeat: int) -> str:
    """Every shipped spec's load and compile times in process, medians of `repeat`."""
    hw = load_hardware(hw_name)
    rows = []
    for path in sorted((specs_dir() / "models").glob("*.model")):
        spec = load_spec(path)
        load = median_ms(lambda p=path: load_spec(p), repeat)
        cells = [path.stem, f"{load:.2f}"]
        ops = [op for op, _ in walk(spec.body, streams=False)]  # the main stream
        positions = min((op.positions for op in ops if isinstance(op, PositionEmbedding)),
                        default=2048)  # fmt: skip
        image = any(isinstance(op, PatchEmbed) for op in ops)
        for phase in Phase:
            n = min(2048, positions)
            # a vision model: its image; each phase the lengths it reads (validate.READ_BY)
            wl = for_phase(Workload(phase, 1, None if image else n, n))
            if phase is Phase.decode and not any(op.decodes for op in ops):  # an encoder
                cells.append("-")
                continue
            cells.append(f"{median_ms(lambda s=spec, w=wl: compile_report(s, hw, w), repeat):.2f}")
        total = load + max(float(c) for c in cells[2:] if c != "-")
        cells.append(f"{total:.2f}")
        rows.append(cells)
    head = f"in process, median of {repeat} (ms), hardware {hw_name}:"
    return head + "\n" + tabulate(rows, headers=["spec", "load", "prefill", "decode", "train",
                                                 "load + worst"],
                                  colalign=("left",) + ("right",) * 5)  # fmt: skip


def _through_cli(hw_name: str, n: int) -> str:
    """The commands' wall times through the CLI against the import floor, taking turns."""
    commands = {
        "(python -c pass)": [sys.executable, "-c", "pass"],
        FLOOR: [sys.executable, "-c", "import lark, pydantic, jinja2, tabulate, msgspec"],
        # `import pydantic` is lazy: a program that defines models also loads BaseModel
        "floor + pydantic.BaseModel": [sys.executable, "-c",
            "import lark, pydantic, jinja2, tabulate, msgspec; from pydantic import BaseModel"],
        "modelcost --help": [sys.executable, "-m", "modelcost", "--help"],
    }  # fmt: skip
    commands["sweep llama3-70b, 64 decode points"] = [sys.executable, "-m", "modelcost",
        "sweep", str(specs_dir() / "models" / "llama3-70b.model"), "--hw", "h200", "--phase",
        "decode", "--batch", "1..128", "--context", "1K,4K,16K,64K", "--tp", "4,8",
        "--format", "csv"]  # fmt: skip
    commands["serve llama3.1-405b-fp8 --search --tpot 50ms"] = [sys.executable, "-m",
        "modelcost", "serve", str(specs_dir() / "models" / "llama3.1-405b-fp8.model"), "--hw",
        "h200", "--isl", "2048", "--osl", "256", "--search", "--tpot", "50ms"]  # fmt: skip
    commands["serve deepseek-v3 --search --tpot 50ms"] = [sys.executable, "-m",
        "modelcost", "serve", str(specs_dir() / "models" / "deepseek-v3.model"), "--hw",
        "h200", "--isl", "2048", "--osl", "256", "--search", "--tpot", "50ms"]  # fmt: skip
    commands["serve llama3-70b --budget 8192 --tpot 30ms"] = [sys.executable, "-m",
        "modelcost", "serve", str(specs_dir() / "models" / "llama3-70b.model"), "--hw",
        "h200", "--tp", "4", "--isl", "2048", "--osl", "256", "--budget", "8192",
        "--tpot", "30ms"]  # fmt: skip
    curve = ["serve", str(specs_dir() / "models" / "llama3-70b-fp8.model"), "--hw", "h200",
             "--tp", "8", "--isl", "1024", "--osl", "1024", "--budget", "8192", "--engine",
             "vllm", "--concurrency", "1..512"]  # fmt: skip
    commands["serve llama3-70b-fp8 curve, 10 concurrencies"] = [sys.executable, "-m",
        "modelcost", *curve]  # fmt: skip
    commands["the same curve, --length-ratio 0.8"] = [sys.executable, "-m", "modelcost",
        *curve, "--length-ratio", "0.8"]  # fmt: skip
    for name in ("deepseek-v3", "llama3.1-405b", "gpt2"):
        spec = Path(specs_dir() / "models" / f"{name}.model")
        commands[f"compile {name}"] = [sys.executable, "-m", "modelcost", "compile", str(spec),
            "--hw", hw_name, "--phase", "prefill,decode", "--context", "1024",
            "--seq", "1024", "--format", "json"]  # fmt: skip
    walls = _interleaved(commands, n)
    floor = walls[FLOOR]
    cli = [[k, f"{v:.0f}", f"{v / floor:.2f}"] for k, v in walls.items()]
    return (f"through the CLI, median wall time of {n} interleaved runs:\n"
            + tabulate(cli, headers=["command", "ms", "× floor"],
                       colalign=("left", "right", "right")))  # fmt: skip


FLOOR = "floor: import lark, pydantic, jinja2, tabulate, msgspec"
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _run(cmd: list[str]) -> None:
    subprocess.run(cmd, check=True, capture_output=True, env=ENV)


def _interleaved(commands: dict[str, list[str]], n: int) -> dict[str, float]:
    """Median wall time (ms) of each command, the commands taking turns."""
    for cmd in commands.values():
        _run(cmd)  # warm: bytecode caches
    times: dict[str, list[float]] = {k: [] for k in commands}
    for _ in range(n):
        for k, cmd in commands.items():
            t = time.perf_counter()
            _run(cmd)
            times[k].append(time.perf_counter() - t)
    return {k: statistics.median(v) * 1e3 for k, v in times.items()}


def _layouts(repeat: int) -> str:
    """A parallel layout against one device, side by side: DeepSeek-V3 decode."""
    from modelcost.ir.graph import Parallel

    spec = load_spec(specs_dir() / "models" / "deepseek-v3.model")
    one = Workload(Phase.decode, 64)
    split = Workload(Phase.decode, 64, parallel=Parallel(tp=8, dp=8, ep=8))
    a = median_ms(lambda: compile_report(spec, "h200", one), repeat)
    b = median_ms(lambda: compile_report(spec, "h200", split), repeat)
    return (
        f"DeepSeek-V3 decode, batch 64: one device {a:.2f} ms, tp 8 dp 8 ep 8 {b:.2f} ms "
        f"({b / a:.2f}×)"
    )


GRID_TARGETS = ("h100", "h200", "b200", "mi300x", "mi355x")
GRID_LAYOUTS = {"tp": [1, 2, 4, 8]}
GRID_BATCHES = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]


def _grid() -> str:
    """The issue-24 grid's points/s in one process (and, on a tenth of it, the shared
    lowering against each point on its own), and a 1,000,000-point streamed sweep's
    wall time and peak resident memory through the CLI."""
    import resource

    from modelcost.analyses.sweeps import Skip, _one, plan, row_values, run
    from modelcost.render.sweep_stream import writer

    spec = specs_dir() / "models" / "llama3-70b.model"
    contexts = list(range(128, 128 * 1025, 128))  # 1,024 contexts, 128 to 131,072
    grid = plan(str(spec), list(GRID_TARGETS), "decode", GRID_BATCHES, context=contexts,
                layout=GRID_LAYOUTS, limit=10_000_000)  # fmt: skip
    t = time.perf_counter()
    rows = 0
    with open(os.devnull, "wb") as sink:
        w = writer("csv", sink)
        for r in row_values(grid):
            if not isinstance(r, Skip):
                w.write(r)
                rows += 1
        w.close()
    rate = grid.size / (time.perf_counter() - t)
    # the same kind of points one by one (as before the shared lowering: grid.py), and
    # shared, taking turns on a tenth of the contexts, so a noisy machine moves both alike
    rates = {}
    for estimate in ("roofline", "kernels"):
        tenth = plan(str(spec), list(GRID_TARGETS), "decode", GRID_BATCHES,
                     context=contexts[::10], layout=GRID_LAYOUTS, limit=10_000_000,
                     estimate=estimate)  # fmt: skip
        work = (tenth.specs, tenth.targets, tenth.sp, tenth.how, tenth.swept)
        shared = alone = 0.0
        for _ in range(2):
            t = time.perf_counter()
            for _r in run(tenth):
                pass
            shared += time.perf_counter() - t
            t = time.perf_counter()
            for point in tenth.points():
                _one(work, point)
            alone += time.perf_counter() - t
        rates[estimate] = (2 * tenth.size / shared, 2 * tenth.size / alone)
    million = [sys.executable, "-m", "modelcost", "sweep", str(spec), "--hw", "h200",
               "--phase", "decode", "--batch", "1..1000+1", "--context", "1K..1000K+1K",
               "--format", "csv", "-o", os.devnull, "--quiet"]  # fmt: skip
    t = time.perf_counter()
    _run(million)
    wall = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # KiB → MiB
    return (
        f"grid: {grid.size:,} points ({rows:,} rows) at {rate:,.0f} points/s in one "
        f"process, streamed as CSV; a tenth of its contexts, taking turns, points/s with "
        f"the lowering shared and one by one: "
        + "; ".join(f"{e} {a:,.0f} and {b:,.0f} ({a / b:.1f}×)" for e, (a, b) in rates.items())
        + "\n"
        f"1,000,000-point streamed sweep: {wall:.0f} s, peak resident memory {peak:,.0f} MiB"
    )


GRID_CLI = ["sweep", "specs/models/llama3-70b.model", "--hw", ",".join(GRID_TARGETS), "--phase",
            "decode", "--tp", "1,2,4,8", "--batch", ",".join(map(str, GRID_BATCHES)),
            "--context", "1K..128K+1K", "--format", "csv", "-o", os.devnull, "--quiet"]  # fmt: skip
GRID_CLI_POINTS = 5 * 4 * 11 * 128


def _cpu_run(cmd: list[str], cwd: Path) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one run of `cmd` in `cwd`, importing modelcost
    from there (the children's user and system time: start-up included)."""
    env = {**ENV, "PYTHONPATH": str(cwd)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, env=env, cwd=cwd)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, wall


def _grid_cli(n: int, against: str | None, ten_million: bool) -> str:
    """Issue 36's grid through the CLI: points per CPU second and per wall second,
    roofline and kernels, this checkout and (`against`) another, taking turns."""
    trees = {"this checkout": ROOT} | ({f"against {against}": Path(against)} if against else {})
    runs = {(tree, est): [] for tree in trees for est in ("roofline", "kernels")}
    for _ in range(n):
        for (tree, est), got in runs.items():
            extra = ["--estimate", "kernels"] if est == "kernels" else []
            got.append(_cpu_run([sys.executable, "-m", "modelcost", *GRID_CLI, *extra],
                                trees[tree]))  # fmt: skip
    lines = [f"issue 36's grid ({GRID_CLI_POINTS:,} points) through the CLI, medians of {n} "
             "interleaved runs:"]  # fmt: skip
    for (tree, est), got in runs.items():
        cpu = statistics.median(c for c, _ in got)
        wall = statistics.median(w for _, w in got)
        lines.append(f"  {tree}, {est}: {cpu:.2f} CPU s ({GRID_CLI_POINTS / cpu:,.0f} points "
                     f"a CPU second), {wall:.2f} s wall ({GRID_CLI_POINTS / wall:,.0f} a "
                     "second)")  # fmt: skip
    if ten_million:
        ten = [sys.executable, "-m", "modelcost", "sweep", "specs/models/llama3-70b.model",
               "--hw", "h200", "--phase", "decode", "--batch", "1..1000+1", "--context",
               "1K..10000K+1K", "--format", "csv", "-o", os.devnull, "--quiet"]  # fmt: skip
        cpu, wall = _cpu_run(ten, ROOT)
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # KiB → MiB
        lines.append(f"10,000,000-point streamed CSV sweep: {wall:.0f} s wall, {cpu:.0f} "
                     f"CPU s, peak resident memory {peak:,.0f} MiB (the largest child's so "
                     "far)")  # fmt: skip
    return "\n".join(lines)


def _sweep_rate() -> str:
    """Llama 3 70B decode points per second in process, one process and two, and with
    the kernels' estimate in one (interleaved, so a noisy machine moves them alike)."""
    from modelcost.analyses.sweeps import sweep

    spec = load_spec(specs_dir() / "models" / "llama3-70b.model")
    hw = load_hardware("h200")
    rates = []
    for jobs, estimate in ((1, "roofline"), (2, "roofline"), (1, "kernels")):
        sweep([spec], [hw], "decode", [1], context=[1024], estimate=estimate)  # warm
        t = time.perf_counter()
        s = sweep([spec], [hw], "decode", list(range(1, 401)), context=[1024, 4096, 32768],
                  jobs=jobs, estimate=estimate)  # fmt: skip
        rates.append(len(s.rows) / (time.perf_counter() - t))
    return (f"sweep: {rates[0]:,.0f} Llama 3 70B decode points/s in one process, "
            f"{rates[1]:,.0f} with two workers, {rates[2]:,.0f} with --estimate kernels "
            f"({rates[2] / rates[0]:.2f}× the roofline's)")  # fmt: skip


def _scale() -> str:
    """1,000 distinct layers: load, prefill, decode and JSON in process; then the time
    per layer of the same at 250 to 2,000 layers (bounds lifted for 2,000)."""
    import modelcost.lowering.lower as lower
    from modelcost import parse_spec
    from modelcost.render import render

    def run(n: int) -> tuple[float, ...]:
        t0 = time.perf_counter()
        spec = parse_spec(distinct_layers(n))
        t1 = time.perf_counter()
        p = compile_report(spec, "h100", Workload(Phase.prefill))
        t2 = time.perf_counter()
        d = compile_report(spec, "h100", Workload(Phase.decode))
        t3 = time.perf_counter()
        render([p, d], "json")
        t4 = time.perf_counter()
        return t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0, len(p.ops)

    run(50)  # warm
    best = min((run(1000) for _ in range(3)), key=lambda r: r[4])
    load, pre, dec, js, total, ops = best
    lines = [
        f"1,000 distinct layers ({ops:,} ops): load {load:.2f} s, prefill {pre:.2f} s, "
        f"decode {dec:.2f} s, JSON {js:.2f} s; total {total:.2f} s (best of 3)"
    ]
    bound, lower.MAX_NODES = lower.MAX_NODES, 10**7  # 2,000 layers are 32,003 ops
    try:
        per = {n: min(run(n)[4] for _ in range(3)) / n * 1e3 for n in (250, 500, 1000, 2000)}
    finally:
        lower.MAX_NODES = bound
    lines.append("per layer (load to JSON, best of 3): " + ", ".join(
        f"{n:,} layers {ms:.2f} ms" for n, ms in per.items()))  # fmt: skip
    return "\n".join(lines)


if __name__ == "__main__":
    main()
