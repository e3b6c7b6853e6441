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

Its parts: kernel_rates (the published figures), gemm_plan (GEMMs in tiles and waves),
attention_rates (attention and bandwidth); this module prices one op's pass from them.
"""

from __future__ import annotations

import math

from modelcost.base.record import Record, replace
from modelcost.perfmodel import CollectiveOp, GemmOp, GroupedGemmOp, OpRecord, SdpaOp, Unit
from modelcost.targets.hardware import Hardware

from .attention_rates import _attention
from .collectives_achieved import achieved
from .engines import DEFAULT_ENGINE
from .gemm_plan import _gemm_pass
from .kernel_rates import LAUNCH_S, moe_imbalance, sustained_bandwidth


class Estimate(Record, frozen=True):
    time_s: float
    reason: str


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
