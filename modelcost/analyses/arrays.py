"""A sweep's figures as arrays over its points: Scalars' operations on numpy arrays
(each element computed as roofline.Scalars computes one number), a figure's values at
each point as an array and back, and which points a shared computation is checked at.
numpy is imported where an array is made, so importing this module costs nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from modelcost.roofline.estimated import NodeEstimate
from modelcost.roofline.step import Column, Scalars, column
from modelcost.roofline.timing import NodeTime


class Arrays(Scalars):
    """Scalars' operations on numpy arrays of a sweep's points, each element computed
    as Scalars computes one number (roofline.step_figures)."""

    @staticmethod
    def above_zero(x: Any) -> Any:
        """max(0.0, x) at each point: x where x > 0.0, else 0.0."""
        import numpy as np

        return np.where(x > 0.0, x, 0.0)

    @staticmethod
    def smaller(a: Any, b: Any) -> Any:
        """min(a, b) at each point: b where b < a, else a."""
        import numpy as np

        return np.where(b < a, b, a)

    @staticmethod
    def ratio(a: Any, b: Any) -> Any:
        """a / b at each point, 0.0 where b is 0: both made floats first, so a zero
        divisor gives a discarded inf, never Python's ZeroDivisionError (an array of
        Python numbers divides as Python does)."""
        import numpy as np

        a, b = Arrays.real(a), Arrays.real(b)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return np.where(b != 0, np.true_divide(a, b), 0.0)

    @staticmethod
    def pick(test: Any, a: Any, b: Any) -> Any:
        """a where `test` holds, else b, at each point."""
        import numpy as np

        return np.where(test, a, b)

    @staticmethod
    def real(x: Any) -> Any:  # type: ignore[override]
        """Floats: each element as float() converts it (a Python int, exactly)."""
        import numpy as np

        return np.asarray(x, dtype=np.float64) if isinstance(x, np.ndarray | list) else float(x)


ARRAYS = Arrays()


def lane(values: Iterable) -> Any:
    """An array of a figure at each point: floats as float64 (the same numbers), any
    other (a Python int) as itself (dtype object), so each sum is Python's."""
    import numpy as np

    items = list(values)
    kind = np.float64 if all(type(v) is float for v in items) else object
    return np.array(items, dtype=kind)


def each_point(value: Any, n: int) -> list:
    """A figure's value at each of `n` points, as Python numbers (an array's elements;
    a value the same at every point, repeated)."""
    import numpy as np

    if isinstance(value, np.ndarray) and value.ndim == 1:
        return value.tolist()
    if isinstance(value, np.ndarray | np.generic):
        value = value.item()
    return [value] * n


def lanes_column(times: list[NodeTime], found: list[NodeEstimate] | None = None) -> Column:
    """A changing node's column: its figures at each length, as arrays (its estimate
    `found` at each, default the roofline's time)."""
    cols = [column(t) if found is None else column(t, found[i].total_s, found[i].held_s)
            for i, t in enumerate(times)]  # fmt: skip
    first = cols[0]
    return Column(
        lane(c.seconds for c in cols),
        lane(c.flops for c in cols),
        lane(c.bytes for c in cols),
        lane(c.compute_bound_s for c in cols),
        lane(c.recomputed_flops for c in cols) if first.recomputed_flops is not None else None,
        first.step,
        first.network,
        first.beside,
        lane(c.held for c in cols),
    )


def spread(points: Sequence[int], length: Callable[[int], int]) -> list[int]:
    """Where a computation shared by `points` is checked against each one's own: the
    first (where it was made), then the longest, middle and shortest by `length`; a
    read of the length it cannot see that rises or falls with it shows at one of them."""
    by_length = sorted(points, key=length)
    middle = by_length[len(by_length) // 2]
    return list(dict.fromkeys((points[0], by_length[-1], middle, by_length[0])))


def same_numbers(a: Sequence, b: Sequence) -> bool:
    """Whether two rows of figures hold the very same numbers: their reprs (so 0.0 and
    −0.0, or 1 and 1.0, differ; NaN equals NaN)."""
    return list(map(repr, a)) == list(map(repr, b))
