"""Sweeps at scale (issue 24, items 2 and 3): rows written as they are computed (CSV,
JSON Lines, Parquet), nothing half-written, the points made one chunk at a time, a
progress line where standard error is a terminal, skipped points summed up by reason."""

import io
import json
import os
import pty
import subprocess
import sys

import pytest
from conftest import MODELS, ROOT, run_cli

from modelcost import SpecError, sweep
from modelcost.analyses.sweeps import CHUNK, Skip, SkipSummary, SweepRow, plan, run
from modelcost.base.settings import MAX_POINTS, MAX_STREAMED
from modelcost.cli.progress import Progress
from modelcost.render.sweep_stream import COLUMNS

LLAMA8 = str(MODELS / "llama3-8b.model")
# 2 targets × 3 batches × 2 contexts × 2 dp sizes = 24 points; batch 1 does not split
# over 2 replicas: 4 of them skipped
FLAGS = ["--hw", "h100,h200", "--phase", "decode", "--batch", "1,2,4", "--context", "1Ki,2Ki",
         "--dp", "1,2"]  # fmt: skip


def _held():
    return sweep(LLAMA8, ["h100", "h200"], "decode", batch=[1, 2, 4], context=[1024, 2048],
                 layout={"dp": [1, 2]})  # fmt: skip


def test_streamed_csv_is_the_held_sweeps_csv_byte_for_byte(tmp_path) -> None:
    out = tmp_path / "s.csv"
    r = run_cli("sweep", LLAMA8, *FLAGS, "--format", "csv", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert out.read_text() == _held().to_csv()
    assert [p.name for p in tmp_path.iterdir()] == ["s.csv"]  # no temporary left


def test_json_lines_and_parquet_hold_the_same_rows(tmp_path) -> None:
    held = [row.model_dump(mode="json") for row in _held().rows]
    r = run_cli("sweep", LLAMA8, *FLAGS, "--format", "jsonl", "-o", str(tmp_path / "s.jsonl"))
    assert r.returncode == 0, r.stderr
    lines = (tmp_path / "s.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == held
    pq = pytest.importorskip("pyarrow.parquet")  # the dev extra installs it (CI runs this)
    r = run_cli("sweep", LLAMA8, *FLAGS, "--format", "parquet", "-o", str(tmp_path / "s.pq"))
    assert r.returncode == 0, r.stderr
    table = pq.read_table(tmp_path / "s.pq")
    assert tuple(table.column_names) == COLUMNS == tuple(SweepRow.model_fields)
    assert table.to_pylist() == held


def test_skipped_points_are_summed_up_by_reason() -> None:
    r = run_cli("sweep", LLAMA8, *FLAGS, "--format", "csv")
    assert r.returncode == 0
    # one line per reason (the numbers set aside), its count and its first point
    assert r.stderr.splitlines() == [
        "modelcost: skipped 4 of 24 points:",
        "  4 points: batch 1 does not split over dp = 2 replicas of 1 microbatch "
        "(e.g. llama3_8b on h100, decode batch 1, dp 2)",
    ]
    summary = SkipSummary()
    for why in ("--tp 3 does not divide 64 heads", "--tp 5 does not divide 64 heads", "other"):
        summary.add(Skip("p", why))
    assert summary.total == 3
    assert summary.lines() == ["2 points: --tp 3 does not divide 64 heads (e.g. p)",
                               "1 point: other (e.g. p)"]  # fmt: skip


def test_a_sweep_with_no_point_that_runs_writes_nothing(tmp_path) -> None:
    out = tmp_path / "none.csv"
    r = run_cli("sweep", LLAMA8, "--hw", "h100", "--phase", "decode", "--batch", "1",
                "--dp", "2", "--format", "csv", "-o", str(out))  # fmt: skip
    assert r.returncode == 2 and "no point of the sweep can run" in r.stderr
    assert list(tmp_path.iterdir()) == []


def test_the_points_are_made_a_chunk_at_a_time() -> None:
    # a plan over the held limit is accepted for streaming, counted without being made;
    # its points come one at a time (a generator), and run() takes CHUNK of them a turn
    big = plan(LLAMA8, "h100", "decode", batch=list(range(1, 1001)),
               context=list(range(1024, 1024 * 1001, 1024)), limit=MAX_STREAMED)  # fmt: skip
    assert big.size == 1_000_000 > MAX_POINTS
    points = big.points()
    assert iter(points) is points  # not a list
    with pytest.raises(SpecError, match="streamed: --format csv, jsonl or parquet"):
        plan(LLAMA8, "h100", "decode", batch=list(range(1, 1001)),
             context=list(range(1024, 1024 * 1001, 1024)))  # fmt: skip
    small = plan(LLAMA8, "h100", "decode", batch=list(range(1, CHUNK + 10)), context=1024)
    assert sum(isinstance(r, SweepRow) for r in run(small)) == CHUNK + 9


def test_the_progress_line() -> None:
    now = [0.0]
    out = io.StringIO()
    p = Progress(1000, stream=out, enabled=True, clock=lambda: now[0])
    now[0] = 2.0
    p.update(250)  # 125 points/s, 750 left: 6 s
    assert out.getvalue() == "\r250 / 1,000 points  125/s  0:06 left"
    now[0] = 2.1
    p.update(260)  # within REDRAW: not redrawn
    now[0] = 8.0
    p.update(1000)
    p.close()
    last = "1,000 / 1,000 points  125/s  0:00 left"  # then cleared: as many spaces
    assert out.getvalue().endswith(f"\r{last}\r" + " " * len(last) + "\r")
    quiet = io.StringIO()
    Progress(10, stream=quiet).update(10)  # a StringIO is no terminal: nothing drawn
    assert quiet.getvalue() == ""


def _on_a_terminal(*args: str) -> str:
    """The CLI's standard error when it is a pseudo-terminal."""
    main, tty = pty.openpty()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "modelcost", *args], stdout=subprocess.DEVNULL,
                            stderr=tty, cwd=ROOT, env=env)  # fmt: skip
    os.close(tty)
    chunks = []
    while True:
        try:
            data = os.read(main, 4096)
        except OSError:  # the child closed its end
            break
        if not data:
            break
        chunks.append(data)
    proc.wait()
    os.close(main)
    return b"".join(chunks).decode()


