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


# --- every parametrized case checks something --------------------------------------------
# A parametrized case that passes without one check is a case that cannot fail (a loop
# that never ran, asserts behind a `continue`). The checks counted: each assert that
# passes and each `pytest.raises` (which fails the case itself when nothing is raised).
#
# How a passing assert is counted: with `enable_assertion_pass_hook` (pyproject.toml)
# pytest's rewritten assert asks `_check_if_assertion_pass_impl()` whether anything
# wants to hear of it, and only on a yes builds the explanation (reprs of both sides,
# and pytest_assertrepr_compare's diff: with CI set in the environment a full pformat
# and ndiff, minutes for one zoo compile's equal reports). Our answer counts the assert
# and says no, so a passing assert costs one call. It is pytest's private name: when it
# is gone, pytest_configure stops the run rather than count nothing. Only the case's
# own call is counted (_RUNNING): an assert in a fixture's setup is not the case's check.
CHECKS: dict[str, int] = {}
_RUNNING: list[str] = []


def _count_passing_assert() -> bool:
    if _RUNNING:
        CHECKS[_RUNNING[-1]] = CHECKS.get(_RUNNING[-1], 0) + 1
    return False  # nobody listens: the passing assert builds no explanation


def _counted_raises(raises):
    def counted(*args, **kwargs):
        if _RUNNING:
            CHECKS[_RUNNING[-1]] = CHECKS.get(_RUNNING[-1], 0) + 1
        return raises(*args, **kwargs)

    return counted


def _code_names(code) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            names |= _code_names(const)
    return names


def _rewritten_without_the_hook(item) -> bool:
    """Whether the case's function was rewritten from a bytecode cache written before the
    assertion-pass hook was on (its asserts would count nothing): then it is not judged.
    Deleting tests/__pycache__ once brings such a cache up to date."""
    fn = getattr(item, "function", None)
    names = _code_names(fn.__code__) if fn is not None and hasattr(fn, "__code__") else set()
    return "_format_explanation" in names and "_call_assertion_pass" not in names


def pytest_configure():
    import pytest
    from _pytest.assertion import rewrite

    if not hasattr(rewrite, "_check_if_assertion_pass_impl"):
        raise pytest.UsageError(
            "tests/conftest.py counts passing asserts through pytest's "
            "_check_if_assertion_pass_impl, which this pytest has not: see the comment there"
        )
    rewrite._check_if_assertion_pass_impl = _count_passing_assert
    if not getattr(pytest.raises, "_counted", False):
        pytest.raises = _counted_raises(pytest.raises)
        pytest.raises._counted = True


def pytest_runtest_call(item):
    _RUNNING[:] = [item.nodeid]


def pytest_runtest_makereport(item, call):
    if call.when != "call":
        return None
    _RUNNING.clear()
    if (call.excinfo is None and hasattr(item, "callspec") and not CHECKS.get(item.nodeid)
            and not _rewritten_without_the_hook(item)):  # fmt: skip
        from _pytest.reports import TestReport

        report = TestReport.from_item_and_call(item, call)
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid}: this parametrized case passed without one "
            "check (no assert passed, no pytest.raises): it cannot fail"
        )
        return report
    return None
