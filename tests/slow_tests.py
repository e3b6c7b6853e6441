"""Refresh tests/slow-tests.txt (the tests conftest.py marks `slow`) from a durations
report: `python -m pytest --durations=0 --durations-min=0.8 > durations.txt`, then
`python tests/slow_tests.py durations.txt`."""

import re
import sys
from pathlib import Path

LIST = Path(__file__).parent / "slow-tests.txt"
SLOW_S = 0.8  # over this, a test is slow


def main(report: str) -> None:
    ids = sorted({m.group(2) for m in re.finditer(r"^([\d.]+)s (?:call|setup|teardown) +(\S+)",
                  Path(report).read_text(), re.M) if float(m.group(1)) >= SLOW_S})  # fmt: skip
    head = [line for line in LIST.read_text().splitlines() if line.startswith("#")]
    LIST.write_text("\n".join([*head, *ids]) + "\n")
    print(f"{len(ids)} slow tests written to {LIST}")


if __name__ == "__main__":
    main(sys.argv[1])
