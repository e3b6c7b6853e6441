"""Collectives as NCCL/RCCL and the serving engines achieve them: the kernel-aware
estimate of a CollectiveOp (`--estimate kernels`). network.py's bound (the fastest
algorithm the hardware supports, at link peak) is the roofline's; the estimate is never
below it (estimate.py takes the larger), and every published figure in
specs/kernels/collectives.json is at or above it (tests/test_network_bound.py).

The figures are published measurements (specs/kernels/collectives.json), by part family
(NVLink 4: H100/H200; NVLink 5: B200/GB200; xGMI: MI300X/MI325X; MI350X/MI355X):

- An all-reduce inside one scale-up domain that the engine's custom all-reduce takes
  (its group sizes, below its buffer size) runs one-shot below the engine's switch
  size, else two-shot, at the engine's published latency for that message size,
  interpolated linearly in log(size) between published sizes; below the smallest it
  takes the smallest's time, above the largest it is left to NCCL (no extrapolation).
- Otherwise NCCL/RCCL: the ring's formula (network.ring_time, its steps × per-step
  latency) with each link's bandwidth replaced by the achieved bus bandwidth
  for that collective. nccl-tests defines busbw = algbw · 2(n−1)/n for all-reduce and
  · (n−1)/n for all-gather, reduce-scatter and all-to-all (doc/PERFORMANCE.md): the
  ring's bytes-per-rank factors, so time = S · factor / busbw. All-reduce inside
  an 8-rank NVSwitch domain runs NVLink SHARP (NVLS) at its own busbw; a 400 Gb/s NIC
  at its achieved 48 GB/s. Where a family publishes an all-reduce's measured times by
  message size over its whole domain (nccl-tests on 8 H100, rccl-tests on 8 MI300X),
  those times are used from the smallest published size up, interpolated as the custom
  all-reduce's are, and past the largest size at its busbw.

A part without its own figure uses its family's (said so); a family without one, the
ring at link peak (said so: "the link model"). Which engine's all-reduce applies is a
plain argument, default vLLM (DEFAULT_ENGINE).
"""

from __future__ import annotations

import math
from itertools import pairwise
from typing import Any

from modelcost.base.errors import SpecError, did_you_mean
from modelcost.base.resources import kernel_table
from modelcost.perfmodel import CollectiveOp, bpe
from modelcost.targets.hardware import Hardware
from modelcost.targets.network import ring_time, split

from .engines import DEFAULT_ENGINE, ENGINES

# the engines (and the default, whose custom all-reduce applies unless told otherwise):
# one list, specs/kernels/engines.json's
NIC_BITS = 1e9 / 8  # bytes/s per Gb/s


def _data() -> dict[str, Any]:
    return kernel_table("collectives")


def family(part: str) -> tuple[str, dict[str, Any]] | None:
    """(family name, its figures) of a shipped part, or None."""
    for name, fam in _data()["families"].items():
        if part in fam["parts"]:
            return name, fam
    return None


def _interpolate(points: list[list[float]], size: float) -> tuple[float, str]:
    """Microseconds at `size` bytes from published (bytes, µs) points, linear in
    log(size) between two of them; below the first, the first's time."""
    s0, t0 = points[0]
    if size < s0:
        return t0, f"{t0:g} µs, as published at {_b(s0)}, the smallest size published"
    if size == s0:
        return t0, f"{t0:g} µs published at {_b(s0)}"
    for (s0, t0), (s1, t1) in pairwise(points):
        if size <= s1:
            if size == s1:
                return t1, f"{t1:g} µs published at {_b(s1)}"
            w = math.log(size / s0) / math.log(s1 / s0)
            t = t0 + w * (t1 - t0)
            return t, f"{t:.1f} µs between {t0:g} µs at {_b(s0)} and {t1:g} µs at {_b(s1)}"
    raise ValueError("beyond the published sizes")  # callers check the range


