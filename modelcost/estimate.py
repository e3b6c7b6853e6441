"""The kernel-aware estimate: what the kernel that would serve each op can do on the
part, next to the roofline's upper bound (`--estimate kernels`).

A GEMM runs as tiles of tm × tn outputs, one per CU (or SM) at a time, in waves:
tiles = ⌈M/tm⌉·⌈N/tn⌉, waves = ⌈tiles / CUs⌉. Every wave takes as long as a full one,
so the time is waves × the time of one tile at the kernel's published sustained rate
per CU, its K loop lengthened by the pipeline's fill and drain; or, memory-bound, the
bytes at the best published sustained bandwidth. The tile is chosen per shape, as a
library's heuristic does: the one of its library's tile set (library.json `tile_sets`)
with the fewest waves × tile time. A grid with fewer tiles than CUs splits its K loop
over the idle ones: a decode-shaped GEMM (M ≤ 64) as split-K kernels do, others by
tritonBLAS's stream-K rule where the library streams K. A grouped (MoE) GEMM pads each
expert's rows to the tile, the hottest expert taking the routing imbalance × the mean.
Attention runs as blocks of query rows (B · heads · ⌈S_q / tile⌉ in waves), each
block's key loop paying a fixed prologue
and epilogue, the diagonal blocks of a causal mask computed whole, at the rate of the
flash kernel the engines run on the part (specs/kernels/attention.json). A decode step's
attention (at most 64 queries a sequence) reads its KV cache at the published bandwidth of
the decode kernel on the part (FlashInfer, FlashMLA), or the part's best published one,
over a grid of B · H_kv blocks (GQA packs a KV head's query heads in one) split along the
keys as FlashAttention-2's split-KV heuristic does; a grid that keeps fewer CUs busy than
draw the whole bandwidth gets its share of it, and the splits' combine is one more
launch. An attention stated `kernel = math` (PyTorch's composite SDPA, eager attention)
runs as separate kernels, two batched GEMMs at the GEMM rate and the score matrix's
passes at the bandwidth, each with its launch. Everything else
moves its bytes at the best published sustained bandwidth. Each kernel pays a fixed
cost per launch. The estimate is never below the roofline time: time = max(roofline,
kernel).

The sustained rates are the published figures of the kernels that serve the op
(specs/kernels/library.json); else the part's best published peak; a part with neither
borrows the efficiency its sibling of the same compute silicon publishes (library.json
`siblings`). Where a part publishes a GEMM figure at several token counts, a GEMM takes
the one for its bucket (the smallest published M at or above its own) with that
bucket's tile height, floored by every smaller bucket; where it publishes a flash
kernel at several lengths, the per-block rates are interpolated in log(length). Each
such figure's per-tile (per-block) rate is the one that reproduces it at its own shape.
Bandwidth likewise: the part's best published sustained figure, else the
measured efficiency of a part with the same memory system (`memory_siblings`), else the
datasheet. Each op says which, and why its time is what it is.
"""

from __future__ import annotations

import math
from functools import cache
from itertools import groupby, pairwise

from .collectives_achieved import achieved
from .engines import DEFAULT_ENGINE
from .frozen import Frozen
from .hardware import Hardware, hardware_dir, load_hardware
from .kernels import serve
from .perfmodel import CollectiveOp, GemmOp, GroupedGemmOp, OpRecord, SdpaOp, Unit
from .perfmodel.attention import keys_read, math_kernels
from .record import Record, replace
from .resources import entries, kernel_table

LAUNCH_S = 2e-6  # a kernel's fixed cost: launch and the first wave's ramp (CUDA/HIP graphs)
K_FILL = 128  # a tile's K loop fills and drains its software pipeline: two 64-deep steps
KEY_FILL = 256  # an attention block's prologue (Q load) and epilogue (rescale, O write),
# in keys: four 64-key steps
ATTENTION_ROWS = 128  # query rows per attention block where no kernel says otherwise
SPLIT_K_M = 64  # at or below (decode-shaped), kernels split K over idle CUs (split-K)
SPLIT_K_MIN = 256  # the shortest K slice a decode split takes
# stream-K over a grid with fewer tiles than CUs (tritonBLAS origami.py _compute_sk_grid):
# the first of these ways that fits the CUs and leaves each split STREAM_K_ITERS K steps
STREAM_K_SPLITS = (8, 6, 4, 3, 2)
STREAM_K_ITERS, K_STEP = 8, 64
PARTIAL_BYTES = 4  # a split's partial tile: fp32, written once and read back to reduce
# Decode attention, after FlashAttention-2's split-KV kernel (csrc/flash_attn/flash_api.cpp,
# set_params_splitkv and num_splits_heuristic; Flash-Decoding):
DECODE_ROWS = 64  # query rows a split-KV block holds ("we don't expect seqlen_q to be
# larger than 64 for inference"); at or below it an attention runs as a decode kernel
MAX_SPLITS = 128  # the most splits the heuristic tries
CTAS_PER_CU = 2  # the heuristic's slots: 2 blocks per SM (128-thread blocks)


