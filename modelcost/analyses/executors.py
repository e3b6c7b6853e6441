"""Where a sweep's chunks of points are computed: in this process, in worker processes
on this machine, or as Ray tasks on a Ray cluster (`ray`, an optional extra: `pip
install 'modelcost[ray]'`). Each yields the chunks' results in the chunks' order, with
a bounded number of chunks in flight, so the caller streams them and memory stays flat.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Literal

from modelcost.base.errors import SpecError

Executor = Literal["local", "ray"]
EXECUTORS: tuple[Executor, ...] = ("local", "ray")
IN_FLIGHT = 2  # chunks in flight per worker (or per Ray CPU)


def in_order(
    fn: Callable[[Any, list], list],
    work: Any,
    chunks: Iterable[list],
    jobs: int = 1,
    executor: Executor = "local",
    address: str | None = None,
) -> Iterator[Any]:
    """`fn(work, chunk)`'s results for each chunk, in order: in this process (`local`,
    jobs 1), `jobs` worker processes (`local`), or Ray tasks (`ray`: the cluster at
    `address`, or a local one)."""
    if executor == "ray":
        yield from _on_ray(fn, work, chunks, address)
        return
    if jobs <= 1:
        for chunk in chunks:
            yield from fn(work, chunk)
        return
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(jobs) as pool:
        pending: deque = deque()
        for chunk in chunks:
            pending.append(pool.submit(fn, work, chunk))
            if len(pending) >= IN_FLIGHT * jobs:
                yield from pending.popleft().result()
        while pending:
            yield from pending.popleft().result()


def _ray():
    try:
        import ray  # type: ignore[import-untyped,import-not-found,unused-ignore]
    except ImportError:
        raise SpecError(
            "--executor ray needs Ray, which modelcost does not require",
            filename="modelcost",
            hint="pip install 'modelcost[ray]', or leave out --executor (--jobs N: "
            "worker processes on this machine)",
        ) from None
    return ray


def _on_ray(fn, work, chunks: Iterable[list], address: str | None) -> Iterator[Any]:
    """The chunks as Ray tasks: the work (specs, targets, costing) put in the object
    store once, IN_FLIGHT tasks per cluster CPU at a time, their results taken in
    order. Joins the cluster at `address` (`auto`, `ray://host:10001`), or starts a
    local one; leaves a cluster it joined running, and shuts one it started down."""
    ray = _ray()
    started = not ray.is_initialized()
    if started:
        try:
            ray.init(address=address, include_dashboard=False, log_to_driver=False,
                     configure_logging=False)  # fmt: skip
        except (ConnectionError, RuntimeError, ValueError) as err:
            raise SpecError(f"cannot reach the Ray cluster at {address!r}: {err}",
                            filename="--address",
                            hint="`ray status` on the cluster's head says its address; "
                            "leave --address out to start a local one") from None  # fmt: skip
    try:
        task = ray.remote(fn)
        shared = ray.put(work)
        window = IN_FLIGHT * max(1, int(ray.cluster_resources().get("CPU", 1)))
        pending: deque = deque()
        for chunk in chunks:
            pending.append(task.remote(shared, chunk))
            if len(pending) >= window:
                yield from ray.get(pending.popleft())
        while pending:
            yield from ray.get(pending.popleft())
    finally:
        if started:
            ray.shutdown()
