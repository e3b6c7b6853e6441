"""A GEMM as a library runs it: its tiles in waves over the CUs, the tile a heuristic
picks, K split over idle CUs, a grouped GEMM's hottest expert, the backward as two
GEMMs; the time at the published per-tile rate, remembered for the layouts that share
it."""

from __future__ import annotations

import math

from modelcost.base.record import replace
from modelcost.perfmodel import GemmOp, GroupedGemmOp, OpRecord
from modelcost.targets.hardware import Hardware

from .kernel_rates import (
    LAUNCH_S,
    LibraryKernel,
    matrix_rate,
    moe_imbalance,
    plan,
    shaped,
    sustained_bandwidth,
    tiles_for,
)
from .kernels import serve

# in keys: four 64-key steps
ATTENTION_ROWS = 128  # query rows per attention block where no kernel says otherwise


def _rate(kind: str, op: OpRecord, hw: Hardware, pass_: str) -> tuple[float, tuple[int, int], str]:
    """(sustained FLOP/s, tile, where the rate comes from) for a matrix op."""
    r = matrix_rate(kind, op, hw, pass_)
    if kind == "attention":
        tile = r.kernel.tile if r.kernel is not None else (ATTENTION_ROWS, 64)
    else:
        tile = tiles_for(hw, r.kernel).tiles[0]
    return r.flops, tile, r.source