class LibraryKernel(Frozen):
    """A published sustained rate (specs/kernels/library.json)."""

    id: str
    kind: str  # gemm | attention
    part: str
    precision: str
    library: str
    tile: tuple[int, int]
    tflops: float
    measured: str
    source: str
    pass_: str = "fwd"
    tile_set: str | None = None  # the tiles its library chooses among (`tile_sets`)
    # the one GEMM (M, N, K) its figure was measured on, where a part publishes figures at
    # several token counts: the estimate then serves each GEMM of at least the smallest
    # published M from the one measured at the smallest M at or above its own (its
    # bucket), its per-tile rate the one that reproduces that measurement (below the
    # smallest, the part's other figures). Attention: (S, B, H_Q, H_KV, causal 0/1)
    shape: tuple[int, ...] | None = None


class TileSet(Frozen):
    """The tiles a library chooses among, largest first, and whether it splits K."""

    tiles: tuple[tuple[int, int], ...]
    stream_k: bool = False
    source: str = ""


class Sibling(Frozen):
    """A part of the same compute silicon whose published figures this part borrows."""

    sibling: str
    reason: str


def _data() -> dict:
    return kernel_table("library")


@cache
def library() -> tuple[LibraryKernel, ...]:
    return tuple(
        LibraryKernel(**{("pass_" if k == "pass" else k): v for k, v in entry.items()})
        for entry in _data()["kernels"]
    )


@cache
def tile_sets() -> dict[str, TileSet]:
    """The library tile sets by name (library.json `tile_sets`)."""
    return {n: TileSet(**t) for n, t in entries(_data()["tile_sets"]).items()}


@cache
def siblings() -> dict[str, Sibling]:
    """part → the part of the same compute silicon it borrows from (library.json)."""
    return {n: Sibling(**s) for n, s in entries(_data()["siblings"]).items()}


@cache
def memory_siblings() -> dict[str, Sibling]:
    """part → the part of the same memory system whose measured bandwidth efficiency it
    borrows (library.json `memory_siblings`)."""
    return {n: Sibling(**s) for n, s in entries(_data()["memory_siblings"]).items()}


@cache
def moe_imbalance() -> tuple[float, str]:
    """The default routing imbalance (hottest expert's load / mean) and its source."""
    moe = _data()["moe"]
    return float(moe["imbalance"]), str(moe["source"])


def kernels_of(
    kind: str, part: str, precision: str, pass_: str = "fwd"
) -> tuple[LibraryKernel, ...]:
    """The catalog's kernels of `kind` for `precision` and `pass_` on `part`."""
    want = (kind, part, precision, pass_)
    return tuple(k for k in library() if (k.kind, k.part, k.precision, k.pass_) == want)


@cache
def published(kind: str, part: str, precision: str, pass_: str = "fwd") -> LibraryKernel | None:
    """The fastest published kernel of `kind` for `precision` on `part` whose figure is
    not tied to one shape; else, of the figures published by shape, the one at the
    largest (the long-shape regime a shape-less figure stands for)."""
    found = kernels_of(kind, part, precision, pass_)
    plain = [k for k in found if k.shape is None]
    if plain:
        return max(plain, key=lambda k: k.tflops)
    return max(found, key=lambda k: k.shape[0] if k.shape else 0, default=None)


@cache
def shaped(kind: str, part: str, precision: str, pass_: str = "fwd") -> tuple[LibraryKernel, ...]:
    """The part's kernels published at one GEMM shape each, one a token count (M), by
    M; then its sibling's (the same compute silicon, library.json `siblings`) at the
    token counts it lacks. Two kernels at one M: the faster, as an engine dispatches."""

    def of(name: str) -> dict[int, LibraryKernel]:
        best: dict[int, LibraryKernel] = {}
        for k in kernels_of(kind, name, precision, pass_):
            if k.shape:
                m = k.shape[0]
                if m not in best or k.tflops > best[m].tflops:
                    best[m] = k
        return best

    own = of(part)
    sib = siblings().get(part)
    theirs = of(sib.sibling) if sib is not None and own else {}
    pool = theirs | own  # the part's own at a token count both publish
    return tuple(pool[m] for m in sorted(pool))


