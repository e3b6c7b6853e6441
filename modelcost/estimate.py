"""The kernel-aware estimate: what the kernel that would serve each op can do on the
part, next to the roofline's upper bound (`--estimate kernels`).

A GEMM runs as tiles of tm × tn outputs, one per CU (or SM) at a time, in waves:
tiles = ⌈M/tm⌉·⌈N/tn⌉, waves = ⌈tiles / CUs⌉. Every wave takes as long as a full one,
so the time is waves × the time of one tile at the kernel's published sustained rate
per CU, its K loop lengthened by the pipeline's fill and drain; or, memory-bound, the
bytes at the best published sustained bandwidth. A decode-shaped GEMM (M ≤ 64) with
fewer tiles than CUs splits its K loop over the idle ones, as split-K kernels do.
Attention runs as blocks of query rows (B · heads · ⌈S_q / tile⌉ in waves), each
block's key loop paying a fixed prologue
and epilogue, the diagonal blocks of a causal mask computed whole, at the rate of the
flash kernel the engines run on the part (specs/kernels/attention.json). A decode step's
attention (at most 64 queries a sequence) reads its KV cache at the published bandwidth of
the decode kernel on the part (FlashInfer, FlashMLA), or the part's best published one,
over a grid of B · H_kv blocks (GQA packs a KV head's query heads in one) split along the
keys as FlashAttention-2's split-KV heuristic does; a grid that keeps fewer CUs busy than
draw the whole bandwidth gets its share of it, and the splits' combine is one more
launch. Everything else
moves its bytes at the best published sustained bandwidth. Each kernel pays a fixed
cost per launch. The estimate is never below the roofline time: time = max(roofline,
kernel).

The sustained rates are the published figures of the kernels that serve the op
(specs/kernels/library.json), or the part's best published peak where no kernel's
figure is known; each op says which, and why its time is what it is.
"""

from __future__ import annotations

import json
import math
from functools import cache

from .frozen import Frozen
from .hardware import Hardware
from .perfmodel import CollectiveOp, GemmOp, GroupedGemmOp, OpRecord, SdpaOp
from .perfmodel.attention import keys_read
from .record import Record
from .resources import specs_dir

LAUNCH_S = 2e-6  # a kernel's fixed cost: launch and the first wave's ramp (CUDA/HIP graphs)
K_FILL = 128  # a tile's K loop fills and drains its software pipeline: two 64-deep steps
KEY_FILL = 256  # an attention block's prologue (Q load) and epilogue (rescale, O write),
# in keys: four 64-key steps
DEFAULT_TILES = {"AMD": (256, 256), "sm90": (128, 256)}  # else 256 × 256 (Blackwell 2-SM)
ATTENTION_ROWS = 128  # query rows per attention block where no kernel says otherwise
SPLIT_K_M = 64  # at or below (decode-shaped), kernels split K over idle CUs (split-K)
SPLIT_K_MIN = 256  # the shortest K slice a split takes
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


@cache
def library() -> tuple[LibraryKernel, ...]:
    data = json.loads((specs_dir() / "kernels" / "library.json").read_text(encoding="utf-8"))
    return tuple(
        LibraryKernel(**{("pass_" if k == "pass" else k): v for k, v in entry.items()})
        for entry in data["kernels"]
    )


@cache
def published(kind: str, part: str, precision: str, pass_: str = "fwd") -> LibraryKernel | None:
    """The fastest published kernel of `kind` for `precision` on `part`."""
    found = [k for k in library() if (k.kind, k.part, k.precision, k.pass_)
             == (kind, part, precision, pass_)]  # fmt: skip
    return max(found, key=lambda k: k.tflops, default=None)


class Estimate(Record, frozen=True):
    time_s: float
    reason: str


def _tflops(rate: float) -> str:
    return f"{rate / 1e12:,.0f} TFLOPS"


