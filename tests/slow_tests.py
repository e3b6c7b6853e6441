"""Refresh tests/slow-tests.txt (the tests conftest.py marks `slow`) from a durations
report: `python -m pytest --durations=0 > durations.txt`, then
`python tests/slow_tests.py durations.txt`. A test is slow when its setup, call and
teardown together take over SLOW_S."""

import re
import sys
from pathlib import Path

LIST = Path(__file__).parent / "slow-tests.txt"
SLOW_S = 0.4  # over this, a test is slow: the rest run in under 2 minutes on 2 cores


def main(report: str) -> None:
    took: dict[str, float] = {}
    for m in re.finditer(r"^([\d.]+)s (?:call|setup|teardown) +(\S+)",
                         Path(report).read_text(), re.M):  # fmt: skip
        took[m.group(2)] = took.get(m.group(2), 0.0) + float(m.group(1))
    ids = sorted(nid for nid, s in took.items() if s >= SLOW_S)
    head = [line for line in LIST.read_text().splitlines() if line.startswith("#")]
    LIST.write_text("\n".join([*head, *ids]) + "\n")
    print(f"{len(ids)} slow tests written to {LIST}")


if __name__ == "__main__":
    main(sys.argv[1])