def bucket(kernels: tuple[LibraryKernel, ...], rows: int) -> LibraryKernel:
    """The kernel published at the smallest M at or above `rows` (the configuration a
    tuned GEMM dispatches for that bucket of token counts, as AITER's tuned_gemm pads M
    up to its next tuned size), or the largest past them all."""
    for k in kernels:
        assert k.shape is not None  # shaped() keeps only these
        if rows <= k.shape[0]:
            return k
    return kernels[-1]


_PER_TILE: dict[tuple[LibraryKernel, str, int, float], float] = {}


def per_tile_rate(k: LibraryKernel, hw: Hardware) -> float:
    """The sustained FLOP/s per tile at which `plan` (plus the launch `estimate` adds)
    takes exactly the kernel's published time at its own shape: the published figure
    with the shape's tile and wave quantization taken out (once per kernel and part)."""
    key = (k, hw.name, hw.compute_units, sustained_bandwidth(hw).bytes_s)
    if key not in _PER_TILE:
        _PER_TILE[key] = _per_tile(k, hw)
    return _PER_TILE[key]


def _per_tile(k: LibraryKernel, hw: Hardware) -> float:
    assert k.shape is not None
    M, N, K = k.shape
    target = 2 * M * N * K / (k.tflops * 1e12) - LAUNCH_S
    if target <= 0:
        raise ValueError(f"{k.id}: its published time is not above a launch")
    ts = tiles_for(hw, k)
    rate = k.tflops * 1e12
    for _ in range(64):  # plan's time is rate-proportional but for its memory terms
        rate *= plan((M,), N, K, rate, hw, ts, bucket=M).time_s / target
    if not math.isclose(plan((M,), N, K, rate, hw, ts, bucket=M).time_s, target, rel_tol=1e-9):
        raise ValueError(f"{k.id}: no per-tile rate reproduces its published time")
    return rate


class Estimate(Record, frozen=True):
    time_s: float
    reason: str


class Rate(Record, frozen=True):
    """A sustained matrix rate for one op on one part, the kernel it comes from (if
    any) and where it comes from, in words."""

    flops: float
    kernel: LibraryKernel | None
    source: str


def _tflops(rate: float) -> str:
    return f"{rate / 1e12:,.0f} TFLOPS"


@cache
def _shipped(name: str) -> Hardware:
    """A shipped target, read once (a sibling whose published figures are borrowed)."""
    return load_hardware(hardware_dir() / f"{name}.hw")


def _borrowed(
    kind: str, hw: Hardware, precision: str, pass_: str, rows: int | None = None
) -> Rate | None:
    """The sibling's published efficiency at `precision` (for a GEMM of `rows` tokens its
    figure for their bucket, per tile, where it publishes several; else its
    kernel's, else its best published peak's) over its datasheet peak, applied to this
    part's datasheet peak."""
    sib = siblings().get(hw.name)
    if sib is None:
        return None
    other = _shipped(sib.sibling)
    peak, used, _ = hw.peak("matrix", precision, "datasheet")
    their_peak = other.peak("matrix", used, "datasheet")[0]
    at = shaped(kind, other.name, used, pass_) if rows is not None else ()
    k = published(kind, other.name, used, pass_)
    if at and at[0].shape and rows is not None and at[0].shape[0] <= rows:
        k = bucket(at, rows)
        assert k.shape is not None
        M, N, K = k.shape
        sustained = per_tile_rate(k, other)
        what = f"{k.library} (published at {M}×{N}×{K}, the bucket serving {M:,}) sustains"
    elif k is not None:
        sustained, what = k.tflops * 1e12, f"{k.library} sustains"
    else:
        sustained, _, source = other.peak("matrix", used, "achievable")
        if source != "achievable":
            return None
        what = "the best published figure is"
    eff = sustained / their_peak
    return Rate(
        eff * peak,
        k,
        f"no published {used} figure on {hw.name}: on the {other.name} {what} "
        f"{_tflops(sustained)}, {eff:.0%} of its {_tflops(their_peak)} peak; {sib.reason}, "
        f"so {eff:.0%} of this part's {_tflops(peak)}",
    )


