"""per_object: one computation per live object and arguments, forgotten with the object."""

import gc

from modelcost.base.memo import per_object


class Thing:
    """Unhashable, like a resolved spec."""

    __hash__ = None  # type: ignore[assignment]

    def __init__(self, n: int) -> None:
        self.n = n


def test_computed_once_per_object_and_arguments_then_forgotten() -> None:
    calls: list[tuple[int, int]] = []

    @per_object
    def scaled(thing: Thing, k: int) -> int:
        calls.append((thing.n, k))
        return thing.n * k

    a, b = Thing(2), Thing(3)
    assert [scaled(a, 5), scaled(a, 5), scaled(b, 5), scaled(a, 7)] == [10, 10, 15, 14]
    assert calls == [(2, 5), (3, 5), (2, 7)]
    del a
    gc.collect()
    c = Thing(4)  # may reuse a's id: it must not get a's results
    assert scaled(c, 5) == 20
    assert calls[-1] == (4, 5)
