"""A length carried through lowering as a variable: lower once, instantiate at each length.

A sweep's points of one layout and batch differ only in their length (a decode step's
context, a prefill's sequence). `length(x0)` is an integer worth `x0` that remembers how
it was computed from the length: arithmetic on it (+ - * // % /, with plain numbers or
other such values) gives another one, so every op record that lowering builds from it
holds a function of the length, and `instantiate` rebuilds the record at any other
length exactly as lowering would have (the same integer and float operations in the
same order).

That holds where every decision made on the length comes out as it did. Inside
`watching()`, a comparison or a truth test (`min(context, window)`, `if n:`) is kept as
a guard, a predicate on the length: the result holds at every length where all guards
do (`Watch.holds`), and other lengths need a lowering of their own. Any other use of
the value (`hash`, formatting, int() or float(), a method of int) lets it escape: no
guard says where the result holds (`Watch.escaped`). A value that C code reads without
asking (`0.5 ** x`, range(x), an index, `2.5 < x`) is not seen here; under `skewed`
such a read gets a number off by a million, so a caller that checks the result
against a real lowering at the same length sees it (grid.py does, and at the
shortest, middle and longest lengths).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from msgspec import Struct
from msgspec.structs import replace


def _decided() -> None:
    for w in _WATCHES:
        w.escaped += 1


class Watch:
    """What the length decided inside `watching()`: each comparison (or truth test) as a
    guard, a predicate true at every length where it comes out as it did; and how many
    other uses let its value escape (a hash, formatting: no guard holds)."""

    def __init__(self) -> None:
        self.guards: list[Callable[[int], bool]] = []
        self.escaped = 0

    @property
    def decisions(self) -> int:
        """How many times the length's value decided something: guards and escapes."""
        return len(self.guards) + self.escaped

    def holds(self, x: int) -> bool:
        """Whether every decision comes out at length `x` as it did."""
        return all(g(x) for g in self.guards)

    def holding(self, xs: Any) -> Any:
        """`holds` at each of the lengths `xs`, a numpy array of them (of Python ints,
        dtype object: each guard then computes as at one length): a boolean array."""
        held: Any = xs == xs  # True at each
        for g in self.guards:
            held &= g(xs)
        return held


_WATCHES: list[Watch] = []


@contextmanager
def watching() -> Iterator[Watch]:
    """Record the decisions the length makes inside the block."""
    w = Watch()
    _WATCHES.append(w)
    try:
        yield w
    finally:
        _WATCHES.pop()


def _compares(name: str, op: Callable[[Any, Any], bool]) -> Callable:
    """A comparison: decided on the numbers, and kept as a guard when watched."""

    def compare(self: Any, other: Any) -> Any:
        vo, fo = _lift(other)
        result = op(self._v, vo)
        if _WATCHES:
            fs = self._fn
            if fo is None:
                _guard(lambda x: op(fs(x), vo) == result)
            else:
                _guard(lambda x: op(fs(x), fo(x)) == result)
        return result

    compare.__name__ = name
    return compare


def _truth(self: Any) -> bool:
    result = bool(self._v)
    if _WATCHES:
        fs = self._fn
        _guard(lambda x: (fs(x) != 0) == result)  # bool(v), on a number or an array
    return result


def _guard(g: Callable[[int], bool]) -> None:
    for w in _WATCHES:  # every watch open around the decision
        w.guards.append(g)


Fn = Callable[[int], Any]


def _lift(v: Any) -> tuple[Any, Fn | None]:
    """A value's number and, for a symbolic one, its function of the length."""
    if isinstance(v, _Symbolic):
        return v._v, v._fn
    return v, None


def _combine(op: Callable[[Any, Any], Any], a: Any, b: Any) -> Any:
    """`op(a, b)` as a symbolic value when either side is one (NotImplemented for
    operands that are not numbers)."""
    if not isinstance(a, int | float) or not isinstance(b, int | float):
        return NotImplemented
    va, fa = _lift(a)
    vb, fb = _lift(b)
    value = op(va, vb)
    if fa is not None and fb is not None:
        fn: Fn = lambda x: op(fa(x), fb(x))  # noqa: E731
    elif fa is not None:
        fn = lambda x: op(fa(x), vb)  # noqa: E731
    else:
        assert fb is not None  # one side is symbolic: only such values call this
        fn = lambda x: op(va, fb(x))  # noqa: E731
    return _make(value, fn)


SKEW = 1_000_003  # what a symbolic value's own number is off by, where grid.py lowers
_SKEW = [0]  # added to the number C code sees, under `skewed` (grid.py lowers so)


def _make(value: Any, fn: Fn) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float):
        _decided()  # not a number (a comparison's bool): no function kept
        return value
    cls = SymInt if isinstance(value, int) else SymFloat
    out = cls(value + _SKEW[0])
    out._v, out._fn = value, fn
    return out


