"""The published kernel figures the estimate reads (specs/kernels/library.json) and
the two things every part of it takes from them: the library's kernels, tile sets and
siblings, the figure a part takes for an op's kind, precision and token count, the
matrix rate an op runs at on a part (borrowed from a sibling of the same silicon where
the part has none), a GEMM's tile plan at that rate (`plan`: tiles in waves, K split
over idle CUs), and the part's sustained bandwidth."""

from __future__ import annotations

import math
from functools import cache
from itertools import groupby

from modelcost.base.frozen import Frozen
from modelcost.base.record import Record
from modelcost.base.resources import entries, kernel_table
from modelcost.perfmodel import GemmOp, GroupedGemmOp, OpRecord
from modelcost.targets.hardware import Hardware, hardware_dir, load_hardware

LAUNCH_S = 2e-6  # a kernel's fixed cost: launch and the first wave's ramp (CUDA/HIP graphs)


K_FILL = 128  # a tile's K loop fills and drains its software pipeline: two 64-deep steps


SPLIT_K_M = 64  # at or below (decode-shaped), kernels split K over idle CUs (split-K)


SPLIT_K_MIN = 256  # the shortest K slice a decode split takes


# stream-K over a grid with fewer tiles than CUs (tritonBLAS origami.py _compute_sk_grid):
# the first of these ways that fits the CUs and leaves each split STREAM_K_ITERS K steps
STREAM_K_SPLITS = (8, 6, 4, 3, 2)


STREAM_K_ITERS, K_STEP = 8, 64


PARTIAL_BYTES = 4  # a split's partial tile: fp32, written once and read back to reduce


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