def _at_shape(k: LibraryKernel, hw: Hardware, precision: str) -> Rate:
    """A GEMM figure published by token count, per tile; a sibling's scaled by the two
    parts' datasheet peaks, as `_borrowed` scales a sibling's efficiency."""
    assert k.shape is not None
    M, N, K = k.shape
    rate, whose = per_tile_rate(k, hw), ""
    if k.part != hw.name:
        other = _shipped(k.part)
        peak, used, _ = hw.peak("matrix", precision, "datasheet")
        ratio = peak / other.peak("matrix", used, "datasheet")[0]
        rate = per_tile_rate(k, other) * ratio
        whose = (
            f" (the {k.part}'s, × {ratio:.3g} for this part's peak: {siblings()[hw.name].reason})"
        )
    return Rate(rate, k,
                f"{k.library} sustains {_tflops(k.tflops * 1e12)} at {M}×{N}×{K}, the "
                f"published token count serving {M:,} or fewer{whose}: "
                f"{_tflops(rate)} a tile")  # fmt: skip


def matrix_rate(
    kind: str, op: OpRecord, hw: Hardware, pass_: str = "fwd", rows: int | None = None
) -> Rate:
    """The sustained FLOP/s of a matrix op: for a GEMM of `rows` tokens (default its M;
    a grouped GEMM's hottest expert's) the figure its part (and silicon sibling)
    publishes for that bucket of token counts (`shaped`, `bucket`); else the fastest
    published library kernel on the part (library.json), else the part's best published
    figure (its achievable roof: a part with no library figure has nothing nearer),
    else its sibling's efficiency, else the datasheet."""
    precision = hw.peak("matrix", op.precision, "datasheet")[1]
    if isinstance(op, GemmOp | GroupedGemmOp) and rows is None:
        rows = op.M
    at = shaped(kind, hw.name, precision, pass_)
    if at and rows is not None and at[0].shape and at[0].shape[0] <= rows:
        return _at_shape(bucket(at, rows), hw, precision)
    k = published(kind, hw.name, precision, pass_)
    if k is not None:
        return Rate(k.tflops * 1e12, k, f"{k.library} sustains {_tflops(k.tflops * 1e12)}")
    sib = _borrowed(kind, hw, precision, pass_, rows)
    if kind == "attention":  # no attention figure: the sibling's, else the GEMM rate
        if sib is not None and sib.kernel is not None:
            return sib
        g = matrix_rate("gemm", op, hw)
        if g.kernel is not None:
            what = f"no published attention kernel for {precision}: {g.kernel.library}'s GEMM rate"
            return Rate(g.flops, None, what)
        return Rate(g.flops, None, g.source)
    rate, used, source = hw.peak("matrix", precision, "achievable")
    if source == "achievable":  # the part's own published figure before a sibling's
        return Rate(rate, None, f"no published kernel for {used} on {hw.name}: the best "
                                f"published {_tflops(rate)}")  # fmt: skip
    if sib is not None:
        return sib
    return Rate(rate, None, f"no published kernel for {used} on {hw.name}: the datasheet "
                            f"{_tflops(rate)}")  # fmt: skip


def tiles_for(hw: Hardware, kernel: LibraryKernel | None) -> TileSet:
    """The tiles the kernel's library chooses among; a kernel without a set computes
    its one published tile; a part without a kernel, its vendor's library's set."""
    if kernel is not None:
        if kernel.tile_set is None:
            return TileSet(tiles=(kernel.tile,), source=kernel.library)
        return tile_sets()[kernel.tile_set]
    defaults = entries(_data()["default_tile_sets"])
    return tile_sets()[defaults.get(hw.arch, defaults.get(hw.vendor, "cutlass-sm100"))]


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


class Plan(Record, frozen=True):
    """One way to run a GEMM: its tile, how many ways K is split, and its time."""

    tm: int
    tn: int
    splits: int
    tiles: int
    waves: int
    time_s: float


