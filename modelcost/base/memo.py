"""Memoizing pure functions of a resolved spec (or another unhashable frozen object).

A resolved `Spec` never changes, but it holds dicts and so cannot be a dict key. What
lowering derives from its structure alone (the layer plan, the parameter counts, what a
pipeline stage holds) is the same for every batch and context, so a sweep computes it
once: `per_object` keys a function's results by the object's identity and the other
arguments, and drops them when the object is collected.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

R = TypeVar("R")


def per_object(fn: Callable[..., R]) -> Callable[..., R]:
    """`fn(obj, *args)` computed once per live `obj` and hashable `args`."""
    results: dict[int, dict[tuple, R]] = {}

    @functools.wraps(fn)
    def memoized(obj: Any, *args: Any) -> R:
        key = id(obj)
        mine = results.get(key)
        if mine is None:
            mine = results[key] = {}
            weakref.finalize(obj, results.pop, key, None)
        try:
            return mine[args]
        except KeyError:
            value = mine[args] = fn(obj, *args)
            return value

    memoized.cache_clear = results.clear  # type: ignore[attr-defined]
    return memoized
