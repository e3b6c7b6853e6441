"""The training question: on N devices, at a global batch and a sequence length, which
layout runs a step fastest, and what it does.

The layouts are the ones Megatron-LM's recipes choose among: tensor parallelism within
the scale-up domain (with sequence parallelism), context parallelism, pipeline stages
(plain and interleaved), data-parallel replicas with the distributed optimizer (ZeRO 1)
and, for a MoE model, expert parallelism taken from them; a micro-batch size, from which
the gradient accumulation follows (global batch = micro-batch × dp × microbatches, as
Megatron names them). A layout that does not fit a device is tried again with full
recomputation and with ZeRO 3 (FSDP), the faster of those that fit kept. Each is priced
by the pipeline `compile` runs (compile_totals): the same figures its report gives, so
`compile` with the layout's flags reproduces a row. The layouts are ranked by tokens/s
per device: the kernel-aware estimate's (the default, as `serve` plans), or with
`estimate="roofline"` the bound's.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

import modelcost.language.spec as ir
from modelcost.base.errors import SpecError
from modelcost.base.frozen import Frozen
from modelcost.base.record import replace
from modelcost.base.settings import DEFAULT_SERVE_ESTIMATE, TRAIN_MICRO_BATCHES, EstimateMode
from modelcost.base.tabular import Tabular
from modelcost.estimate.costing import costing
from modelcost.ir.graph import Grads, Overlap, Parallel, Phase, Workload
from modelcost.ir.report import Totals
from modelcost.lowering.stages import layer_count, splits
from modelcost.roofline.compile import as_hardware, as_spec, compile_totals
from modelcost.targets.hardware import Hardware

from .executors import Executor, in_order
from .serving_search import has_experts

TP = (1, 2, 4, 8, 16, 32, 64)  # tried up to the scale-up domain (Megatron keeps tp there)
CP = (1, 2, 4, 8)
PP = (1, 2, 4, 8, 16, 32, 64)
VPP = (2, 3, 4, 5, 6, 8, 10)  # virtual stages tried where the layers split into them
EP = (1, 2, 4, 8, 16, 32, 64)
MAX_DEVICES = 2**20
# what a layout that does not fit is tried again with, in order: full recomputation
# (Korthikanti et al. 2022), ZeRO 3 (FSDP), both
FALLBACKS = ({"recompute": "full"}, {"zero": 3}, {"zero": 3, "recompute": "full"})


class TrainingLayout(Frozen):
    """One layout that fits, and what a step does on it."""

    layout: str  # Parallel.label: the flags `compile` reproduces it with
    devices: int
    tp: int
    cp: int
    pp: int
    vpp: int
    dp: int
    ep: int
    micro_batch: int  # sequences a microbatch, per replica
    microbatches: int  # per replica and step: the gradient accumulation
    zero: int
    recompute: str
    step_s: float  # the roofline's
    tokens_per_s_device: float
    mfu: float
    estimate_s: float | None
    estimate_tokens_per_s_device: float | None
    mfu_estimate: float | None
    memory_bytes: float  # held per device
    capacity_bytes: float
    bubble_s: float
    comm_exposed_s: float

    @property
    def rank(self) -> float:
        """What the search ranks by: the estimate's tokens/s per device where it ran."""
        est = self.estimate_tokens_per_s_device
        return self.tokens_per_s_device if est is None else est


class TrainingSearch(Tabular, Frozen):
    """The layouts of `devices` that fit, best first (by tokens/s per device), and how
    many were tried and why the others were not kept. As rows: one per layout kept."""

    model: str
    model_title: str
    hardware: str
    hardware_title: str
    devices: int
    global_batch: int
    seq: int
    estimated: bool
    tried: int
    layouts: tuple[TrainingLayout, ...]  # every layout that fits, best first
    refused: tuple[tuple[str, int], ...]  # (why, how many layouts), most first
    too_big: int  # layouts that fit no device even with the fallbacks

    @property
    def chosen(self) -> TrainingLayout | None:
        return self.layouts[0] if self.layouts else None

    def records(self) -> list[dict]:
        return [r.model_dump() for r in self.layouts]


