"""Attention and memory traffic as the kernels run them: decode attention's split-KV grid
at the decode kernel's published bandwidth, the part's sustained bandwidth, prefill's
flash blocks at published rates by length and mask, and PyTorch's math attention as
separate kernels."""

from __future__ import annotations

import itertools
import math
from functools import cache, lru_cache
from itertools import pairwise

from modelcost.base.frozen import Frozen
from modelcost.base.record import Record, replace
from modelcost.base.resources import kernel_table
from modelcost.perfmodel import SdpaOp
from modelcost.perfmodel.attention import keys_read, math_kernels
from modelcost.targets.hardware import Hardware

from .gemm_plan import _rate, _waves
from .kernel_rates import (
    LAUNCH_S,
    LibraryKernel,
    _tbs,
    _tflops,
    kernels_of,
    library,
    matrix_rate,
    plan,
    sustained_bandwidth,
    tiles_for,
)

KEY_FILL = 256  # an attention block's prologue (Q load) and epilogue (rescale, O write),


# Decode attention, after FlashAttention-2's split-KV kernel (csrc/flash_attn/flash_api.cpp,
# set_params_splitkv and num_splits_heuristic; Flash-Decoding):
DECODE_ROWS = 64  # query rows a split-KV block holds ("we don't expect seqlen_q to be


# larger than 64 for inference"); at or below it an attention runs as a decode kernel
MAX_SPLITS = 128  # the most splits the heuristic tries


CTAS_PER_CU = 2  # the heuristic's slots: 2 blocks per SM (128-thread blocks)


class DecodeKernel(Frozen):
    """A decode-attention kernel's published bandwidth on a part (specs/kernels/attention.json)."""

    id: str
    part: str
    heads: str  # gqa | mla
    library: str
    fraction: float | None  # of the datasheet bandwidth; None: "close to 100%"
    measured: str
    source: str
    fixed_us: float | None = None  # a call's time beyond its bytes (None: not published)
    fixed_source: str | None = None
    # published times by context (seconds) at one shape: batch, query heads, QK and V
    # head dims (one latent KV head for mla); None: no times published
    shape: tuple[int, int, int, int] | None = None
    times: tuple[tuple[int, float], ...] | None = None


def decode_rate(k: DecodeKernel, context: int) -> tuple[float, str]:
    """(FLOP/s, what it is) a decode kernel with published `times` sustains at `context`
    keys: the FLOPs its source's shape does (2 · batch · heads · context · (QK + V head
    dims), as SdpaOp counts a decode) over the published time, interpolated in
    log(context) between the published contexts; the nearest published rate outside
    them."""
    assert k.shape is not None and k.times
    B, H, d_qk, d_v = k.shape

    def rate(ctx: int, seconds: float) -> float:
        return 2 * B * H * ctx * (d_qk + d_v) / seconds

    points = sorted(k.times)
    at = f"{k.library} sustains {{}} at context {context:,} (published at batch {B}, {H} heads)"
    if context <= points[0][0]:
        r = rate(*points[0])
    elif context >= points[-1][0]:
        r = rate(*points[-1])
    else:
        (c0, s0), (c1, s1) = next(
            (a, b) for a, b in itertools.pairwise(points) if a[0] <= context <= b[0]
        )
        w = math.log(context / c0) / math.log(c1 / c0)
        r = math.exp((1 - w) * math.log(rate(c0, s0)) + w * math.log(rate(c1, s1)))
    return r, at.format(_tflops(r))


class EnginePrefill(Frozen):
    """The flash-attention kernels (library.json ids) that the engines run on a part."""

    part: str
    engine: str
    kernels: tuple[str, ...]
    source: str


def _attention_data() -> dict:
    return kernel_table("attention")


@cache
def decode_kernels() -> tuple[DecodeKernel, ...]:
    return tuple(DecodeKernel(**k) for k in _attention_data()["decode"])


@cache
def saturation() -> float:
    """The share of the CUs whose blocks already draw the whole memory bandwidth (FlashInfer:
    32 of 108 SMs fill it when the kernel is not compute-bound; attention.json)."""
    return float(_attention_data()["saturation"]["share"])


