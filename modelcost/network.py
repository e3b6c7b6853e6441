"""Collectives priced on the interconnect: the time one collective takes, and its links.

Ring algorithms as NCCL and RCCL run them, for a group of n ranks and a tensor of S
bytes (S is the gathered output of an all-gather, the input of a reduce-scatter):

    all-reduce      2(n−1)/n · S sent per rank, in 2(n−1) steps
    all-gather      (n−1)/n · S,                in n−1 steps
    reduce-scatter  (n−1)/n · S,                in n−1 steps
    all-to-all      (n−1)/n · S,                in n−1 steps
    p2p             S (one stage to the next),  in 1 step

time = bytes / bandwidth per direction + steps × latency. These are nccl-tests' "bus
bandwidth" factors: busbw = algbw · 2(n−1)/n for all-reduce, · (n−1)/n for the others.

Ranks are numbered tensor-parallel innermost; a group whose ranks are `stride` apart
has min(n, domain / stride) of them inside one scale-up domain. A group within one
domain runs at scale-up bandwidth; one with a single rank per domain at scale-out; a
group spanning both is hierarchical: reduce-scatter inside the domain, the cross-domain
collective on 1/inner of the data, then all-gather inside (all-to-all sends its
cross-domain share over scale-out while the rest moves over scale-up).
"""

from __future__ import annotations

from typing import Literal

from .hardware import Hardware
from .perfmodel import CollectiveOp, bpe

Link = Literal["scale-up", "scale-out", "scale-up+out"]


def _ring(kind: str, n: int) -> tuple[float, int]:
    """(bytes sent per byte of S, steps) of a ring collective over n ranks."""
    if n <= 1:
        return 0.0, 0
    if kind == "p2p":  # a pipeline stage's send to the next: the whole tensor, one step
        return 1.0, 1
    if kind == "all_reduce":
        return 2 * (n - 1) / n, 2 * (n - 1)
    return (n - 1) / n, n - 1


def split(op: CollectiveOp, hw: Hardware) -> tuple[int, int]:
    """(ranks of the group inside one scale-up domain, domains the group spans)."""
    inner = max(1, min(op.group, hw.scaleup_domain // max(1, op.stride)))
    while op.group % inner:  # a group that does not tile the domain: fewer per domain
        inner -= 1
    return inner, op.group // inner


def link(op: CollectiveOp, hw: Hardware) -> Link:
    inner, outer = split(op, hw)
    if outer == 1:
        return "scale-up"
    return "scale-out" if inner == 1 else "scale-up+out"


def collective_time(op: CollectiveOp, hw: Hardware) -> float:
    """Seconds one rank spends in `op` (bandwidth and latency terms)."""
    S = op.elements * bpe(op.dtype)
    up, out = hw.scaleup_bandwidth / 2, hw.scaleout_bandwidth
    inner, outer = split(op, hw)
    if op.group <= 1:
        return 0.0
    if outer == 1 or inner == 1:
        bw, lat = (up, hw.scaleup_latency) if outer == 1 else (out, hw.scaleout_latency)
        factor, steps = _ring(op.collective, op.group)
        return factor * S / bw + steps * lat
    if op.collective == "all_to_all":
        n = op.group
        across = (n - inner) / n * S / out + (outer - 1) * hw.scaleout_latency
        within = (inner - 1) / n * S / up + (inner - 1) * hw.scaleup_latency
        return max(across, within)  # both links at once
    # hierarchical: inside the domain on S, across domains on S / inner
    f_in, s_in = _ring(op.collective, inner)
    f_out, s_out = _ring(op.collective, outer)
    return (
        f_in * S / up
        + s_in * hw.scaleup_latency
        + f_out * (S / inner) / out
        + s_out * hw.scaleout_latency
    )
