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


SLOW = {line.strip() for line in (Path(__file__).parent / "slow-tests.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")}  # fmt: skip


def pytest_collection_modifyitems(items):
    """`slow`: the tests tests/slow-tests.txt lists (over 0.4 s each, measured); `browser`:
    tests/test_browser.py. `python -m pytest -m "not slow and not browser"` runs the rest."""
    import pytest

    for item in items:
        if item.nodeid.split()[0] in SLOW:  # a durations report cuts an id at a space
            item.add_marker(pytest.mark.slow)
        if item.nodeid.startswith("tests/test_browser.py"):
            item.add_marker(pytest.mark.browser)
