"""A progress line on standard error for long work: points done of the total, the rate
and the time left, redrawn in place at most every REDRAW seconds; only where standard
error is a terminal (never into a pipe or a log), and never with --quiet."""

from __future__ import annotations

import sys
import time
from typing import TextIO

REDRAW = 0.2  # seconds between redraws


def _clock(seconds: float) -> str:
    """`1:02:03`, `2:03` or `0:03`."""
    s = int(seconds + 0.5)
    h, m = divmod(s // 60, 60)
    return f"{h}:{m:02}:{s % 60:02}" if h else f"{m}:{s % 60:02}"


class Progress:
    """`update(done)` as work advances; `close()` clears the line."""

    def __init__(self, total: int, what: str = "points", stream: TextIO | None = None,
                 enabled: bool | None = None, clock=time.monotonic) -> None:  # fmt: skip
        self.total, self.what = total, what
        self.stream = sys.stderr if stream is None else stream
        self.enabled = (self.stream is not None and self.stream.isatty()) if enabled is None \
            else enabled  # fmt: skip
        self.clock = clock
        self.start = self.last = clock()
        self.width = 0

    def line(self, done: int, now: float) -> str:
        """`12,345 / 225,280 points  8,123/s  0:26 left`."""
        elapsed = now - self.start
        rate = done / elapsed if elapsed > 0 else 0.0
        left = (self.total - done) / rate if rate > 0 else None
        parts = [f"{done:,} / {self.total:,} {self.what}"]
        if rate:
            parts.append(f"{rate:,.0f}/s")
        if left is not None:
            parts.append(f"{_clock(left)} left")
        return "  ".join(parts)

    def update(self, done: int) -> None:
        if not self.enabled:
            return
        now = self.clock()
        if now - self.last < REDRAW and done < self.total:
            return
        self.last = now
        text = self.line(done, now)
        self.stream.write("\r" + text.ljust(self.width))
        self.stream.flush()
        self.width = len(text)

    def close(self) -> None:
        if self.enabled and self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