def _rate(kind: str, op: OpRecord, hw: Hardware, pass_: str) -> tuple[float, tuple[int, int], str]:
    """(sustained FLOP/s, tile, where the rate comes from) for a matrix op."""
    precision = hw.peak("matrix", op.precision, "datasheet")[1]
    k = published(kind, hw.name, precision, pass_)
    if k is None and kind == "attention":  # no attention figure: the GEMM kernels'
        k = published("gemm", hw.name, precision)
        if k is not None:
            what = f"no published attention kernel for {precision}: {k.library}'s GEMM rate"
            return k.tflops * 1e12, (ATTENTION_ROWS, 64), what
    if k is not None:
        return k.tflops * 1e12, k.tile, f"{k.library} sustains {_tflops(k.tflops * 1e12)}"
    rate, used, source = hw.peak("matrix", precision, "achievable")
    tile = DEFAULT_TILES.get(hw.vendor, DEFAULT_TILES.get(hw.arch, (256, 256)))
    if kind == "attention":
        tile = (ATTENTION_ROWS, 64)
    where = "best published" if source == "achievable" else "datasheet"
    return rate, tile, f"no published kernel for {used} on {hw.name}: the {where} {_tflops(rate)}"


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


def _gemm(op: GemmOp | GroupedGemmOp, flops: float, nbytes: float, hw: Hardware, pass_: str):
    rate, (tm, tn), source = _rate("gemm", op, hw, pass_)
    if isinstance(op, GroupedGemmOp):  # each expert hit gets its share of the rows
        groups = max(1, math.ceil(op.G))
        M, N, K, batch = max(1, -(-op.M // groups)), op.N, op.K, groups
    else:
        M, N, K, batch = op.M, op.N, op.K, op.B
    tm = min(tm, max(16, 1 << (M - 1).bit_length()))  # a short M takes a short tile
    units = hw.compute_units
    tiles, waves = tile_waves(M, N, (tm, tn), units, batch)
    splits = 1
    if M <= SPLIT_K_M and tiles < units:  # decode-shaped: split K over the idle CUs
        splits = max(1, min(units // tiles, K // SPLIT_K_MIN))
        tiles, waves = tiles * splits, -(-tiles * splits // units)
    per_tile = 2 * tm * tn * (-(-K // splits) + K_FILL) * units / rate  # the rate per CU
    compute = waves * per_tile * (flops / (2 * M * N * K * batch)) if M * N * K else 0.0
    memory = nbytes / hw.bandwidth("achievable")
    split = f", K split {splits} ways" if splits > 1 else ""
    shape = f"{tm}×{tn} tiles{split}: {_waves(tiles, units)[1]}"
    if memory >= compute:
        return memory, f"memory-bound at {hw.bandwidth('achievable') / 1e12:.2f} TB/s ({shape})"
    return compute, f"{shape}; {source}"


class DecodeKernel(Frozen):
    """A decode-attention kernel's published bandwidth on a part (specs/kernels/attention.json)."""

    id: str
    part: str
    heads: str  # gqa | mla
    library: str
    fraction: float | None  # of the datasheet bandwidth; None: "close to 100%"
    measured: str
    source: str


class EnginePrefill(Frozen):
    """The flash-attention kernels (library.json ids) that the engines run on a part."""

    part: str
    engine: str
    kernels: tuple[str, ...]
    source: str


@cache
def _attention_data() -> dict:
    return json.loads((specs_dir() / "kernels" / "attention.json").read_text(encoding="utf-8"))


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


def decode_bandwidth(op: SdpaOp, hw: Hardware) -> tuple[float, str]:
    """(bytes/s, what it is) the decode kernel serving `op` reaches on `hw` with a full
    grid: its published fraction of the datasheet bandwidth, the part's best published
    sustained bandwidth where the source says "close to 100%", or, without a published
    decode kernel, the best published sustained bandwidth, said so."""
    heads = "mla" if op.H_KV == 1 and op.d_h_qk > op.d_h_v else "gqa"
    best = hw.bandwidth("achievable")
    k = next((k for k in decode_kernels() if (k.part, k.heads) == (hw.name, heads)), None)
    if k is None:
        return best, f"{_tbs(best)}, the best published on {hw.name} (no published decode kernel)"
    if k.fraction is None:
        return best, f"{_tbs(best)}, the best published: {k.library} reaches close to 100 %"
    datasheet = hw.bandwidth("datasheet")
    bw = k.fraction * datasheet
    return bw, f"{_tbs(bw)}: {k.library}, {k.fraction:.1%} of {_tbs(datasheet)}"


def _tbs(rate: float) -> str:
    return f"{rate / 1e12:.2f} TB/s"


def _decode(op: SdpaOp, flops: float, nbytes: float, hw: Hardware, rate: float):
    """A decode step's attention: the KV cache (and Q, O) read at the decode kernel's
    bandwidth, its share of it when the grid fills fewer CUs than draw the whole
    bandwidth, and a second launch that combines the splits."""
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
    if compute > memory:
        return compute + combine, f"{grid}; compute-bound at {_tflops(rate)}"
    return memory + combine, f"{grid}; KV cache read at {said}"


def _prefill_rate(op: SdpaOp, hw: Hardware, pass_: str) -> tuple[float, tuple[int, int], str]:
    """The flash kernel that the engines run on the part where one is named and
    published (attention.json), else the catalog's fastest (`_rate`)."""
    e = engine_prefill(hw.name)
    if e is not None:
        precision = hw.peak("matrix", op.precision, "datasheet")[1]
        for k in library():
            if k.id in e.kernels and (k.precision, k.pass_) == (precision, pass_):
                rate = k.tflops * 1e12
                return rate, k.tile, f"{k.library} ({e.engine}) sustains {_tflops(rate)}"
    return _rate("attention", op, hw, pass_)


def _attention(op: SdpaOp, flops: float, nbytes: float, hw: Hardware, pass_: str):
    rate, (rows, _), source = _prefill_rate(op, hw, pass_)
    if pass_ == "fwd" and op.N_Q <= DECODE_ROWS:  # a decode (or speculative) step
        return _decode(op, flops, nbytes, hw, rate)
    memory = nbytes / hw.bandwidth("achievable")
    pairs = op.pairs()
    keys = pairs / op.N_Q if op.N_Q else 0  # keys per query row
    units = hw.compute_units
    blocks = op.B * op.H_Q * -(-op.N_Q // rows)
    waves, said = _waves(blocks, units)
    occupancy = blocks / (waves * units)
    loop = keys / (keys + KEY_FILL) if keys else 0.0
    if op.causal and keys:
        loop *= keys / (keys + rows / 2)  # the diagonal blocks are computed whole
    compute = flops / (rate * occupancy * loop) if loop else 0.0
    if memory >= compute:
        return memory, f"memory-bound at {hw.bandwidth('achievable') / 1e12:.2f} TB/s"
    return compute, (
        f"{said}; {keys:,.0f} keys a query row, {loop:.0%} of the key loop useful; {source}"
    )


def estimate(
    op: OpRecord, flops: float, nbytes: float, roofline_s: float, hw: Hardware, pass_: str = "fwd"
) -> Estimate:
    """One pass of one op: the larger of its roofline time and what the kernel that
    would serve it does, plus a launch."""
    if isinstance(op, CollectiveOp):  # the network model is the estimate already
        return Estimate(roofline_s, "as the collective's link model")
    if isinstance(op, GemmOp | GroupedGemmOp):
        t, why = _gemm(op, flops, nbytes, hw, pass_)
    elif isinstance(op, SdpaOp):
        t, why = _attention(op, flops, nbytes, hw, pass_)
    else:
        bw = hw.bandwidth("achievable")
        t, why = nbytes / bw, f"its bytes at {bw / 1e12:.2f} TB/s"
    if roofline_s > t:
        t, why = roofline_s, f"{why}; no faster than its roofline"
    return Estimate(t + LAUNCH_S, f"{why}; +{LAUNCH_S * 1e6:g} µs launch")