def _splits(tiles: int, M: int, K: int, units: int, stream_k: bool) -> int:
    """How many ways K is split over the CUs a grid of `tiles` leaves idle."""
    if tiles >= units:
        return 1
    if M <= SPLIT_K_M:  # decode-shaped: split K over the idle CUs
        return max(1, min(units // tiles, K // SPLIT_K_MIN))
    if stream_k:  # tritonBLAS's stream-K grid rule (STREAM_K_SPLITS)
        for f in STREAM_K_SPLITS:
            if tiles * f <= units and K // K_STEP // f >= STREAM_K_ITERS:
                return f
    return 1


def plan(
    rows: tuple[int, ...],
    N: int,
    K: int,
    rate: float,
    hw: Hardware,
    ts: TileSet,
    batch: int = 1,
    bucket: int = 0,
) -> Plan:
    """The fastest of the tile set's ways to run a GEMM of N × K weights over `rows`
    (one entry a batch member or an expert, each padded to the tile; `batch` copies of
    them, so that a batch of many alike costs one entry): waves × the time of one tile
    at the sustained rate per CU, its K loop lengthened by the pipeline's fill, plus a
    split K's partial tiles reduced through memory. Ties: the larger tile. `bucket`:
    the token count whose published configuration serves these rows (its tile height
    and split rule, as a tuned GEMM pads M up to its bucket)."""
    units, best = hw.compute_units, None
    bw = sustained_bandwidth(hw).bytes_s
    top = max(max(rows), bucket)
    runs = [(m, len(list(alike))) for m, alike in groupby(rows)]  # experts share counts
    total = sum(rows)
    for tm, tn in ts.tiles:
        tm = min(tm, max(16, 1 << (top - 1).bit_length()))  # a short M takes a short tile
        tiles = batch * sum(n * -(-m // tm) for m, n in runs) * -(-N // tn)
        splits = _splits(tiles, top, K, units, ts.stream_k)
        waves = -(-tiles * splits // units)
        per_tile = 2 * tm * tn * (-(-K // splits) + K_FILL) * units / rate
        reduce = 0.0
        if splits > 1 and top > SPLIT_K_M:
            reduce = 2 * splits * batch * total * N * PARTIAL_BYTES / bw
        time = waves * per_tile + reduce
        if ts.stream_k and splits == 1 and tiles > units and tiles % units:
            # stream-K's hybrid (Osama et al., "Stream-K", PPoPP 2023; the schedulers of
            # CUTLASS and hipBLASLt): the full waves run a tile per CU, and the last,
            # partial wave's tiles are streamed over every CU, each taking rest/units of
            # a tile's K loop; every CU's partial tile is then fixed up through memory
            full, rest = divmod(tiles, units)
            streamed = 2 * tm * tn * (K * rest / units + K_FILL) * units / rate
            fixup = 2 * units * tm * tn * PARTIAL_BYTES / bw
            time = min(time, full * per_tile + streamed + fixup)
        p = Plan(tm, tn, splits, tiles * splits, waves, time)
        if best is None or p.time_s < best.time_s:
            best = p
    assert best is not None  # a tile set has at least one tile
    return best


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


def split_kv(work: int, slots: int, n_blocks: int, max_splits: int = MAX_SPLITS) -> int:
    """How many ways a decode kernel splits its keys: FlashAttention-2's
    num_splits_heuristic (csrc/flash_attn/flash_api.cpp), as Flash-Decoding does it. With
    `work` blocks filling 80 % of the `slots`, none; else the fewest splits that reach 85 %
    of the best wave efficiency, among splits that change the keys a split takes."""
    if work >= 0.8 * slots:
        return 1
    top = min(max_splits, slots, n_blocks)

    def eligible(s: int) -> bool:
        return s == 1 or -(-n_blocks // s) != -(-n_blocks // (s - 1))

    def efficiency(s: int) -> float:
        waves = work * s / slots
        return waves / math.ceil(waves)

    best = max((efficiency(s) for s in range(1, top + 1) if eligible(s)), default=0.0)
    return next((s for s in range(1, top + 1) if eligible(s) and efficiency(s) >= 0.85 * best), 1)


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


def _tbs(rate: float) -> str:
    return f"{rate / 1e12:.2f} TB/s"


class Bandwidth(Record, frozen=True):
    """The bandwidth a memory-bound kernel sustains on a part and where it comes from:
    `note` follows the figure beside an op's time (empty for the part's own published
    figure), `source` says it in full."""

    bytes_s: float
    note: str
    source: str

    @property
    def said(self) -> str:
        return f"{_tbs(self.bytes_s)}{self.note}"


@cache
def _sustained(name: str, datasheet: float, measured: float | None) -> Bandwidth:
    if measured:
        return Bandwidth(bytes_s=measured, note="",
                         source=f"{_tbs(measured)}, the best published on {name}")  # fmt: skip
    sib = memory_siblings().get(name)
    other = _shipped(sib.sibling) if sib is not None else None
    if sib is not None and other is not None and other.achievable.memory_bandwidth:
        theirs = other.bandwidth("datasheet")
        eff = other.achievable.memory_bandwidth / theirs
        return Bandwidth(
            bytes_s=eff * datasheet,
            note=f" (the {other.name}'s {eff:.0%} of the datasheet: the same memory)",
            source=f"no published sustained bandwidth on {name}: the {other.name} sustains "
            f"{_tbs(other.achievable.memory_bandwidth)}, {eff:.0%} of its {_tbs(theirs)}; "
            f"{sib.reason}; so {eff:.0%} of this part's {_tbs(datasheet)}",
        )
    return Bandwidth(bytes_s=datasheet, note=" (the datasheet: none published)",
                     source=f"no published sustained bandwidth on {name}: the datasheet "
                            f"{_tbs(datasheet)}")  # fmt: skip


def sustained_bandwidth(hw: Hardware) -> Bandwidth:
    """What a memory-bound kernel sustains on `hw`: the part's best published bandwidth,
    else its memory sibling's measured efficiency on this part's datasheet bandwidth
    (library.json `memory_siblings`), else the datasheet, said so."""
    return _sustained(hw.name, hw.bandwidth("datasheet"), hw.achievable.memory_bandwidth)


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
    if k is not None and k.fixed_us is not None:  # its launch is the one `estimate` adds
        combine = k.fixed_us * 1e-6 - LAUNCH_S
        grid = grid.replace(f" (+{LAUNCH_S * 1e6:g} µs combine launch)", "")
        said += (
            f"; +{combine * 1e6:.1f} µs a call beyond its bytes and launch (its published "
            f"{k.fixed_us:g} µs, the combine within it)"
        )
    if compute > memory:
        return compute + combine, f"{grid}; compute-bound at {_tflops(rate)}"
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


def estimate(
    op: OpRecord,
    flops: float,
    nbytes: float,
    roofline_s: float,
    hw: Hardware,
    pass_: str = "fwd",
    engine: str | None = DEFAULT_ENGINE,
    imbalance: float | None = None,
) -> Estimate:
    """One pass of one op: the larger of its roofline time and what the kernel that
    would serve it does, plus a launch; a collective as `engine` runs it. `imbalance`
    (None: the documented default, `moe_imbalance`) is the hottest expert's routed
    rows over the mean in a grouped GEMM, and the hottest rank's in an all-to-all
    (only MoE's token exchange is one): the roofline keeps the mean."""
    if isinstance(op, CollectiveOp):  # as NCCL/RCCL and the engine achieve it, never
        hot = ""
        if op.collective == "all_to_all":  # the hottest rank receives imbalance × the mean
            x = moe_imbalance()[0] if imbalance is None else imbalance
            # every (token, expert) copy, as NCCL's all-to-all sends them
            op = replace(op.per_copy(), elements=math.ceil(x * op.elements))
            hot = f"the hottest rank's {x:g}× the mean tokens (routing imbalance); "
        t, why = achieved(op, hw, engine)  # below the bound (collectives_achieved.py)
        why = hot + why
        if roofline_s >= t:
            t, why = roofline_s, f"{why}; no faster than its roofline"
        return Estimate(t, why)
    if isinstance(op, GemmOp | GroupedGemmOp):
        t, why = _gemm_pass(op, flops, nbytes, hw, pass_, imbalance)
    elif isinstance(op, SdpaOp):
        t, why = _attention(op, flops, nbytes, hw, pass_)
    elif op.unit is Unit.host:  # no published copy rate: the link's datasheet figure
        t = roofline_s
        link = (hw.host_bandwidth or 0.0) / 1e9  # roofs.roof refuses a target without it
        why = f"its bytes over the host link at {link:,.0f} GB/s (its datasheet figure)"
    else:
        bw = sustained_bandwidth(hw)
        t, why = nbytes / bw.bytes_s, f"its bytes at {bw.said}"
    if roofline_s > t:
        t, why = roofline_s, f"{why}; no faster than its roofline"
    return Estimate(t + LAUNCH_S, f"{why}; +{LAUNCH_S * 1e6:g} µs launch")
