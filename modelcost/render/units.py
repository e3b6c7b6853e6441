"""Number formatting shared by every renderer (SI prefixes: 1 GB = 1e9 B, for bytes moved;
memory held in binary ones, `held`: 1 GiB = 2**30 B).

Negative numbers use ASCII `-` everywhere (text, Markdown, JSON, CSV are read by
programs); counts of things (parameters) use K/M/B/T; durations pick s, ms or µs.
"""

from __future__ import annotations

from modelcost.base.settings import GIB, held

__all__ = ["GIB", "held"]

_PREFIXES = ((1e30, "Q"), (1e27, "R"), (1e24, "Y"), (1e21, "Z"), (1e18, "E"), (1e15, "P"),
             (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))  # fmt: skip
# A float holds 15 significant decimal digits for certain: a figure with more integer
# digits than this (a count past 10**15) is written with fewer, in e-notation
EXACT_DIGITS = 15
_COUNTS = ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K"))


def si(value: float, unit: str = "", digits: int = 3, sep: str = " ") -> str:
    """`1.23 TFLOP`-style: three significant digits and an SI prefix (`10P` with
    sep="" for chart ticks)."""
    for scale, prefix in _PREFIXES:
        if abs(value) >= scale:
            return f"{value / scale:.{digits}g}{sep}{prefix}{unit}".rstrip()
    return f"{value:.{digits}g}{sep}{unit}".rstrip()


def fixed(value: float, places: int = 2) -> str:
    """`1,234.57`: thousands separated, a fixed number of decimals; a value whose
    digits would pass what a float holds (EXACT_DIGITS) with four significant digits
    instead (`1.121e+18`)."""
    if abs(value) >= 10 ** (EXACT_DIGITS - places):
        return f"{value:.4g}"
    return f"{value:,.{places}f}"


def count(n: float) -> str:
    """Parameters and other counts of things: `8.03 B`, `124 M`, `1.5 K`, `12`."""
    for scale, suffix in _COUNTS:
        if abs(n) >= scale:
            return f"{n / scale:.3g} {suffix}"
    return f"{n:,.0f}"


def duration(seconds: float) -> str:
    """A time with its unit: `1.234 s`, `26.359 ms`, `840.12 µs`, `0.84 µs`."""
    a = abs(seconds)
    if a >= 10 ** (EXACT_DIGITS - 3):  # past a float's digits: four significant ones
        return f"{seconds:.4g} s"
    if a >= 1:
        return f"{seconds:,.3f} s"
    if a >= 1e-3:
        return f"{seconds * 1e3:,.3f} ms"
    return f"{seconds * 1e6:,.2f} µs"


def ms(seconds: float) -> str:
    """Milliseconds, three decimals (`fixed`'s rules past a float's digits)."""
    return fixed(seconds * 1e3, 3)


def plural(n: int, noun: str) -> str:
    """`1 op`, `2 ops`: a count of things with its noun."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def pct(fraction: float) -> str:
    return f"{fraction * 100:.1f}%"


def signed(text: str, negative: bool) -> str:
    """`+1.2 G` / `-1.2 G`: an explicit sign, ASCII."""
    return ("-" if negative else "+") + text
