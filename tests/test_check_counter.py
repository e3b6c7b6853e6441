"""The suite's own guard (tests/conftest.py): a parametrized case that checks nothing
fails, and a passing assert builds no explanation, even where CI is set."""

import os
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

CASES = '''
import pytest

REPRS = []


class Loud:
    """Equal to any Loud; notes each time something asks for its repr."""

    def __eq__(self, other):
        return isinstance(other, Loud)

    def __repr__(self):
        REPRS.append(1)
        return "Loud()"


@pytest.mark.parametrize("n", [0, 1])
def test_loop(n):
    for _ in range(n):  # n = 0: the loop never runs, nothing is checked
        assert n == 1


@pytest.mark.parametrize("n", [1])
def test_raises_counts(n):
    with pytest.raises(ZeroDivisionError):
        n / 0


@pytest.mark.parametrize("n", [1])
def test_equal_loud(n):
    assert Loud() == Loud()


def test_no_repr_was_asked():
    # building a passing assert's explanation asks for both sides' reprs (and, with CI
    # set, pformats and ndiffs them: minutes for two equal zoo reports)
    assert REPRS == []
'''


def test_a_case_that_checks_nothing_fails_and_the_others_pass(tmp_path: Path) -> None:
    (tmp_path / "test_cases.py").write_text(CASES)
    (tmp_path / "conftest.py").write_text(
        "from conftest_suite import pytest_configure, pytest_runtest_call, "
        "pytest_runtest_makereport  # noqa: F401\n"
    )
    (tmp_path / "conftest_suite.py").write_text((ROOT / "tests" / "conftest.py").read_text())
    (tmp_path / "slow-tests.txt").write_text("")
    env = {**os.environ, "CI": "true", "PYTHONDONTWRITEBYTECODE": "1"}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--rootdir",
         str(tmp_path), "-o", "enable_assertion_pass_hook=true", "-o", "addopts=",
         str(tmp_path / "test_cases.py")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    out = run.stdout
    assert run.returncode == 1, out
    # test_loop[0] is the one failure (it passed its body without a check); the other
    # four pass, test_no_repr_was_asked among them
    assert "1 failed, 4 passed" in out, out
    assert "test_loop[0]: this parametrized case passed without one check" in out, out