@cache
def engine_prefill(part: str) -> EnginePrefill | None:
    found = [EnginePrefill(**e) for e in _attention_data()["prefill"] if e["part"] == part]
    return found[0] if found else None


@lru_cache(maxsize=65_536)
def split_kv(work: int, slots: int, n_blocks: int, max_splits: int = MAX_SPLITS) -> int:
    """How many ways a decode kernel splits its keys: FlashAttention-2's
    num_splits_heuristic (csrc/flash_attn/flash_api.cpp), as Flash-Decoding does it. With
    `work` blocks filling 80 % of the `slots`, none; else the fewest splits that reach 85 %
    of the best wave efficiency, among splits that change the keys a split takes (a pure
    function of its counts: a sweep's points ask it the same question again)."""
    if work >= 0.8 * slots:
        return 1
    top = min(max_splits, slots, n_blocks)
    found: list[tuple[int, float]] = []  # (splits, wave efficiency) of the eligible
    best, before = 0.0, 0
    for s in range(1, top + 1):
        per_split = -(-n_blocks // s)
        if s == 1 or per_split != before:  # the keys a split takes change
            waves = work * s / slots
            efficiency = waves / math.ceil(waves)
            found.append((s, efficiency))
            best = max(best, efficiency)
        before = per_split
    return next((s for s, e in found if e >= 0.85 * best), 1)


def decode_blocks(op: SdpaOp, units: int) -> tuple[int, int, int]:
    """(blocks, splits, query rows a block) of a decode attention: GQA packs a KV head's
    query heads (and its few queries) into the rows of one block, so the grid is
    B × H_kv × ⌈N_q · group / 64⌉ blocks, times the split-KV splits."""
    group = max(1, op.H_Q // max(1, op.H_KV))
    rows = op.N_Q * group
    work = op.B * max(1, op.H_KV) * -(-rows // DECODE_ROWS)
    keys = keys_read(op.N_Q, op.N_KV, op.causal, op.window, op.chunk)
    n_blocks = max(1, -(-keys // _key_block(op.d_h_qk)))
    splits = split_kv(work, CTAS_PER_CU * units, n_blocks)
    return work * splits, splits, min(rows, DECODE_ROWS)


def _key_block(head_dim: int) -> int:
    """Keys a split-KV block loads at a time (FlashAttention-2 set_params_splitkv)."""
    return 256 if head_dim <= 64 else 128 if head_dim <= 128 else 64


def decode_kernel(op: SdpaOp, hw: Hardware) -> DecodeKernel | None:
    """The decode kernel published on `hw` for `op`'s heads (GQA, or MLA's latent)."""
    heads = "mla" if op.H_KV == 1 and op.d_h_qk > op.d_h_v else "gqa"
    return next((k for k in decode_kernels() if (k.part, k.heads) == (hw.name, heads)), None)


def decode_bandwidth(op: SdpaOp, hw: Hardware) -> tuple[float, str]:
    """(bytes/s, what it is) the decode kernel serving `op` reaches on `hw` with a full
    grid: its published fraction of the datasheet bandwidth, the part's sustained
    bandwidth (`sustained_bandwidth`) where the source says "close to 100%", or, without a
    published decode kernel, the part's sustained bandwidth, said so."""
    best = sustained_bandwidth(hw)
    k = decode_kernel(op, hw)
    said = best.said if best.note else f"{best.said}, the best published"
    if k is None:
        return best.bytes_s, f"{said} on {hw.name} (no published decode kernel)"
    if k.fraction is None:
        return best.bytes_s, f"{said}: {k.library} reaches close to 100 %"
    datasheet = hw.bandwidth("datasheet")
    bw = k.fraction * datasheet
    return bw, f"{_tbs(bw)}: {k.library}, {k.fraction:.1%} of {_tbs(datasheet)}"


def _grid_fill(blocks: int, units: int) -> float:
    """The share of `units` CUs a grid of `blocks` keeps busy over its waves."""
    return blocks / (-(-blocks // units) * units)


def _published_fill(k: DecodeKernel, op: SdpaOp, units: int) -> float:
    """The share of the CUs the grid of a decode kernel's published shape (at `op`'s
    context) keeps busy, as `decode_blocks` lays it out."""
    assert k.shape is not None
    B, H, d_qk, d_v = k.shape
    shaped = replace(op, B=B, H_Q=H, H_KV=1, N_Q=1, d_h_qk=d_qk, d_h_v=d_v)
    return _grid_fill(decode_blocks(shaped, units)[0], units)


def _decode(op: SdpaOp, flops: float, nbytes: float, hw: Hardware, rate: float):
    """A decode step's attention: the KV cache (and Q, O) read at the decode kernel's
    bandwidth, its share of it when the grid fills fewer CUs than draw the whole
    bandwidth, and a second launch that combines the splits; where the kernel's times
    were published at several contexts, its fixed time a call (the intercept of its
    time against its bytes: launch, first and last waves, the combine) in place of the
    launch and the combine."""
    units = hw.compute_units
    blocks, splits, _ = decode_blocks(op, units)
    bw, said = decode_bandwidth(op, hw)
    share = min(1.0, blocks / (saturation() * units))
    waves = -(-blocks // units)
    memory = nbytes / (bw * share)
    compute = flops / (rate * blocks / (waves * units))
    grid = f"decode: {blocks:,} blocks"
    if splits > 1:
        grid += f", keys split {splits} ways (+{LAUNCH_S * 1e6:g} µs combine launch)"
    if share < 1:
        full = saturation() * units
        grid += f", {share:.0%} of the bandwidth (the whole of it takes {full:.0f} CUs busy)"
    combine = LAUNCH_S if splits > 1 else 0.0
    k = decode_kernel(op, hw)
    rate_said = f"compute-bound at {_tflops(rate)}"
    if k is not None and k.times:
        # the decode kernel's own published rate at this context, its grid's occupancy
        # within it: only a grid that fills less of the CUs than it did is slower
        rate, rate_said = decode_rate(k, op.N_KV)
        fill = min(1.0, _grid_fill(blocks, units) / _published_fill(k, op, units))
        compute = flops / (rate * fill)
        less = f", {fill:.0%} of its grid" if fill < 1 else ""
        rate_said = f"compute-bound: {rate_said}{less}"
    if k is not None and k.fixed_us is not None:  # its launch is the one `estimate` adds
        combine = k.fixed_us * 1e-6 - LAUNCH_S
        grid = grid.replace(f" (+{LAUNCH_S * 1e6:g} µs combine launch)", "")
        said += (
            f"; +{combine * 1e6:.1f} µs a call beyond its bytes and launch (its published "
            f"{k.fixed_us:g} µs, the combine within it)"
        )
    if compute > memory:
        return compute + combine, f"{grid}; {rate_said}"
    return memory + combine, f"{grid}; KV cache read at {said}"


def _prefill_rate(op: SdpaOp, hw: Hardware, pass_: str) -> tuple[float, tuple[int, int], str]:
    """The flash kernel's figures published by sequence length for the op's mask and
    head dimension, where the part publishes several (`flash_at`); else the flash
    kernel that the engines run on the part where one is named and published
    (attention.json), else the catalog's fastest (`_rate`)."""
    precision = hw.peak("matrix", op.precision, "datasheet")[1]
    at = flash_shaped(hw.name, precision, pass_, op.causal)
    if at and op.d_h_qk == op.d_h_v == HEAD_DIM:
        return flash_at(at, op.N_Q, hw)
    e = engine_prefill(hw.name)
    if e is not None:
        for k in library():
            if k.id in e.kernels and (k.precision, k.pass_) == (precision, pass_):
                rate = k.tflops * 1e12
                return rate, k.tile, f"{k.library} ({e.engine}) sustains {_tflops(rate)}"
    return _rate("attention", op, hw, pass_)


def _math(op: SdpaOp, hw: Hardware, pass_: str) -> tuple[float, str]:
    """An attention that is not a flash kernel, as PyTorch's composite SDPA runs it
    (perfmodel.attention.math_kernels): each kernel on its own, a batched GEMM as the
    GEMM library's tiles at its published rate (`plan`), everything else (and a GEMM
    whose bytes take longer) its bytes at the best published bandwidth, each paying a
    launch; the caller adds the first. The backward's GEMMs are ordinary GEMMs too: the
    forward GEMM rate."""
    kernels = math_kernels(op, backward=pass_ == "bwd")
    r = matrix_rate("gemm", op, hw, "fwd")
    ts = tiles_for(hw, r.kernel)
    bw = sustained_bandwidth(hw).bytes_s
    gemm_s = other_s = 0.0
    said = []
    for k in kernels:
        t = k.bytes / bw
        if k.gemm is None:
            other_s += t
            continue
        batch, M, N, K = k.gemm
        p = plan((M,), N, K, r.flops, hw, ts, batch)
        how = f"{p.tm}×{p.tn} tiles" if p.time_s > t else "memory-bound"
        gemm_s += max(t, p.time_s)
        said.append(f"{k.name} {max(t, p.time_s) * 1e6:,.1f} µs ({how})")
    scores = op.B * op.H_Q * op.N_Q * op.N_KV
    more = LAUNCH_S * (len(kernels) - 1)
    why = (
        f"math (PyTorch's composite SDPA): {len(kernels)} kernels, the {scores:,}-element "
        f"score matrix materialised; {', '.join(said)}: {r.source}; the other "
        f"{len(kernels) - len(said)} kernels' bytes {other_s * 1e6:,.1f} µs at {_tbs(bw)}; "
        f"+{more * 1e6:g} µs for the {len(kernels) - 1} launches after the first"
    )
    return gemm_s + other_s + more, why


class FlashGrid(Record, frozen=True):
    """A flash kernel's grid over one attention: its blocks of query rows in waves, the
    share of the CUs they keep busy, and the useful share of each block's key loop."""

    keys: float  # keys a query row
    said: str
    occupancy: float
    loop: float


def flash_grid(op: SdpaOp, rows: int, units: int) -> FlashGrid:
    """Blocks of `rows` query rows (B · H_Q · ⌈S_q/rows⌉) in waves on `units` CUs; each
    block's key loop pays KEY_FILL keys of prologue and epilogue, and a causal mask's
    diagonal blocks are computed whole."""
    pairs = op.pairs()
    keys = pairs / op.N_Q if op.N_Q else 0  # keys per query row
    blocks = op.B * op.H_Q * -(-op.N_Q // rows)
    waves, said = _waves(blocks, units)
    loop = keys / (keys + KEY_FILL) if keys else 0.0
    if op.causal and keys:
        loop *= keys / (keys + rows / 2)  # the diagonal blocks are computed whole
    return FlashGrid(keys=keys, said=said, occupancy=blocks / (waves * units), loop=loop)


@cache
def flash_shaped(part: str, precision: str, pass_: str, causal: bool) -> tuple[LibraryKernel, ...]:
    """The part's flash-attention figures published at one shape each (library.json
    `shape`: S, B, H_Q, H_KV, causal), masked as `causal` is, by S."""
    found = kernels_of("attention", part, precision, pass_)
    return tuple(sorted((k for k in found if k.shape and bool(k.shape[4]) == causal),
                        key=lambda k: k.shape[0] if k.shape else 0))  # fmt: skip


def published_flops(k: LibraryKernel) -> float:
    """The FLOPs a flash figure's source counts at its shape: 4·B·H_Q·S²·d forward, 2.5×
    that backward, half of it under a causal mask (AITER's benchmark_mha_fwd/bwd)."""
    assert k.shape is not None
    S, B, H_Q, _, causal = k.shape
    return (4 if k.pass_ == "fwd" else 10) * B * H_Q * S * S * HEAD_DIM * (0.5 if causal else 1)


HEAD_DIM = 128  # the published flash sweeps' head dimension (attention `shape`s)


def flash_at(
    kernels: tuple[LibraryKernel, ...], length: int, hw: Hardware
) -> tuple[float, tuple[int, int], str]:
    """(per-block rate, tile, why) at `length` query rows from figures published by
    sequence length: between two published lengths their per-block rates interpolated
    in log(length), so the time grows smoothly with the length; below the shortest its
    rate, past the longest its rate."""

    def said(k: LibraryKernel) -> str:
        assert k.shape is not None
        S, B, H_Q, H_KV, causal = k.shape
        mask = "causal" if causal else "full"
        return (f"{k.library} sustains {_tflops(k.tflops * 1e12)} at B={B}, S={S}, "
                f"{H_Q}/{H_KV} heads, {mask}")  # fmt: skip

    first, last = kernels[0], kernels[-1]
    assert first.shape is not None and last.shape is not None
    at = [k for k in kernels if k.shape is not None and k.shape[0] == length]
    if at or length < first.shape[0] or length > last.shape[0]:
        k = at[0] if at else first if length < first.shape[0] else last
        rate = per_block_rate(k, hw)
        return rate, k.tile, f"{said(k)}: {_tflops(rate)} a block"
    lo, hi = next((a, b) for a, b in pairwise(kernels) if b.shape and length < b.shape[0])
    assert lo.shape is not None and hi.shape is not None
    w = math.log(length / lo.shape[0]) / math.log(hi.shape[0] / lo.shape[0])
    r_lo, r_hi = per_block_rate(lo, hw), per_block_rate(hi, hw)
    rate = math.exp(math.log(r_lo) + w * (math.log(r_hi) - math.log(r_lo)))
    return (
        rate,
        lo.tile,
        (
            f"{said(lo)} and {hi.tflops:,.0f} at S={hi.shape[0]}: {_tflops(rate)} a block, "
            f"their per-block rates interpolated in log(length)"
        ),
    )


def _flash_op(k: LibraryKernel) -> SdpaOp:
    assert k.shape is not None
    S, B, H_Q, H_KV, causal = k.shape
    return SdpaOp(B, S, H_Q, S, H_KV, HEAD_DIM, HEAD_DIM, causal=bool(causal))


_PER_BLOCK: dict[tuple[LibraryKernel, str, int], float] = {}


def per_block_rate(k: LibraryKernel, hw: Hardware) -> float:
    """The rate per block at which a flash kernel's grid (`flash_grid`) plus its launch
    takes exactly the figure's published time at its own shape (once per kernel and
    part): the grid's time is its FLOPs over rate × occupancy × useful loop share."""
    key = (k, hw.name, hw.compute_units)
    if key not in _PER_BLOCK:
        op = _flash_op(k)
        g = flash_grid(op, k.tile[0], hw.compute_units)
        ours = op.flops() if k.pass_ == "fwd" else op.flops_bwd()
        target = published_flops(k) / (k.tflops * 1e12) - LAUNCH_S
        if target <= 0:
            raise ValueError(f"{k.id}: its published time is not above a launch")
        _PER_BLOCK[key] = ours / (target * g.occupancy * g.loop)
    return _PER_BLOCK[key]


def _attention(op: SdpaOp, flops: float, nbytes: float, hw: Hardware, pass_: str):
    if not op.flash_impl:  # PyTorch's math SDPA, eager attention
        return _math(op, hw, pass_)
    rate, (rows, _), source = _prefill_rate(op, hw, pass_)
    if pass_ == "fwd" and op.N_Q <= DECODE_ROWS:  # a decode (or speculative) step
        return _decode(op, flops, nbytes, hw, rate)
    bw = sustained_bandwidth(hw)
    memory = nbytes / bw.bytes_s
    g = flash_grid(op, rows, hw.compute_units)
    keys, said, occupancy, loop = g.keys, g.said, g.occupancy, g.loop
    compute = flops / (rate * occupancy * loop) if loop else 0.0
    if memory >= compute:
        return memory, f"memory-bound at {bw.said}"
    return compute, (
        f"{said}; {keys:,.0f} keys a query row, {loop:.0%} of the key loop useful; {source}"
    )
