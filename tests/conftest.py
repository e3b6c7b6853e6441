"""Shared paths for the test suite (nothing here depends on ../shared)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "specs" / "models"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
ZOO = sorted(MODELS.glob("*.model"))

GOLDEN = Path(__file__).resolve().parent / "golden"


def run_cli(*args: str, cwd: Path = ROOT, stdin: str | None = None) -> subprocess.CompletedProcess:
    """`modelcost ARGS` as a user runs it: a fresh interpreter, output captured; a run
    that hangs fails the test after a minute instead of hanging the suite."""
    return subprocess.run(
        [sys.executable, "-m", "modelcost", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        input=stdin,
        timeout=60,
    )


def pytest_addoption(parser):
    parser.addoption(
        "--update-goldens",
        action="store_true",
        help="rewrite tests/golden/* from the current output instead of comparing",
    )