def _b(n: float) -> str:
    for unit, scale in (("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n:g} B"


def _custom(
    op: CollectiveOp, hw: Hardware, fam: dict[str, Any], engine: str
) -> tuple[float, str] | None:
    """The engine's custom all-reduce, where it takes this op and a figure exists."""
    if op.collective != "all_reduce" or split(op, hw)[1] != 1:
        return None
    table = fam["custom_all_reduce"].get(engine)
    if table is not None and "uses" in table:  # an engine that runs another's kernel
        table = fam["custom_all_reduce"].get(table["uses"])
    if table is None:
        return None
    points = table["latency_us"].get(str(op.group))
    size = op.elements * bpe(op.dtype)
    if points is None or size >= table["max_bytes"] or size > points[-1][0]:
        return None
    one_max = table["one_shot_max_bytes"].get(str(op.group))
    shot = "one-shot" if one_max is None or size <= one_max else "two-shot"
    us, how = _interpolate(points, size)
    where = _whose(hw, fam)
    return us * 1e-6, f"{table['kernel']}, {shot} at {_b(size)} × {op.group}: {how}{where}"


def _whose(hw: Hardware, fam: dict[str, Any]) -> str:
    """Whose figure a part takes: nothing to say on the part the family's figures were
    measured on, else the part they come from."""
    return "" if hw.name == fam["measured_on"] else f", {fam['measured_on']}'s figure"


def _table(op: CollectiveOp, hw: Hardware, fam: dict[str, Any]) -> dict[str, Any] | None:
    """The family's measured all-reduce table, if it covers `op` (an all-reduce over
    exactly its group, inside one scale-up domain)."""
    table = fam.get("all_reduce_measured")
    inner, outer = split(op, hw)
    if table is None or op.collective != "all_reduce" or outer != 1 or inner != table["ranks"]:
        return None
    return table


def _measured(op: CollectiveOp, hw: Hardware, fam: dict[str, Any]) -> tuple[float, str] | None:
    """An all-reduce over the family's measured group (nccl-/rccl-tests times by message
    size, `all_reduce_measured`): interpolated in log(size) between published sizes,
    above the largest at the largest's busbw; below the smallest, not this table's
    (`achieved` then keeps the other model's time, at most the smallest's)."""
    table = _table(op, hw, fam)
    if table is None:
        return None
    points = table["latency_us"]
    size = op.elements * bpe(op.dtype)
    if size < points[0][0]:
        return None
    where = _whose(hw, fam)
    top, top_us = points[-1]
    if size > top:  # the largest published size is at its peak busbw: time grows with bytes
        us = top_us * size / top
        how = f"{us:.1f} µs at {_b(top)}'s busbw ({top_us:g} µs published there)"
    else:
        us, how = _interpolate(points, size)
    return us * 1e-6, f"NCCL/RCCL all-reduce at {_b(size)} × {op.group} as measured: {how}{where}"


def _nvls(op: CollectiveOp, inner: int, outer: int, fam: dict[str, Any]) -> bool:
    """Whether NCCL runs `op` as NVLink SHARP's all-reduce: over the family's NVLS group,
    inside one scale-up domain (its default for all-reduce where the switch has it)."""
    nvls = fam["busbw"].get("all_reduce_nvls")
    return op.collective == "all_reduce" and outer == 1 and bool(nvls) and inner == nvls["ranks"]


def _busbw(op: CollectiveOp, inner: int, outer: int, fam: dict[str, Any]) -> tuple[float, str]:
    """(achieved busbw inside the scale-up domain, what it is), or (0, why none)."""
    figures = fam["busbw"]
    if _nvls(op, inner, outer, fam):
        nvls = figures["all_reduce_nvls"]
        return nvls["gbps"] * 1e9, f"NVLS all-reduce at {nvls['gbps']} GB/s busbw"
    ring = figures.get("ring")
    if ring and op.collective in ring["kinds"]:
        return ring["gbps"] * 1e9, f"ring at {ring['gbps']} GB/s busbw"
    per_link = figures.get("ring_per_peer_link")
    if per_link and op.collective in per_link["kinds"] and inner > 1:
        bw = (inner - 1) * per_link["gbps"]
        return bw * 1e9, f"ring at {bw:g} GB/s busbw ({inner - 1} links × {per_link['gbps']})"
    return 0.0, ""


def achieved(
    op: CollectiveOp, hw: Hardware, engine: str | None = DEFAULT_ENGINE
) -> tuple[float, str]:
    """(seconds, why) of one collective as the engine and NCCL/RCCL run it on `hw`
    (`engine` None: NCCL/RCCL alone, as a training step runs it)."""
    if engine is not None and engine not in ENGINES:
        hint = did_you_mean(engine, list(ENGINES)) or f"known: {', '.join(ENGINES)}"
        raise SpecError(f"unknown engine `{engine}`", filename="--engine", hint=hint)
    if op.group <= 1:
        return 0.0, "a group of one: nothing to send"
    found = family(hw.name)
    if found is not None and engine is not None:
        custom = _custom(op, hw, found[1], engine)
        if custom is not None:
            return custom
    if found is not None:
        measured = _measured(op, hw, found[1])
        if measured is not None:
            return measured
    t, why = _modelled(op, hw, found)
    floor = _smallest_measured(op, hw, found[1]) if found is not None else None
    if floor is not None and floor[0] < t:  # a smaller message never takes longer
        return floor
    return t, why


def ctas(op: CollectiveOp, hw: Hardware) -> tuple[int, str] | None:
    """(SMs NCCL holds while `op` runs, what the figure is) on `hw`: one CTA a channel,
    each on an SM of its own, as many channels as the algorithm its time is priced on
    runs (the ring's inside one scale-up domain, NVLink SHARP's for an all-reduce it
    takes, the ring's across domains); None where the part's family publishes no
    channel count (specs/kernels/collectives.json `ctas`) or nothing is sent."""
    found = family(hw.name)
    if found is None or "ctas" not in found[1] or op.group <= 1:
        return None
    fam = found[1]
    figures = fam["ctas"]
    inner, outer = split(op, hw)
    if outer > 1:
        n, what = figures["scale_out"], "the ring's channels across scale-up domains"
    elif _nvls(op, inner, outer, fam):
        n, what = figures["nvls"], "NVLink SHARP's channels"
    else:
        n, what = figures["scale_up"], "the ring's channels in one scale-up domain"
    where = _whose(hw, fam)
    return n, f"NCCL holds {n} of the {hw.compute_units} SMs while it runs ({what}{where})"


def _smallest_measured(
    op: CollectiveOp, hw: Hardware, fam: dict[str, Any]
) -> tuple[float, str] | None:
    """The measured table's smallest size, as (its time, why), when it covers `op`'s
    group and collective (the cap on a smaller message's time)."""
    table = _table(op, hw, fam)
    if table is None:
        return None
    size, us = table["latency_us"][0]
    where = _whose(hw, fam)
    return us * 1e-6, (
        f"NCCL/RCCL all-reduce at {_b(op.elements * bpe(op.dtype))} × {op.group}: at most "
        f"the {us:g} µs measured at {_b(size)}, the smallest size published{where}"
    )


def _modelled(
    op: CollectiveOp, hw: Hardware, found: tuple[str, dict[str, Any]] | None
) -> tuple[float, str]:
    """NCCL/RCCL by the ring's formula at the family's achieved busbw (or the link
    model where none is published)."""
    inner, outer = split(op, hw)
    up, up_why = _busbw(op, inner, outer, found[1]) if found and inner > 1 else (0.0, "")
    out_fig = _data()["scale_out"]
    nic = outer > 1 and math.isclose(hw.scaleout_bandwidth, out_fig["nic_gbps"] * NIC_BITS)
    if not up and not nic:
        return ring_time(op, hw), f"no published {op.collective} figure: the link model"
    update: dict[str, float] = {}
    said = []
    if up:
        update["scaleup_bandwidth"] = 2 * up  # the link model takes half per direction
        where = "" if found is None else _whose(hw, found[1])
        said.append(f"NCCL/RCCL {up_why}{where}")
    elif inner > 1:
        said.append("no published scale-up figure: its link model")
    if nic:
        update["scaleout_bandwidth"] = out_fig["achieved_gbps"] * 1e9
        said.append(f"a {out_fig['nic_gbps']} Gb/s NIC at {out_fig['achieved_gbps']} GB/s")
    t = ring_time(op, hw.model_copy(update=update))
    return t, "; ".join(said) + "; the link model's per-step latency"