def _powers(values: tuple[int, ...], limit: int) -> tuple[int, ...]:
    return tuple(v for v in values if v <= limit)


def candidate_layouts(
    devices: int,
    global_batch: int,
    scaleup: int,
    micro_batches: tuple[int, ...],
    experts: bool,
    overlap: Overlap,
    layers: int | None = None,
    grads: Grads = "fp32",
) -> Iterator[Parallel]:
    """Every layout of exactly `devices` = tp × cp × pp × dp the search tries, before
    validation: tp within the scale-up domain (sequence parallel where tp > 1), the
    micro-batch sizes given, dp dividing the global batch into whole microbatches,
    virtual stages where pp > 2 (pp > 1 with overlap megatron, its p2p overlap) and the
    microbatches are a multiple of pp (Megatron-LM's interleaved schedule), pp and vpp
    into which the model's `layers` split (at most
    one stage a layer; stages.splits: every count when None), ZeRO 1 over dp > 1 (the
    distributed optimizer), and for a MoE model ep from the dp ranks."""
    for tp in _powers(TP, min(scaleup, devices)):
        for cp in _powers(CP, devices // tp):
            for pp in _powers(PP, min(devices // (tp * cp), layers or devices)):
                ranks = tp * cp * pp
                if devices % ranks:
                    continue
                dp = devices // ranks
                for mbs in micro_batches:
                    if global_batch % (dp * mbs):
                        continue
                    m = global_batch // (dp * mbs)
                    vpps = [1]
                    if pp > (1 if overlap == "megatron" else 2) and m % pp == 0:
                        vpps += [v for v in VPP if m * v <= 4096
                                 and (layers is None or splits(layers, pp, v))]  # fmt: skip
                    eps = [e for e in _powers(EP, dp) if dp % e == 0] if experts else [1]
                    for vpp in vpps:
                        for ep in eps:
                            yield Parallel(tp=tp, sp=tp > 1, cp=cp, pp=pp, vpp=vpp, dp=dp,
                                           ep=ep, microbatches=m, zero=1 if dp > 1 else 0,
                                           overlap=overlap, grads=grads)  # fmt: skip


def _row(par: Parallel, tot: Totals, global_batch: int) -> TrainingLayout:
    est = tot.estimate_s
    per_device = tot.per_token.tokens_per_s_device
    return TrainingLayout(
        layout=par.label,
        devices=par.devices,
        tp=par.tp,
        cp=par.cp,
        pp=par.pp,
        vpp=par.vpp,
        dp=par.dp,
        ep=par.ep,
        micro_batch=global_batch // (par.dp * par.microbatches),
        microbatches=par.microbatches,
        zero=par.zero,
        recompute=par.recompute,
        step_s=tot.time_s,
        tokens_per_s_device=per_device,
        mfu=tot.mfu_bound,
        estimate_s=est,
        estimate_tokens_per_s_device=None if est is None else per_device * tot.time_s / est,
        mfu_estimate=tot.mfu_estimate,
        memory_bytes=tot.memory.total,
        capacity_bytes=tot.memory.capacity,
        bubble_s=tot.bubble_s,
        comm_exposed_s=tot.comm_exposed_s,
    )


def _price(work: tuple, layouts: list[Parallel]) -> list[TrainingLayout | str | None]:
    """Each layout's row (the fastest of it and its fallbacks that fits), None where
    none fits, or why it cannot run (a task of the search)."""
    spec, hw, global_batch, seq, how = work
    out: list[TrainingLayout | str | None] = []
    for par in layouts:
        try:
            best: TrainingLayout | None = None
            for change in ({}, *FALLBACKS):
                if "zero" in change and par.dp == 1:
                    continue
                tried = replace(par, **change)
                w = Workload(Phase.train, global_batch, seq, parallel=tried)
                _, tot = compile_totals(spec, hw, w, how)
                if tot.memory.fits:
                    row = _row(tried, tot, global_batch)
                    if best is None or row.rank > best.rank:
                        best = row
                    if not change:  # fits as it is: a fallback only adds work
                        break
            out.append(best)
        except SpecError as err:
            out.append(err.message)
    return out


def _reason(message: str) -> str:
    """A refusal with its figures as N, so alike refusals count together."""
    said = message.removeprefix("modelcost: error: ")
    return re.sub(r"`[^`]*`|\d[\d,]*", lambda m: m[0] if m[0][0] == "`" else "N", said)


def search_training(
    spec: ir.Spec | str | Path,
    hw: Hardware | str | Path,
    devices: int,
    global_batch: int,
    seq: int,
    micro_batches: tuple[int, ...] = TRAIN_MICRO_BATCHES,
    estimate: EstimateMode = DEFAULT_SERVE_ESTIMATE,
    overlap: Overlap = "none",
    jobs: int = 1,
    executor: Executor = "local",
    address: str | None = None,
    grads: Grads = "fp32",
) -> TrainingSearch:
    """Try every layout of `devices` (`candidate_layouts`) for a step of `global_batch`
    sequences of `seq` tokens, and keep those that fit, best first. `overlap` as
    compile takes it: `none` (the default) counts every collective exposed; `megatron`
    hides those Megatron-Core runs beside compute in Megatron-Bridge's recipes
    (overlap_grad_reduce, overlap_param_gather, tp_comm_overlap, overlap_p2p_comm, ring
    attention's exchange); `full` hides them all as far as the compute lasts. `grads`:
    the gradients' dtype (graph.Parallel.grads). The layouts are priced by `jobs`
    worker processes or as Ray tasks (`executor`, `address`: executors.py), in order."""
    _check_search(devices, global_batch, seq, micro_batches)
    spec, hw = as_spec(spec), as_hardware(hw)
    layouts = list(candidate_layouts(devices, global_batch, hw.scaleup_domain,
                                     tuple(sorted(set(micro_batches))), has_experts(spec),
                                     overlap, layer_count(spec), grads))  # fmt: skip
    if not layouts:
        raise SpecError(
            f"no layout of {devices:,} devices splits a global batch of {global_batch:,} "
            "into whole microbatches",
            filename="modelcost",
            hint="the global batch must be a multiple of dp × --micro-batch for some "
            "dp dividing --devices",
        )
    how = costing(estimate=estimate)
    work = (spec, hw, global_batch, seq, how)
    chunks = [layouts[i : i + 64] for i in range(0, len(layouts), 64)]
    rows, refused, too_big = _tally(in_order(_price, work, chunks, jobs, executor, address))
    return TrainingSearch(
        model=spec.name,
        model_title=spec.title,
        hardware=hw.name,
        hardware_title=hw.title,
        devices=devices,
        global_batch=global_batch,
        seq=seq,
        estimated=how.estimated,
        tried=len(layouts),
        layouts=rows,
        refused=refused,
        too_big=too_big,
    )


def _check_search(devices: int, global_batch: int, seq: int,
                  micro_batches: tuple[int, ...]) -> None:  # fmt: skip
    if not 1 <= devices <= MAX_DEVICES:
        raise SpecError(f"--devices must be from 1 to {MAX_DEVICES:,}, got {devices:,}",
                        filename="modelcost")  # fmt: skip
    if global_batch < 1 or seq < 1 or not micro_batches or min(micro_batches) < 1:
        raise SpecError("--global-batch, --seq and --micro-batch must be positive",
                        filename="modelcost")  # fmt: skip


def _tally(answers: Iterable[TrainingLayout | str | None],
           ) -> tuple[tuple[TrainingLayout, ...], tuple[tuple[str, int], ...], int]:  # fmt: skip
    """The layouts that fit, best first; why the others were refused, with how many
    each reason refused (the most first); and how many do not fit."""
    rows: list[TrainingLayout] = []
    refused: Counter[str] = Counter()
    too_big = 0
    for answer in answers:
        if isinstance(answer, TrainingLayout):
            rows.append(answer)
        elif answer is None:
            too_big += 1
        else:
            refused[_reason(answer)] += 1
    rows.sort(key=lambda r: (-r.rank, r.memory_bytes, r.layout))
    return tuple(rows), tuple(sorted(refused.items(), key=lambda kv: (-kv[1], kv[0]))), too_big
