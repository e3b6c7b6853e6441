"""The report model: everything a report shows, computed, as frozen pydantic models.

Built by `roofline.build_report`; rendered to JSON (its schema is `Report`'s JSON
Schema, `modelcost schema --report`), Markdown and HTML. Renderers only format.
Units: FLOPs, bytes, seconds, FLOP/s and bytes/s as plain SI numbers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError

from modelcost.base.errors import SpecError
from modelcost.base.files import read_text
from modelcost.base.frozen import Frozen
from modelcost.base.hooks import shown
from modelcost.base.settings import CapacityBasis, PeakMode

from .graph import Grads, Overlap

REPORT_SCHEMA_VERSION = 7  # 3: layouts; 4: prefix, chunk, prompt; 5: kernel estimates;
# 6: token streams (workload.streams, joined); 7: hardware.memory_basis (driver-reported)

Bound = Literal["compute", "memory", "network", "host"]  # host: activation offloading's link


class ModelInfo(Frozen):
    name: str
    title: str
    params_total: int
    params_active: int
    params_device: int = Field(description="parameters one device holds (before ZeRO-3)")


class HardwareInfo(Frozen):
    name: str
    title: str
    vendor: str
    arch: str
    peak: PeakMode = Field(description="which compute peaks the roofline used")
    bandwidth: PeakMode
    memory_bandwidth: float = Field(description="HBM bytes/s used")
    memory_capacity: float = Field(description="HBM bytes the fit check uses")
    memory_basis: CapacityBasis = Field(
        description="driver-reported: the total nvidia-smi/rocm-smi reports; datasheet: "
        "the vendor's marketing figure, where no driver figure is known"
    )
    scaleup_bandwidth: float = Field(description="bytes/s per direction, for collectives")
    scaleup_domain: int = Field(description="devices one scale-up fabric joins")
    scaleout_bandwidth: float = Field(description="bytes/s per device per direction")
    knee: float = Field(description="ridge point FLOPs/byte at the model's main precision")
    knee_precision: str


class LayoutInfo(Frozen):
    """How the job is split over devices (Megatron's terms; graph.Parallel)."""

    tp: int
    sp: bool
    ep: int
    dp: int
    cp: int
    pp: int
    microbatches: int
    overlap: Overlap
    recompute: Literal["none", "selective", "full"]
    zero: int
    devices: int
    label: str = Field(description="`tp 8, sp, dp 2`; empty on one device")
    etp: int = Field(
        1,
        description="ranks each expert's width splits over (tp where ep "
        "is taken from dp; --etp, default 1, where the experts fold onto tp × dp)",
    )
    vpp: int = Field(1, description="virtual pipeline stages a stage holds (interleaved 1F1B)")
    grads: Grads = Field(
        "fp32",
        description="the dtype training accumulates and reduces gradients in: fp32, or "
        "param (the parameters' own, grad_reduce_in_fp32 False)",
    )
    offload: int = Field(
        0,
        description="training: layers whose saved activations are copied to host memory "
        "and back (Megatron-Core's cpu_offloading_num_layers)",
    )


def comm_label(layout: LayoutInfo) -> str:
    """What a report's `comm_s` counts: collectives, and activation offloading's host
    copies where the layout offloads (roofline.LINKS: transfers beside compute)."""
    return "collectives and host copies" if layout.offload else "collectives"


class WorkloadInfo(Frozen):
    phase: Literal["prefill", "decode", "train"]
    batch: int = Field(description="sequences per step, the whole job's")
    seq: int = Field(description="queries per sequence (1 for decode)")
    context: int = Field(description="keys attended per sequence")
    logits: Literal["all", "last"] | None = Field(
        description="prefill/train: logits for every position or each sequence's last; "
        "null for decode, which computes one token's logits per sequence"
    )
    tokens: int = Field(description="tokens per step through every layer, the whole job's")
    prefix: int = Field(
        0, description="prompt tokens cached before each prefill sequence (or chunk prompt)"
    )
    chunk: int = Field(0, description="decode: prompt tokens prefilled in the step, per replica")
    prompt: int = Field(0, description="decode: new tokens of each prompt the chunk comes from")
    streams: dict[str, int] = Field(
        {}, description="each other token stream's length per sequence (an encoder's source)"
    )
    joined: int = Field(
        0, description="tokens of other streams joining each sequence (image tokens), in seq"
    )
    label: str = Field(
        description="`seq S` (prefill, train) or `context C` (decode), any prefix and "
        "chunk, then the layout"
    )
    conventions: Literal["modelcost", "tracelens"]
    layout: LayoutInfo


class PassTiming(Frozen):
    """Costs and roofline of one pass (forward or backward) of one op instance."""

    flops: float
    bytes: float
    intensity: float = Field(description="FLOPs per byte")
    compute_s: float
    memory_s: float
    time_s: float
    bound: Bound
    estimate_s: float | None = Field(
        default=None, description="--estimate kernels: what the serving kernel does"
    )
    estimate_reason: str | None = Field(default=None, description="why, in words")


class KernelChoice(Frozen):
    """The Gluon kernel that would serve a GEMM (or why none does)."""

    id: str | None = None
    title: str | None = None
    url: str | None = None
    tflops: float | None = Field(default=None, description="published TFLOPS")
    measured: str | None = Field(default=None, description="the shape they were measured on")
    pin: str | None = None
    reason: str
    exact: bool = Field(description="the kernel's constraints hold as the shape stands")


class KernelUse(Frozen):
    """One row of the kernels table: a kernel (or none) and the GEMMs it would serve."""

    id: str | None
    title: str | None
    url: str | None
    tflops: float | None
    measured: str | None
    ops: tuple[str, ...]
    time_s: float
    share: float


class OpEntry(Frozen):
    name: str
    layer: int | None = Field(description="first layer of the op's group; null: model level")
    group: str
    layers: str = Field(description="every layer the op stands for, e.g. `3-60`")
    kind: str = Field(description="perf-model class: GEMM, SDPA, GroupedGemm, ...")
    count: int
    shape: dict[str, int | float | bool | str | list[int]]
    shape_label: str = Field(description="the shape as the tables show it, e.g. `8×8192×8192`")
    dtype: str = Field(description="compute precision")
    dtypes: dict[str, str]
    unit: Literal["matrix", "vector", "network", "host"]
    link: Literal["scale-up", "scale-out", "scale-up+out", "host"] | None = Field(
        default=None,
        description="collectives: the links the group spans; host copies: the host link",
    )
    peak_flops: float = Field(description="FLOP/s of the peak used")
    peak_precision: str
    peak_source: PeakMode
    flops: float
    bytes: float
    intensity: float
    compute_s: float
    memory_s: float
    time_s: float
    bound: Bound
    attained_flops: float = Field(description="FLOPs / roofline time: the FLOP/s it reaches")
    kernel: KernelChoice | None = None
    backward: PassTiming | None = None
    total_time_s: float = Field(description="count × (forward + backward) time")
    share: float = Field(description="fraction of the step's time")
    estimate_s: float | None = Field(
        default=None,
        description="--estimate kernels: the forward pass as the kernel that would serve "
        "it runs (never below time_s)",
    )
    efficiency: float | None = Field(
        default=None, description="time_s / estimate_s: the share of its roofline reached"
    )
    estimate_reason: str | None = Field(default=None, description="why, in words")
    total_estimate_s: float | None = Field(
        default=None, description="count × (forward + backward) estimate"
    )


class LayerEntry(Frozen):
    group: str
    block: str
    layers: str
    count: int
    flops: float = Field(description="all copies, all passes")
    bytes: float
    intensity: float
    time_s: float
    share: float


class KindEntry(Frozen):
    kind: str
    flops: float
    bytes: float
    time_s: float
    share: float


class Memory(Frozen):
    weights: float
    kv_cache: float
    activations: float
    gradients: float = 0
    optimizer_states: float = 0
    total: float
    capacity: float
    fits: bool
    warning: str | None = None


PER_TOKEN = "per token (step ÷ tokens)"  # the label of PerToken.ms_per_token, everywhere


class PerToken(Frozen):
    tokens_per_step: int = Field(description="the whole job's")
    ms_per_step: float
    ms_per_token: float = Field(
        description="step time / tokens per step, in every phase (1,000 / tokens_per_s); "
        "a decode sequence waits the whole step for its token"
    )
    tokens_per_s: float = Field(description="the whole job's")
    tokens_per_s_device: float = Field(description="tokens_per_s / devices")


class Totals(Frozen):
    flops: float
    bytes: float
    intensity: float
    time_s: float = Field(
        description="the step: busy_s less the hidden collective time, plus the bubble"
    )
    busy_s: float = Field(description="every op's time end to end; op shares are of it")
    compute_bound_s: float = Field(description="time in compute-bound ops")
    memory_bound_s: float = Field(description="time in memory- or network-bound ops")
    compute_share: float = Field(description="fraction of busy_s in compute-bound ops")
    comm_s: float = Field(description="time in collectives")
    comm_exposed_s: float = Field(description="the part not hidden behind compute")
    bubble_s: float = Field(description="pipeline idle time: (pp − 1) microbatch times")
    bound: Bound
    per_token: PerToken
    mfu_bound: float = Field(description="FLOPs / (time × matrix peak): the best MFU possible")
    memory: Memory
    estimate_s: float | None = Field(
        default=None, description="--estimate kernels: the step as the kernels run it"
    )
    efficiency: float | None = Field(
        default=None, description="time_s / estimate_s: the share of the roofline reached"
    )
    mfu_estimate: float | None = Field(
        default=None, description="model FLOPs / (estimate × matrix peak)"
    )


class Report(Frozen):
    """One model on one target for one workload (one phase). In a notebook it shows
    itself as its HTML (or Markdown) report; `modelcost.render(report, fmt)` gives any
    format."""

    def _repr_html_(self) -> str:
        return shown(self, "html")

    def _repr_markdown_(self) -> str:
        return shown(self, "md")

    model: ModelInfo
    hardware: HardwareInfo
    workload: WorkloadInfo
    totals: Totals
    layers: tuple[LayerEntry, ...]
    kinds: tuple[KindEntry, ...]
    kernels: tuple[KernelUse, ...]
    ops: tuple[OpEntry, ...]
    notes: tuple[str, ...] = ()


class ReportSet(Frozen):
    """What `modelcost compile --format json` writes, for one phase or several: the
    reports in the order the phases were asked for."""

    schema_version: int = REPORT_SCHEMA_VERSION
    reports: tuple[Report, ...] = Field(min_length=1)


def saved_reports(path: str | Path) -> tuple[Report, ...] | None:
    """The reports of a file `compile --format json` wrote (`{"schema_version": ...,
    "reports": [...]}`), or None for a file that is not one (a spec, a config.json).
    A SpecError for a saved report of another schema version or one that does not
    validate."""
    path = Path(path)
    if path.suffix != ".json":
        return None
    text = read_text(path)
    try:
        data = json.loads(text)
    except ValueError:
        return None  # not JSON: the spec reader says what it is
    if not (isinstance(data, dict) and "schema_version" in data and "reports" in data):
        return None
    version = data["schema_version"]
    if version != REPORT_SCHEMA_VERSION:
        raise SpecError(f"a report saved with schema_version {version!r}; this modelcost "
                        f"reads {REPORT_SCHEMA_VERSION}", filename=str(path),
                        hint="compile it again with this version")  # fmt: skip
    try:
        return ReportSet.model_validate_json(text).reports
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise SpecError(
            f"not a report modelcost wrote: {where}: {first['msg']}", filename=str(path)
        ) from None
