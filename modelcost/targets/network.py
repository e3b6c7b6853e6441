"""Collectives priced on the interconnect: the bound on one collective's time, and its links.

A collective of S bytes over n ranks (S is the gathered output of an all-gather, the
input of a reduce-scatter) takes at least, over the algorithms the hardware supports,

    bytes each rank moves over its link (per direction) / bandwidth per direction
    + steps × per-step latency

(`algorithms`: per byte of S, bytes and steps):

    all-reduce      two-shot (a direct reduce-scatter, then all-gather)  2(n−1)/n · S, 2 steps
                    one-shot (each rank reads the n−1 others' inputs)    (n−1) · S,   1 step
                    in-switch reduction (NVLink SHARP, `in_switch_reduction = "nvls"`):
                    each rank sends S and receives S once (its contributions to the
                    others' shards and its reduced shard; the others' reduced shards
                    and its own)                                          S,           2 steps
    all-gather, reduce-scatter, all-to-all
                    direct over a switch or full mesh                    (n−1)/n · S, 1 step
    p2p             one stage to the next                                S,           1 step

The ring NCCL/RCCL run by default (`ring`: all-reduce 2(n−1)/n · S in 2(n−1) steps,
the others (n−1)/n · S in n−1) moves the same bytes as the direct algorithm in more
steps, so it never sets the bound; it is the form nccl-tests' bus bandwidth is defined
on (busbw = algbw · 2(n−1)/n for all-reduce, · (n−1)/n for the others), and `ring_time`
prices it for the kernel-aware estimate (collectives_achieved.py), which is never below
this bound. In-switch reduction does not lower the bytes of an all-gather or a
reduce-scatter: it sends S one way and S/n the other instead of (n−1)/n · S both ways
(NVIDIA staff, github.com/NVIDIA/nccl/issues/1506), no less time.

Every shipped part's scale-up fabric is a full switch (NVSwitch) or a full mesh (xGMI),
where the direct algorithms run; on another topology a direct algorithm's bytes over a
rank's own links are still the least any route moves, so the figure stays a bound. The
per-step latency (`scaleup_latency`, 1 µs) is below every published call: the smallest
found is 3.7 µs for a whole all-reduce (docs/conventions.md).

Ranks are numbered tensor-parallel innermost; a group whose ranks are `stride` apart
has min(n, domain / stride) of them inside one scale-up domain. A group within one
domain runs at scale-up bandwidth; one with a single rank per domain at scale-out; a
group spanning both is hierarchical: inside the domain on S (an all-reduce
reduce-scatters before and all-gathers after, so one-shot does not apply there), across
domains on S/inner; the phases use different links and pipeline (as NCCL's tree and
NVLSTree do), so the bound is the slower phase's bytes plus every phase's latency.

A MoE token exchange (an all-to-all with a `Fanout`, perfmodel/collectives.py) moves
each row once to each rank holding one of its experts, and across scale-up domains once
to each domain holding one, forwarded inside it (DeepEP's normal kernels: one RDMA copy
a destination node, then NVLink to its ranks): with rows × d × bytes = R and P_n the
chance one of n slices of the experts holds a pick (`Fanout.hit`),

    across  (outer − 1) · P_outer · R over scale-out
    inside  ((n − 1) · P_n − (outer − 1) · P_outer) · R over scale-up (the rank copies
            that are not the one RDMA copy per domain)

at once, the slower of the two (`exchange`).
"""

from __future__ import annotations

from itertools import product
from typing import Literal

from modelcost.perfmodel import CollectiveOp, Fanout, bpe

from .hardware import Hardware

Link = Literal["scale-up", "scale-out", "scale-up+out"]
# (name, bytes each rank moves per direction per byte of S, steps)
Algorithm = tuple[str, float, int]


def ring(kind: str, n: int) -> tuple[float, int]:
    """(bytes sent per byte of S, steps) of a ring collective over n ranks."""
    if n <= 1:
        return 0.0, 0
    if kind == "p2p":  # a pipeline stage's send to the next: the whole tensor, one step
        return 1.0, 1
    if kind == "all_reduce":
        return 2 * (n - 1) / n, 2 * (n - 1)
    return (n - 1) / n, n - 1


def algorithms(kind: str, n: int, in_switch: bool, phased: bool = False) -> tuple[Algorithm, ...]:
    """The algorithms the bound takes the fastest of, for `kind` over n ranks.

    `in_switch`: the fabric reduces in the switch (NVLS). `phased`: the inside of a
    hierarchical all-reduce, which must leave each rank a shard (no one-shot).
    """
    if n <= 1:
        return (("none", 0.0, 0),)
    if kind == "p2p":
        return (("send", 1.0, 1),)
    share = (n - 1) / n
    if kind != "all_reduce":
        return (("direct", share, 1),)
    algs: list[Algorithm] = [("two-shot", 2 * share, 2)]
    if not phased:
        algs.append(("one-shot", float(n - 1), 1))
    if in_switch:
        algs.append(("in-switch", 1.0, 2))
    return tuple(algs)


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