@contextmanager
def skewed(offset: int) -> Iterator[None]:
    """Inside the block, each symbolic value's own number (what C code reads without
    asking: `0.5 ** x`, `range(x)`, `2.5 < x`) is off by `offset`, while its arithmetic
    and its decisions use the true one: a read that nothing sees then gives a visibly
    wrong result at the very length the value stands for (grid.py lowers so, and checks
    that length against a real lowering)."""
    before = _SKEW[0]
    _SKEW[0] = offset
    try:
        yield
    finally:
        _SKEW[0] = before


def _binary(op: Callable[[Any, Any], Any]) -> tuple[Callable, Callable]:
    def forward(self: Any, other: Any) -> Any:
        return _combine(op, self, other)

    def reflected(self: Any, other: Any) -> Any:
        return _combine(op, other, self)

    return forward, reflected


def _decides(name: str, base: type) -> Callable:
    method = getattr(base, name)

    def decide(self: Any, *args: Any) -> Any:
        _decided()
        return method(self._v, *(a._v if isinstance(a, _Symbolic) else a for a in args))

    decide.__name__ = name
    return decide


class _Symbolic:
    """What SymInt and SymFloat share: the number `_v` and its function `_fn`."""

    _v: Any
    _fn: Fn

    __add__, __radd__ = _binary(operator.add)
    __sub__, __rsub__ = _binary(operator.sub)
    __mul__, __rmul__ = _binary(operator.mul)
    __floordiv__, __rfloordiv__ = _binary(operator.floordiv)
    __mod__, __rmod__ = _binary(operator.mod)
    __truediv__, __rtruediv__ = _binary(operator.truediv)

    def __neg__(self) -> Any:
        fn = self._fn
        return _make(-self._v, lambda x: -fn(x))

    def __pos__(self) -> Any:
        return self


_COMPARISONS = {"__lt__": operator.lt, "__le__": operator.le, "__gt__": operator.gt,
                "__ge__": operator.ge, "__eq__": operator.eq, "__ne__": operator.ne}  # fmt: skip
# every other use of the value decides something: counted, then answered as the number
_DECIDING = ("__hash__", "__index__", "__int__", "__float__", "__format__", "__str__",
             "__repr__", "__pow__", "__rpow__", "__abs__", "__round__", "__trunc__",
             "__floor__", "__ceil__", "__divmod__", "__rdivmod__", "__complex__",
             "as_integer_ratio", "conjugate", "hex", "is_integer")  # fmt: skip
_INT_ONLY = ("__and__", "__rand__", "__or__", "__ror__", "__xor__", "__rxor__",
             "__lshift__", "__rlshift__", "__rshift__", "__rrshift__", "__invert__",
             "bit_length", "bit_count", "to_bytes")  # fmt: skip


class SymInt(_Symbolic, int):
    """An integer that is a function of the length."""


class SymFloat(_Symbolic, float):
    """A float that is a function of the length."""


for _cls, _base, _names in ((SymInt, int, _DECIDING + _INT_ONLY), (SymFloat, float, _DECIDING)):
    for _name in _names:
        if hasattr(_base, _name):
            setattr(_cls, _name, _decides(_name, _base))
for _cls in (SymInt, SymFloat):
    for _name, _op in _COMPARISONS.items():
        setattr(_cls, _name, _compares(_name, _op))
    _cls.__bool__ = _truth  # type: ignore[method-assign]
    for _prop in ("real", "imag", "numerator", "denominator"):
        if hasattr(_cls, _prop):
            setattr(_cls, _prop, property(_decides("__pos__", int if _cls is SymInt else float)))


def length(x0: int) -> SymInt:
    """The length itself, worth `x0` where lowering looks."""
    out = SymInt(x0 + _SKEW[0])
    out._v, out._fn = x0, lambda x: x
    return out


Instantiate = Callable[[int], Any]


def instantiator(value: Any) -> Instantiate | None:
    """A function giving `value` rebuilt at a length (its symbolic numbers evaluated), or
    None when nothing in it depends on the length (it is the same at every length).
    Walks frozen records (msgspec Structs) and tuples."""
    if isinstance(value, _Symbolic):
        return value._fn
    if isinstance(value, tuple):
        parts = [instantiator(v) for v in value]
        if not any(parts):
            return None
        fixed = list(value)
        both = list(zip(fixed, parts, strict=True))
        return lambda x: tuple(p(x) if p is not None else v for v, p in both)
    if isinstance(value, Struct):
        fields = {}
        for name in value.__struct_fields__:
            p = instantiator(getattr(value, name))
            if p is not None:
                fields[name] = p
        if not fields:
            return None
        items = tuple(fields.items())
        return lambda x: replace(value, **{name: p(x) for name, p in items})
    return None