def _waves(tiles: int, units: int) -> tuple[int, str]:
    waves = -(-tiles // units)
    last = tiles - (waves - 1) * units
    which = "it" if waves == 1 else "the last"
    fill = "" if last == units else f"; {which} is {last / units:.0%} full"
    plural = "s" if waves > 1 else ""
    return waves, f"{tiles:,} tiles in {waves:,} wave{plural} on {units} CUs{fill}"


def tile_waves(M: int, N: int, tile: tuple[int, int], units: int, batch: int = 1):
    """(tiles, waves) of an M × N output cut into `tile`s over `units` CUs."""
    tiles = batch * -(-M // tile[0]) * -(-N // tile[1])
    return tiles, -(-tiles // units)


def _expert_rows(M: int, G: float, imbalance: float) -> tuple[int, ...]:
    """The rows each expert a grouped GEMM serves gets: the hottest `imbalance` × the
    mean (at most all of them), the rest shared as evenly as whole rows allow."""
    groups = max(1, math.ceil(G))
    mean = M / groups
    hot = M if groups == 1 or imbalance * mean >= M else math.ceil(imbalance * mean)
    rest, n = M - hot, min(groups - 1, M - hot)
    q, r = divmod(rest, n) if n else (0, 0)
    others = (q + 1,) * r + (q,) * (n - r)
    return (max(1, hot), *others)


def _gemm(
    op: GemmOp | GroupedGemmOp,
    flops: float,
    nbytes: float,
    hw: Hardware,
    pass_: str,
    imbalance: float | None = None,
):
    moe = ""
    if isinstance(op, GroupedGemmOp):  # each expert hit gets its share of the rows
        imbalance = moe_imbalance()[0] if imbalance is None else imbalance
        rows = _expert_rows(op.M, op.G, imbalance)
        N, K = op.N, op.K
        moe = (f"{len(rows)} experts, the hottest {rows[0]:,} rows ({imbalance:g}× the mean: "
               "routing imbalance), each padded to its tile; ")  # fmt: skip
    else:
        rows, N, K = (op.M,), op.N, op.K
    r = matrix_rate("gemm", op, hw, pass_, rows=max(rows))
    ts = tiles_for(hw, r.kernel)
    pub = r.kernel.shape if r.kernel is not None else None
    served = pub[0] if pub is not None and max(rows) <= pub[0] else 0
    batch = 1 if isinstance(op, GroupedGemmOp) else op.B  # alike members: one entry
    units = hw.compute_units
    p = plan(rows, N, K, r.flops, hw, ts, batch, bucket=served)
    time, floor = p.time_s, ""
    for lo, rate in _buckets_below(r.kernel, hw, op, pass_) if served else ():
        # more rows never run faster than a smaller bucket's configuration would
        capped = tuple(min(m, lo) for m in rows)
        t_lo = plan(capped, N, K, rate, hw, ts, batch, bucket=lo).time_s
        if t_lo > time:
            time, floor = t_lo, f"; no faster than the {lo:,}-token bucket below"
    work = 2 * batch * sum(rows) * N * K
    compute = time * (flops / work) if work else 0.0
    bw = sustained_bandwidth(hw)
    memory = nbytes / bw.bytes_s
    split = f", K split {p.splits} ways" if p.splits > 1 else ""
    linked = serve(op, hw.arch, units)  # the kernel the report's kernel column links
    named = f"{linked.title} (the kernel column), estimated as " if linked.id else ""
    shape = f"{named}{moe}{p.tm}×{p.tn} tiles{split}: {_waves(p.tiles, units)[1]}"
    if memory >= compute:
        return memory, f"memory-bound at {bw.said} ({shape})"
    return compute, f"{shape}; {r.source}{floor}"


_GEMMS: dict[tuple, tuple[Hardware, tuple[float, str]]] = {}


_GEMMS_HELD = 1 << 16  # entries kept before the memo starts afresh


def _gemm_pass(
    op: GemmOp | GroupedGemmOp,
    flops: float,
    nbytes: float,
    hw: Hardware,
    pass_: str,
    imbalance: float | None,
) -> tuple[float, str]:
    """`_gemm` (forward) or `_gemm_backward`, remembered: the layouts of a search or a
    sweep share most of their GEMMs, and planning their tiles is the estimate's main
    work. An entry holds the hardware it was planned on and serves that object only."""
    key = (op, flops, nbytes, pass_, imbalance, id(hw))
    found = _GEMMS.get(key)
    if found is not None and found[0] is hw:
        return found[1]
    if pass_ == "bwd":
        got = _gemm_backward(op, flops, nbytes, hw, imbalance)
    else:
        got = _gemm(op, flops, nbytes, hw, pass_, imbalance)
    if len(_GEMMS) >= _GEMMS_HELD:
        _GEMMS.clear()
    _GEMMS[key] = (hw, got)
    return got


def _gemm_backward(
    op: GemmOp | GroupedGemmOp,
    flops: float,
    nbytes: float,
    hw: Hardware,
    imbalance: float | None = None,
) -> tuple[float, str]:
    """A GEMM's backward as the libraries run it: two ordinary GEMMs, each at the
    forward's published rates and planned at its own shape (cuBLAS and hipBLASLt run
    dgrad and wgrad as plain GEMMs; no library publishes a backward figure). The input
    gradient dX = dY·Wᵀ has the forward's rows and the weights' N as its depth; the
    weight gradient dW = Xᵀ·dY has the weights' N × K as its output and the rows as its
    depth (a grouped GEMM's: each expert's weights, its mean rows deep: the experts'
    tiles share the waves, so the mean carries the work). The pass's FLOPs and bytes
    split evenly between the two (perfmodel: alike counts but the bias gradient's,
    which rides on the weight gradient); the second kernel pays its launch."""
    if isinstance(op, GroupedGemmOp):
        dgrad: GemmOp | GroupedGemmOp = replace(op, K=op.N, N=op.K)
        experts = max(1, math.ceil(op.G))
        wgrad: GemmOp | GroupedGemmOp = GemmOp(
            M=op.K, N=op.N, K=max(1, -(-op.M // experts)), B=experts, a=op.x, b=op.w, out=op.w
        )
        which = f"{experts} experts' dW, {wgrad.K:,} rows deep each"
    else:
        dgrad = replace(op, N=op.K, K=op.N, bias=False)
        wgrad = replace(op, M=op.N, N=op.K, K=op.M, bias=False)
        which = "dW"
    t_dx, why_dx = _gemm(dgrad, flops / 2, nbytes / 2, hw, "fwd", imbalance)
    t_dw, why_dw = _gemm(wgrad, flops / 2, nbytes / 2, hw, "fwd", imbalance)
    return t_dx + t_dw + LAUNCH_S, (
        f"dX {t_dx * 1e6:,.1f} µs ({why_dx}) and {which} {t_dw * 1e6:,.1f} µs ({why_dw}), "
        f"each a GEMM at the forward's published rates; +{LAUNCH_S * 1e6:g} µs for the "
        "second launch"
    )


def _buckets_below(
    k: LibraryKernel | None, hw: Hardware, op: OpRecord, pass_: str
) -> list[tuple[int, float]]:
    """(M, per-tile rate on `hw`) of every token count published below `k`'s, in the
    pool `k` was chosen from, where `k` is a figure published by token count."""
    if k is None or k.shape is None:
        return []
    key = (k, hw.name, hw.compute_units, op.precision, pass_)
    if key not in _BELOW:
        pool = shaped(k.kind, k.part, k.precision, k.pass_)
        lower = [x.shape[0] for x in pool if x.shape is not None and x.shape[0] < k.shape[0]]
        _BELOW[key] = [(m, matrix_rate("gemm", op, hw, pass_, rows=m).flops) for m in lower]
    return _BELOW[key]


_BELOW: dict[tuple[LibraryKernel, str, int, str, str], list[tuple[int, float]]] = {}