def test_a_terminal_sees_the_progress_and_quiet_silences_it() -> None:
    args = ["sweep", LLAMA8, "--hw", "h100", "--phase", "decode", "--batch", "1..64",
            "--context", "1Ki,2Ki", "--format", "csv"]  # fmt: skip
    seen = _on_a_terminal(*args)
    assert "14 / 14 points" in seen and "/s" in seen and "left" in seen
    assert "points" not in _on_a_terminal(*args, "--quiet")


def test_a_sample_of_a_large_grid_equals_compile_point_by_point() -> None:
    # 3 specs (dense, MoE, SSM) × 2 targets × 3 phases × batches × lengths × layouts, with
    # the kernels' estimate: 80 points drawn (seeded) from the whole grid, each row
    # against compile_report of its point, skips against its refusal
    import random

    specs = [str(MODELS / f"{n}.model") for n in ("llama3-8b", "mixtral-8x7b", "mamba2-2.7b")]
    big = plan(specs, ["h100", "mi300x"], ["prefill", "decode", "train"],
               batch=[1, 2, 8, 24, 64], seq=[128, 1000, 4096], context=[512, 4096, 30000],
               layout={"tp": [1, 2, 4], "dp": [1, 2], "ep": [1, 2], "pp": [1, 2],
                       "zero": [0, 1], "microbatches": [1, 2]},
               estimate="kernels", limit=MAX_STREAMED)  # fmt: skip
    rng = random.Random(24)
    picked = sorted(rng.sample(range(big.size), 80))
    chosen = [pt for i, pt in enumerate(big.points()) if i in set(picked)]
    ran = list(run(big, points=chosen))
    assert len(ran) == 80 and sum(isinstance(r, SweepRow) for r in ran) >= 20
    for pt, got in zip(chosen, ran, strict=True):
        assert got == _compile_says(big, pt)