def exchange(op: CollectiveOp, f: Fanout, hw: Hardware) -> float:
    """The least time of a MoE token exchange routed as `f` (`op.fanout`): each row
    once to each rank holding its experts, once to each other scale-up domain across."""
    rows = op.elements / f.top_k * bpe(op.dtype)  # R: every row once
    inner, outer = split(op, hw)
    ranks = (op.group - 1) * f.hit(op.group) * rows
    if outer == 1:
        return ranks / hw.scaleup_per_direction + hw.scaleup_latency
    if inner == 1:
        return ranks / hw.scaleout_bandwidth + hw.scaleout_latency
    domains = (outer - 1) * f.hit(outer) * rows
    across = domains / hw.scaleout_bandwidth + hw.scaleout_latency
    within = max(0.0, ranks - domains) / hw.scaleup_per_direction + hw.scaleup_latency
    return max(across, within)


def bound(op: CollectiveOp, hw: Hardware) -> tuple[float, str]:
    """(seconds, the algorithm that sets it): the least time `op` can take on `hw`."""
    if op.group <= 1:
        return 0.0, "none"
    if op.fanout is not None:
        return exchange(op, op.fanout, hw), "each row once a rank (a domain across)"
    S = op.elements * bpe(op.dtype)
    up, out = hw.scaleup_per_direction, hw.scaleout_bandwidth
    nvls = hw.in_switch_reduction == "nvls"
    inner, outer = split(op, hw)
    kind = op.collective
    if outer == 1 or inner == 1:
        bw, lat = (up, hw.scaleup_latency) if outer == 1 else (out, hw.scaleout_latency)
        # in-switch reduction is the scale-up switch's; scale-out is not modelled with it
        return min(
            (f * S / bw + steps * lat, name)
            for name, f, steps in algorithms(kind, op.group, nvls and outer == 1)
        )
    if kind == "all_to_all":  # its cross-domain share over scale-out, the rest over
        n = op.group  # scale-up, each directly and at once
        across = (n - inner) / n * S / out + hw.scaleout_latency
        within = (inner - 1) / n * S / up + hw.scaleup_latency
        return max(across, within), "direct"
    return min(
        (
            max(f_in * S / up, f_out * (S / inner) / out)
            + s_in * hw.scaleup_latency
            + s_out * hw.scaleout_latency,
            f"{a_in} inside, {a_out} across",
        )
        for (a_in, f_in, s_in), (a_out, f_out, s_out) in product(
            algorithms(kind, inner, nvls, phased=True), algorithms(kind, outer, False)
        )
    )


def collective_time(op: CollectiveOp, hw: Hardware) -> float:
    """Seconds one rank spends in `op` at least: the roofline's bound (`bound`)."""
    return bound(op, hw)[0]


def ring_time(op: CollectiveOp, hw: Hardware) -> float:
    """Seconds one rank spends in `op` as NCCL/RCCL's ring runs it at `hw`'s link
    bandwidths: the form bus bandwidth is defined on (collectives_achieved.py). A MoE
    token exchange runs as NCCL's all-to-all runs it: every (row, expert) copy."""
    op = op.per_copy() if op.fanout is not None else op
    S = op.elements * bpe(op.dtype)
    up, out = hw.scaleup_per_direction, hw.scaleout_bandwidth
    inner, outer = split(op, hw)
    if op.group <= 1:
        return 0.0
    if outer == 1 or inner == 1:
        bw, lat = (up, hw.scaleup_latency) if outer == 1 else (out, hw.scaleout_latency)
        factor, steps = ring(op.collective, op.group)
        return factor * S / bw + steps * lat
    if op.collective == "all_to_all":
        n = op.group
        across = (n - inner) / n * S / out + (outer - 1) * hw.scaleout_latency
        within = (inner - 1) / n * S / up + (inner - 1) * hw.scaleup_latency
        return max(across, within)  # both links at once
    # hierarchical: inside the domain on S, across domains on S / inner
    f_in, s_in = ring(op.collective, inner)
    f_out, s_out = ring(op.collective, outer)
    return (
        f_in * S / up
        + s_in * hw.scaleup_latency
        + f_out * (S / inner) / out
        + s_out * hw.scaleout_latency
    )
