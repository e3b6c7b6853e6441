"""How the command line reads a flag's value: a positive whole number, a duration with its
unit, a list or doubling range of counts, a choice, a phase list, stream lengths, a ZeRO
stage, an imbalance, a rate, a seed; each bad value an argparse error naming what was
expected.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from modelcost.base.settings import MAX_CURVE_POINTS, MAX_POINTS, MAX_REQUESTS, RATES, count
from modelcost.ir.graph import Phase


def positive(text: str) -> int:
    """A count: `8`, `2048`, `128_000`, `128K` (= 128,000), `128Ki` (= 131,072), `1M`:
    a `.model` file's suffixes (settings.count)."""
    try:
        return count(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


TIME_UNITS = {"us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0}


def seconds(text: str) -> float:
    """A duration: `50ms`, `0.5s`, `800us`."""
    body = text.strip()
    for unit in sorted(TIME_UNITS, key=len, reverse=True):
        if body.endswith(unit):
            try:
                value = float(body[: -len(unit)]) * TIME_UNITS[unit]
            except ValueError:
                break
            if value > 0 and value != float("inf"):
                return value
            if value <= 0:
                raise argparse.ArgumentTypeError(f"a duration must be positive, got {text!r}")
            break
    raise argparse.ArgumentTypeError(f"expected a duration such as 50ms or 0.5s, got {text!r}")


def counts(text: str) -> list[int]:
    """Values for a sweep: `1,8,64`, `1..256` (powers of two from 1), `1Ki..8Ki` (doubling),
    `128..1024+128` (an explicit step); each value a `positive` count."""
    out: dict[int, None] = {}  # each once, in the order given
    for part in (p.strip() for p in text.split(",")):
        lo, dots, rest = part.partition("..")
        if not dots:
            out[positive(part)] = None
        else:
            hi, plus, step = rest.partition("+")
            a, b = positive(lo), positive(hi)
            if b < a:
                raise argparse.ArgumentTypeError(f"range {part!r} runs backwards")
            by = positive(step) if plus else 0
            if plus and (b - a) // by >= MAX_POINTS:  # its length, before it is made
                raise argparse.ArgumentTypeError(_too_many_values(part))
            out.update(dict.fromkeys(range(a, b + 1, by) if plus else _doubling(a, b)))
        if len(out) > MAX_POINTS:
            raise argparse.ArgumentTypeError(_too_many_values(text))
    return list(out)


def _too_many_values(text: str) -> str:
    shown = text if len(text) <= 40 else f"{text[:30]}…"
    return f"{shown!r} has over {MAX_POINTS:,} values, the most a sweep takes"


def _doubling(a: int, b: int) -> list[int]:
    values = []
    while a <= b:
        values.append(a)
        a *= 2
    return values


def listing(parse: Callable[[str], object]) -> Callable[[str], list]:
    """Values for a sweep of any other option: `a,b,c`, each read by `parse`."""

    def parse_all(text: str) -> list:
        return list(dict.fromkeys(parse(t.strip()) for t in text.split(",")))

    return parse_all


def choices_of(allowed: tuple[str, ...]) -> Callable[[str], list[str]]:
    """Values for a sweep of a choice option: `none,full`."""

    def parse(text: str) -> list[str]:
        names = [t.strip() for t in text.split(",") if t.strip()]
        bad = [n for n in names if n not in allowed]
        if bad or not names:
            raise argparse.ArgumentTypeError(
                f"invalid choice {', '.join(map(repr, bad)) or repr(text)}; "
                f"choose from {', '.join(allowed)}"
            )
        return list(dict.fromkeys(names))

    return parse


def phases(text: str) -> list[Phase]:
    """`prefill`, `decode,prefill`: each once, in the order given."""
    names = [p.strip() for p in text.split(",") if p.strip()]
    bad = [p for p in names if p not in Phase.__members__]
    if bad or not names:
        raise argparse.ArgumentTypeError(
            f"unknown phase {', '.join(f'`{b}`' for b in bad) or repr(text)}; "
            f"choose from {', '.join(Phase)}"
        )
    return list(dict.fromkeys(Phase(p) for p in names))


def whole(text: str) -> int:
    """A count that may be 0: `0`, `512`, `2K`."""
    return 0 if text.strip() == "0" else positive(text)


def stream_lengths(text: str) -> tuple[tuple[str, int], ...]:
    """Other token streams' lengths: `encoder=512`, `encoder=512,image=577`."""
    out: dict[str, int] = {}
    for part in (p.strip() for p in text.split(",")):
        name, eq, value = part.partition("=")
        if not eq or not name.strip().isidentifier():
            raise argparse.ArgumentTypeError(f"expected NAME=LENGTH (encoder=1500), got {part!r}")
        out[name.strip()] = positive(value)
    return tuple(sorted(out.items()))


def zero_stage(text: str) -> int:
    """A ZeRO stage: 0, 1, 2 or 3."""
    if text not in ("0", "1", "2", "3"):
        raise argparse.ArgumentTypeError(f"expected 0, 1, 2 or 3, got {text!r}")
    return int(text)


def imbalance(text: str) -> float:
    """A routed load over the mean: a finite number at least 1 (`2.56`)."""
    try:
        value = float(text.strip())
    except ValueError:
        value = math.nan
    if not 1 <= value < math.inf:  # NaN too
        raise argparse.ArgumentTypeError(f"expected a load over the mean, at least 1, got {text!r}")
    return value


# ---- `serve --rate`: requests arriving over time (arrivals.py)


def rate(text: str) -> float:
    """An arrival rate in requests/s: `10`, `2.5`, from RATES[0] to RATES[1]."""
    try:
        value = float(text.strip())
    except ValueError:
        value = math.nan
    if not RATES[0] <= value <= RATES[1]:  # NaN too
        raise argparse.ArgumentTypeError(
            f"expected requests per second from {RATES[0]:g} to {RATES[1]:g}, got {text!r}"
        )
    return value


def requests(text: str) -> int:
    """A request count for one run: 1 to MAX_REQUESTS (K/M suffixes as `positive`)."""
    value = positive(text)
    if value > MAX_REQUESTS:
        raise argparse.ArgumentTypeError(f"at most {MAX_REQUESTS:,} requests a run, got {value:,}")
    return value


def seed(text: str) -> int:
    """A random seed: a whole number from 0 to 2**63 - 1."""
    try:
        value = int(text.strip().replace("_", ""))
    except ValueError:
        value = -1
    if not 0 <= value < 2**63:
        raise argparse.ArgumentTypeError(f"expected a whole number from 0, got {text!r}")
    return value


# ---- `serve --concurrency a,b,…`: curves under a benchmark client's load (curve.py)


def concurrencies(text: str) -> list[int]:
    """One concurrency (`64`) or a curve's (`1,8,64`, `1..512` doubling, `8..64+8`),
    at most MAX_CURVE_POINTS of them."""
    values = counts(text)
    if len(values) > MAX_CURVE_POINTS:
        raise argparse.ArgumentTypeError(f"at most {MAX_CURVE_POINTS} concurrencies a curve, "
                                         f"got {len(values):,}")  # fmt: skip
    return values


def length_ratio(text: str) -> float:
    """A benchmark client's range ratio: from 0 to 1 (`0.8`: lengths in [0.8 L, L])."""
    try:
        value = float(text.strip())
    except ValueError:
        value = math.nan
    if not 0 <= value <= 1:  # NaN too
        raise argparse.ArgumentTypeError(f"expected a ratio from 0 to 1, got {text!r}")
    return value