@pytest.mark.parametrize("estimate", ["roofline", "kernels"])
def test_whole_groups_drawn_from_a_large_grid_equal_compile(estimate) -> None:
    # the shared lowering's path (grid.py), not points alone: 6 groups drawn (seeded)
    # from a grid over 4 specs (dense, MoE, SSM, sliding window), 2 targets, every phase
    # and the layout axes tp, cp, dp, pp, microbatches, zero and recompute, each group
    # all the lengths of one spec, target, phase, batch and layout (32: enough to share
    # a lowering in every phase, sweeps.MIN_LENGTHS); every row against compile_report
    # of its point, every skip against its refusal
    import random

    from modelcost.analyses.sweeps import LAYOUT_AXES, _Point
    from modelcost.ir.graph import Parallel, Phase

    names = ("llama3-8b", "mixtral-8x7b", "mamba2-2.7b", "gemma2-9b")
    lengths = [256 * k for k in range(1, 33)]
    axes = {"tp": [1, 2], "cp": [1, 2], "dp": [1, 2], "pp": [1, 2], "microbatches": [1, 2],
            "zero": [0, 1], "recompute": ["none", "full"]}  # fmt: skip
    big = plan([str(MODELS / f"{n}.model") for n in names], ["h100", "mi300x"],
               ["prefill", "decode", "train"], batch=[2, 8], seq=lengths, context=lengths,
               layout=axes, estimate=estimate, limit=MAX_STREAMED)  # fmt: skip
    rng = random.Random(36)
    ran = rows = 0
    for _ in range(6):
        spec_i, hw_i = rng.randrange(len(names)), rng.randrange(2)
        phase = rng.choice(list(Phase))
        chosen = {k: rng.choice(v) for k, v in axes.items()}
        if phase is not Phase.train:  # what inference reads of the layout (for_phase)
            chosen |= {"zero": 0, "recompute": "none", "microbatches": 1}
        layout = tuple(chosen.get(k, getattr(Parallel(), k)) for k in LAYOUT_AXES)
        batch = rng.choice([2, 8])
        group = [_Point(spec_i, hw_i, phase, batch, None if phase is Phase.decode else n,
                        n if phase is Phase.decode else None, layout, (0, 0, 0))
                 for n in lengths]  # fmt: skip
        for pt, got in zip(group, run(big, points=group), strict=True):
            ran += 1
            assert got == _compile_says(big, pt), (names[spec_i], phase, chosen, pt.seq,
                                                    pt.context)  # fmt: skip
            rows += isinstance(got, SweepRow)
    assert ran == 6 * 32 and rows >= 64  # most groups run


def _compile_says(big, pt):
    """What compile says of point `pt` of plan `big`: its row (compile_report's, read by
    sweeps.row), or the Skip of its refusal (a layout Parallel refuses, ValueError, or
    a spec cannot run, SpecError), with what its phase reads of the sweep's options
    (validate.for_phase)."""
    from modelcost.analyses.sweeps import _skip, row
    from modelcost.ir.graph import Parallel, Workload
    from modelcost.lowering.validate import for_phase
    from modelcost.roofline.compile import compile_report

    spec, hw = big.specs[pt.spec], big.targets[pt.hw]
    try:
        w = for_phase(Workload(pt.phase, pt.batch, pt.seq, pt.context,
                               parallel=Parallel(**pt.layout_fields)))  # fmt: skip
        return row(compile_report(spec, hw, w, how=big.how.on(hw.name)))
    except (SpecError, ValueError) as err:
        return _skip(spec, hw, pt, err, big.swept)
