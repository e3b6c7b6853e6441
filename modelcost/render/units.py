"""Number formatting shared by the text renderers (SI prefixes: 1 GB = 1e9 B)."""

from __future__ import annotations

_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def si(value: float, unit: str = "", digits: int = 3) -> str:
    """`1.23 TFLOP`-style: three significant digits and an SI prefix."""
    for scale, prefix in _PREFIXES:
        if abs(value) >= scale:
            return f"{value / scale:.{digits}g} {prefix}{unit}".rstrip()
    return f"{value:.{digits}g} {unit}".rstrip()


def us(seconds: float) -> str:
    return f"{seconds * 1e6:,.2f}"


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.3f}"


def pct(fraction: float) -> str:
    return f"{fraction * 100:.1f}%"
