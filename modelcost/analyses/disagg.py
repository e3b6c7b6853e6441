"""Disaggregated prefill and decode: a pool of prefill instances hands each request's KV
cache to a pool of decode instances, and the serving figures of the two together.

A request is prefilled on one instance of the prefill pool (xP instances of one
layout), its KV cache moves to an instance of the decode pool (yD instances of another
layout) and is decoded there (DistServe, Mooncake, Dynamo, TensorRT-LLM's disaggregated
serving). Every step time is scenario.py's (`Scenario`: the same compiles, the same
engine profile, the same bound and estimate):

- prefill pool: steps of the engine's prefill tokens a step (whole prompts, as `serve`
  batches a static prefill; at most the prompts its memory holds); its requests/s =
  xP × dp × prompts a step / the step. The bound's TTFT is one request's prefill alone.
- the transfer: the request's KV cache at isl (bytes: the cache of one sequence the
  totals report, memory.py's rule) moves shard by shard, each prefill device sending
  its own shard over its own link and each decode device receiving its own, at once:
  time = the link's latency + the larger shard / the link's bandwidth per direction.
  The link: both pools placed in one scale-up domain when all their devices fit it
  (xP·devices + yD·devices ≤ `scaleup_domain`), the scale-up link; otherwise they sit
  on different nodes and the cache crosses the scale-out link. The bound reads the
  link; the estimate a published achieved transfer rate per NIC where one was measured
  on the target's NIC (specs/kernels/disagg.json: Mooncake's Transfer Engine), else the
  link, said so.
- decode pool: serve's decode step at the mean context, at the concurrency chosen as
  `serve` chooses it (the most that fit and meet the TPOT target); its requests/s =
  yD × dp × n / ((osl + the engine's extra steps) × TPOT) (× pp with pipeline stages:
  pp batches of n in flight, serving.Scenario.pipelined_step).
- TTFT = the prefill + the transfer (a request joining the running decode batch waits
  at most one step more, not counted); output tokens/s = min(the two pools'
  requests/s) × osl, per device over the devices of both pools.

`search_disagg` asks NVIDIA AIConfigurator's and Dynamo's question, how many prefill
and decode workers of which shape: each pool's tp from 1, 2, 4, … up to the scale-up
domain, counts xP, yD ≥ 1 with xP·tpP + yD·tpD ≤ a device budget; the most output
tokens/s per device meeting the targets, then the fewest devices.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

import modelcost.language.spec as ir
from modelcost.base.errors import SpecError
from modelcost.base.frozen import Frozen
from modelcost.base.hooks import shown
from modelcost.base.resources import kernel_table
from modelcost.base.settings import (
    DEFAULT_OBJECTIVE,
    DEFAULT_SERVE_ESTIMATE,
    EstimateMode,
    Objective,
    estimate_mode,
)
from modelcost.base.tabular import Tabular
from modelcost.ir.graph import ONE_DEVICE, Parallel, Phase, Workload
from modelcost.roofline.compile import as_hardware, as_spec
from modelcost.targets.hardware import Hardware

from .pools import Pool, Pools
from .scenario import Scenario, fitting
from .serving import largest_meeting
from .serving_records import STATIC, Binds, Bound, Engine, Room, check_request
from .serving_search import check_objective, choice_key, has_experts, search_layouts

if TYPE_CHECKING:
    from modelcost.estimate.calibration import Calibration

Role = Literal["prefill", "decode"]
LinkName = Literal["scale-up", "scale-out"]
MAX_DEVICES = 512  # the device budget `search_disagg` takes at most
# ---- the figures


class Transfer(Frozen):
    """A request's KV cache moved from a prefill instance to a decode instance."""

    bytes: float  # the request's whole cache at isl
    sent_per_device: float  # a prefill device's shard
    received_per_device: float  # a decode device's
    link: LinkName
    rule: str  # why that link
    latency_s: float
    link_bandwidth: float  # bytes/s per device and direction: the bound's
    bandwidth: float  # the estimate's
    bandwidth_source: str
    bound_s: float
    time_s: float  # the headline's (the estimate's, or the bound's under the roofline)


class PoolFigures(Frozen):
    """One pool: its instances, what each runs a step, and the requests/s of the pool."""

    role: Role
    count: int
    layout: str
    devices: int  # of the whole pool
    batch: int  # prompts a prefill step, or sequences a replica decodes
    max_batch: int  # the most that run: the least of the memory's and the engine's
    in_memory: int  # what the memory holds
    engine_cap: int | None  # the engine's cap on sequences an instance runs (None: none)
    binds: Binds  # which of them bounds max_batch
    max_batch_said: str  # max_batch and what binds it, in a line
    step_s: float
    bound_step_s: float
    requests_per_s: float  # the whole pool's
    bound_requests_per_s: float
    memory: float  # bytes per device at the batch
    capacity: float


class Disaggregated(Tabular, Frozen):
    """Serving with prefill and decode on separate pools: both pools, the transfer, the
    headline figures (as `estimate` reads step times) and the bound at the roofline."""

    model: str
    model_title: str  # the spec's title, as compile's header says it
    hardware: str
    hardware_title: str  # the target's title, as compile's header says it
    isl: int
    osl: int
    engine: str
    estimate: EstimateMode
    prefill: PoolFigures
    decode: PoolFigures
    transfer: Transfer
    devices: int
    limited_by: Role  # the slower pool
    ttft_s: float
    tpot_s: float
    latency_s: float
    output_tokens_per_s: float
    total_tokens_per_s: float
    output_tokens_per_s_device: float
    bound: Bound
    meets_targets: bool
    why: str = ""
    tpot_target_s: float | None = None
    ttft_target_s: float | None = None

    def records(self) -> list[dict]:
        return [self.row()]

    def row(self) -> dict:
        """One flat row: each part's figures under its prefix."""
        row = self.model_dump(exclude={"prefill", "decode", "transfer", "bound"})
        for name in ("prefill", "decode", "transfer", "bound"):
            row |= {f"{name}_{k}": v for k, v in getattr(self, name).model_dump().items()}
        return row

    def _repr_html_(self) -> str:
        return shown(self, "html")


def _achieved() -> list[dict]:
    table: list[dict] = kernel_table("disagg")["scaleout"]
    return table


def link_for(hw: Hardware, devices: int) -> tuple[LinkName, str]:
    """The link a transfer crosses when the pools hold `devices` in all, and the rule."""
    if devices <= hw.scaleup_domain:
        return "scale-up", (f"both pools' {devices} devices fit one scale-up domain of "
                            f"{hw.scaleup_domain}: placed in it")  # fmt: skip
    return "scale-out", (f"the pools' {devices} devices exceed one scale-up domain of "
                         f"{hw.scaleup_domain}: on different nodes")  # fmt: skip


def _bandwidth(hw: Hardware, link: LinkName) -> tuple[float, float, float, str]:
    """(latency, the link's bandwidth per device and direction, the achieved one, where
    the achieved one came from)."""
    if link == "scale-up":
        bw = hw.scaleup_per_direction
        return hw.scaleup_latency, bw, bw, "the link: no published scale-up KV transfer rate"
    bw = hw.scaleout_bandwidth
    for e in _achieved():
        if e["nic_bits_per_s"] / 8 == bw:
            per_nic = e["achieved_bytes_per_s"] / e["nics"]
            return hw.scaleout_latency, bw, per_nic, f"{e['cite']}, per NIC"
    return (hw.scaleout_latency, bw, bw,
            "the link: no published KV transfer rate on this NIC")  # fmt: skip


class _Prefill:
    """A prefill instance's figures, each compile done once."""

    def __init__(self, sc: Scenario) -> None:
        self.sc = sc
        self.room = fitting(sc)  # SpecError where one prompt does not fit
        self.batch = min(max(1, sc.profile.prefill_tokens // sc.new), self.room.most)
        self.step = sc.prefill(self.batch)
        self.bound_step = sc.prefill(self.batch, bound=True)
        self.alone = sc.prefill(1, bound=True)  # the bound's TTFT: one request's prefill
        self.ttft = self.step if sc.kernels else self.alone
        per = sc.par.dp * self.batch
        self.rate = per / self.step  # requests/s of one instance
        self.bound_rate = per / self.bound_step
        kv = sc.decode(1, sc.isl).memory  # one request's cache per replica, at isl
        self.shard = kv.kv_cache
        at = sc.decode(self.batch, sc.isl).memory
        self.memory, self.capacity = at.total, at.capacity


class _Decode:
    """A decode instance's figures at concurrency n, each compile done once."""

    def __init__(self, sc: Scenario, n: int, room: Room) -> None:
        self.sc, self.n, self.room = sc, n, room
        self.tpot = sc.tpot(n)
        self.bound_tpot = sc.tpot(n, bound=True)
        per = sc.in_flight * sc.par.dp * n  # pipeline stages: pp batches of n in flight
        self.rate = per / ((sc.osl + sc.extra_steps()) * self.tpot)
        self.bound_rate = per / (sc.osl * self.bound_tpot)
        self.shard = sc.decode(1, sc.isl).memory.kv_cache
        at = sc.decode(n, sc.isl + sc.osl).memory
        # the other batches' caches in flight beside this one's (pipeline stages)
        others = sc.memory(n)[1] - at.kv_cache if sc.in_flight > 1 else 0.0
        self.memory, self.capacity = at.total + others, at.capacity


def _transfer(pre: _Prefill, dec: _Decode, request_bytes: float, devices: int,
              kernels: bool) -> Transfer:  # fmt: skip
    hw = pre.sc.hw
    link, rule = link_for(hw, devices)
    latency, link_bw, bw, source = _bandwidth(hw, link)
    shard = max(pre.shard, dec.shard)
    bound = latency + shard / link_bw
    time = latency + shard / bw if kernels else bound
    return Transfer.trusted(
        bytes=request_bytes, sent_per_device=pre.shard, received_per_device=dec.shard,
        link=link, rule=rule, latency_s=latency, link_bandwidth=link_bw, bandwidth=bw,
        bandwidth_source=source if kernels else "the link (the roofline)", bound_s=bound,
        time_s=time,
    )  # fmt: skip


def request_cache(sc: Scenario) -> float:
    """Bytes of one request's KV cache at isl, the whole model's: the cache the totals
    report for one sequence on one device (memory.py's rule)."""
    w = Workload(Phase.decode, 1, context=sc.isl, parallel=ONE_DEVICE)
    return sc.totals(w).memory.kv_cache


def _decode_pick(sc: Scenario, concurrency: int | None, tpot: float | None) -> tuple[int, Room]:
    """(the concurrency, what the memory and the engine hold): as `serve` picks it, by
    TPOT alone (TTFT does not depend on the decode batch)."""
    room = fitting(sc)
    if concurrency is not None:
        return concurrency, room
    if tpot is None:
        return room.most, room
    best = largest_meeting(room.most, lambda n: sc.tpot(n) <= tpot,
                           lambda n: sc.tpot(n) <= tpot)  # fmt: skip
    return best or 1, room


def _pool(role: Role, count: int, par: Parallel, batch: int, room: Room, step: float,
          bound_step: float, rate: float, bound_rate: float, memory: float,
          capacity: float) -> PoolFigures:  # fmt: skip
    return PoolFigures.trusted(
        role=role, count=count, layout=par.label or "one device", devices=count * par.devices,
        batch=batch, max_batch=room.most, in_memory=room.in_memory, engine_cap=room.cap,
        binds=room.binds, max_batch_said=room.said, step_s=step, bound_step_s=bound_step,
        requests_per_s=count * rate, bound_requests_per_s=count * bound_rate, memory=memory,
        capacity=capacity,
    )  # fmt: skip


def _combine(pre: _Prefill, dec: _Decode, counts: tuple[int, int], request_bytes: float,
             tpot_target: float | None, ttft_target: float | None) -> Disaggregated:  # fmt: skip
    sc_p, sc_d = pre.sc, dec.sc
    xp, yd = counts
    devices = xp * sc_p.par.devices + yd * sc_d.par.devices
    kernels = sc_d.kernels
    t = _transfer(pre, dec, request_bytes, devices, kernels)
    osl, isl = sc_d.osl, sc_d.isl
    p_rate, d_rate = xp * pre.rate, yd * dec.rate
    out = min(p_rate, d_rate) * osl
    b_out = min(xp * pre.bound_rate, yd * dec.bound_rate) * osl
    ttft = pre.ttft + t.time_s
    b_ttft = pre.alone + t.bound_s
    bound = Bound.trusted(
        ttft_s=b_ttft, ttft_worst_s=pre.bound_step + t.bound_s, tpot_s=dec.bound_tpot,
        latency_s=b_ttft + osl * dec.bound_tpot,
        output_tokens_per_s=b_out, total_tokens_per_s=b_out * (isl + osl) / osl,
        output_tokens_per_s_device=b_out / devices,
    )  # fmt: skip
    why = []
    if tpot_target is not None and dec.tpot > tpot_target:
        why.append(f"TPOT is {dec.tpot * 1e3:.2f} ms, over the {tpot_target * 1e3:g} ms target")
    if ttft_target is not None and ttft > ttft_target:
        why.append(f"TTFT is {ttft * 1e3:.1f} ms, over the {ttft_target * 1e3:g} ms target")
    return Disaggregated.trusted(
        model=sc_p.spec.name, model_title=sc_p.spec.title, hardware=sc_p.hw.name,
        hardware_title=sc_p.hw.title, isl=isl, osl=osl, engine=sc_p.engine.label,
        estimate="kernels" if kernels else "roofline",
        prefill=_pool("prefill", xp, sc_p.par, pre.batch, pre.room, pre.step, pre.bound_step,
                      pre.rate, pre.bound_rate, pre.memory, pre.capacity),
        decode=_pool("decode", yd, sc_d.par, dec.n, dec.room, dec.tpot, dec.bound_tpot,
                     dec.rate, dec.bound_rate, dec.memory, dec.capacity),
        transfer=t, devices=devices, limited_by="prefill" if p_rate < d_rate else "decode",
        ttft_s=ttft, tpot_s=dec.tpot, latency_s=ttft + (osl + sc_d.extra_steps()) * dec.tpot,
        output_tokens_per_s=out, total_tokens_per_s=out * (isl + osl) / osl,
        output_tokens_per_s_device=out / devices, bound=bound, meets_targets=not why,
        why="; ".join(why), tpot_target_s=tpot_target, ttft_target_s=ttft_target,
    )  # fmt: skip


def _check_engine(engine: Engine) -> None:
    if engine.budget:
        raise SpecError("disaggregated serving runs no prefill chunk beside the decodes: "
                        "the prefill pool's steps are the engine's prefill tokens",
                        filename="modelcost", hint="leave out --budget")  # fmt: skip


def _scenarios(spec, hw, pools: Pools, isl: int, osl: int, engine: Engine, mode: EstimateMode,
               calibration, moe_imbalance: float | None = None,
               ) -> tuple[Scenario, Scenario]:  # fmt: skip
    # the prefill instance holds a prompt and its first token, the decode one isl + osl
    sc_p = Scenario(spec, hw, pools.prefill.parallel, isl, 1, engine, mode, calibration,
                     moe_imbalance=moe_imbalance)  # fmt: skip
    sc_d = Scenario(spec, hw, pools.decode.parallel, isl, osl, engine, mode, calibration,
                     moe_imbalance=moe_imbalance)  # fmt: skip
    return sc_p, sc_d


def _refused(role: Role, par: Parallel, err: SpecError, pools: Pools) -> SpecError:
    """A pool the model cannot run on, pointed at in the pools as written (when parsed
    from text: the caret under that side of `PREFILL:DECODE`)."""
    message = f"the {role} pool ({par.label or 'one device'}): {err.message}"
    if not pools.text:
        return SpecError(message, filename=err.filename, hint=err.hint)
    prefill, _, decode = pools.text.partition(":")
    start, width = (0, len(prefill)) if role == "prefill" else (len(prefill) + 1, len(decode))
    return SpecError(message, filename=pools.where, line=1, column=start + 1, hint=err.hint,
                     source_line=pools.text, width=width)  # fmt: skip


def serve_disagg(
    spec: ir.Spec | str | Path,
    hw: Hardware | str | Path,
    isl: int,
    osl: int,
    pools: Pools,
    concurrency: int | None = None,
    tpot: float | None = None,
    ttft: float | None = None,
    engine: Engine = STATIC,
    estimate: EstimateMode = DEFAULT_SERVE_ESTIMATE,
    calibration: Calibration | None = None,
    moe_imbalance: float | None = None,
) -> Disaggregated:
    """The serving figures of `isl`/`osl` requests on a prefill pool and a decode pool
    (`concurrency`: sequences per decode replica, else the most that fit and meet
    `tpot`). SpecError for a pool whose layout cannot run the model."""
    check_request(isl, osl, concurrency, tpot, ttft)
    _check_engine(engine)
    spec, hw = as_spec(spec), as_hardware(hw)
    sc_p, sc_d = _scenarios(spec, hw, pools, isl, osl, engine, estimate_mode(estimate),
                            calibration, moe_imbalance)  # fmt: skip
    try:
        pre = _Prefill(sc_p)
    except SpecError as err:
        raise _refused("prefill", sc_p.par, err, pools) from None
    try:
        n, room = _decode_pick(sc_d, concurrency, tpot)
        dec = _Decode(sc_d, n, room)
    except SpecError as err:
        raise _refused("decode", sc_d.par, err, pools) from None
    counts = (pools.prefill.count, pools.decode.count)
    return _combine(pre, dec, counts, request_cache(sc_p), tpot, ttft)


# ---- choosing the pools


class DisaggSearch(Tabular, Frozen):
    """The pool layouts tried (each pair's best counts within the device budget) and
    the one `objective` chose among those meeting the targets (`choice_key`)."""

    model: str
    model_title: str  # the spec's title, as compile's header says it
    hardware: str
    hardware_title: str  # the target's title, as compile's header says it
    isl: int
    osl: int
    devices: int  # the budget
    tried: tuple[Disaggregated, ...]
    refused: tuple[str, ...]
    chosen: Disaggregated | None
    why: str = ""
    objective: Objective = DEFAULT_OBJECTIVE

    def records(self) -> list[dict]:
        return [s.row() | {"chosen": s == self.chosen} for s in self.tried]

    def _repr_html_(self) -> str:
        return shown(self, "html")


def candidate_tps(hw: Hardware) -> list[int]:
    """Each pool's rank counts: 1, 2, 4, … up to the scale-up domain."""
    out, tp = [], 1
    while tp <= hw.scaleup_domain:
        out.append(tp)
        tp *= 2
    return out


def candidate_layouts(spec: ir.Spec, hw: Hardware) -> list[Parallel]:
    """Each pool's layouts, as `serve --search` tries them on 1, 2, 4, … ranks of one
    scale-up domain: tp = ranks, and for a MoE model the experts over all the ranks with
    attention over tp × dp (serving.search_layouts: TensorRT-LLM's TEP and DEP pools among
    them); no pipeline stages."""
    experts = has_experts(spec)
    return [
        par for ranks in candidate_tps(hw) for par in search_layouts(ONE_DEVICE, ranks, experts)
    ]


def _best_counts(pre: _Prefill, dec: _Decode, budget: int, request_bytes: float,
                 ttft: float | None, objective: Objective) -> tuple[int, int] | None:  # fmt: skip
    """The counts (xp, yd) within `budget` devices whose TTFT meets `ttft` with the
    most output tokens/s per device, then the fewest devices (`devices`: the fewest
    devices first); None if none does."""
    tp_p, tp_d = pre.sc.par.devices, dec.sc.par.devices
    hw, kernels = pre.sc.hw, dec.sc.kernels
    # TTFT depends on the counts only through the link (one scale-up domain or not)
    ttfts = {devices <= hw.scaleup_domain: pre.ttft + _transfer(
        pre, dec, request_bytes, devices, kernels).time_s
        for devices in (hw.scaleup_domain, hw.scaleup_domain + 1)}  # fmt: skip
    best: tuple[float, int, int, int] | None = None  # (−per device, devices, xp, yd)
    for xp in range(1, (budget - tp_d) // tp_p + 1):
        for yd in range(1, (budget - xp * tp_p) // tp_d + 1):
            devices = xp * tp_p + yd * tp_d
            if ttft is not None and ttfts[devices <= hw.scaleup_domain] > ttft:
                continue
            per = min(xp * pre.rate, yd * dec.rate) / devices
            key = (devices, -per) if objective == "devices" else (-per, devices)
            if best is None or key < best[:2]:
                best = (*key, xp, yd)
    return None if best is None else (int(best[2]), int(best[3]))


def _pools_alone(work: tuple, devices: int, objective: Objective, tpot: float | None,
                 refused: list[str]) -> tuple[list[_Prefill], list[_Decode], float]:  # fmt: skip
    """Each candidate layout (`work` = spec, hw, isl, osl, engine, estimate mode,
    calibration, imbalance) as one prefill and one decode instance: those that run, a
    request's KV cache, and why the others do not (added to `refused`)."""
    spec, hw, isl, osl, engine, mode, calibration, moe_imbalance = work
    prefills: list[_Prefill] = []
    decodes: list[_Decode] = []
    request_bytes = 0.0
    for par in candidate_layouts(spec, hw):
        if par.devices > devices - 1:
            break
        pools = Pools(prefill=Pool(count=1, parallel=par), decode=Pool(count=1, parallel=par))
        sc_p, sc_d = _scenarios(spec, hw, pools, isl, osl, engine, mode, calibration,
                                moe_imbalance)  # fmt: skip
        try:
            prefills.append(_Prefill(sc_p))
            request_bytes = request_cache(sc_p)
        except SpecError as err:
            refused.append(f"prefill {par.label or 'tp 1'}: {err.message}")
        try:
            n, room = _decode_pick(sc_d, 1 if objective == "latency" else None, tpot)
            decodes.append(_Decode(sc_d, n, room))
        except SpecError as err:
            refused.append(f"decode {par.label or 'tp 1'}: {err.message}")
    return prefills, decodes, request_bytes


def _pairs(prefills: list[_Prefill], decodes: list[_Decode], devices: int,
           request_bytes: float, targets: tuple[float | None, float | None, Objective],
           refused: list[str]) -> list[Disaggregated]:  # fmt: skip
    """Every pair of a prefill and a decode layout at its best counts within `devices`
    (`targets` = tpot, ttft, objective); the pairs over the budget said in one line of
    `refused`."""
    tpot, ttft, objective = targets
    tried: list[Disaggregated] = []
    over: list[str] = []  # pairs whose one instance each is already over the budget
    for pre in prefills:
        for dec in decodes:
            n_p, n_d = pre.sc.par.devices, dec.sc.par.devices
            if n_p + n_d > devices:
                over.append(f"{pre.sc.par.label or 'tp 1'} : {dec.sc.par.label or 'tp 1'}")
                continue
            counts = _best_counts(pre, dec, devices, request_bytes, ttft, objective)
            if counts is None:  # no counts meet TTFT: the smallest pair, and why
                counts = (1, 1)
            tried.append(_combine(pre, dec, counts, request_bytes, tpot, ttft))
    if over:
        refused.append(
            f"{len(over):,} pair{'s' if len(over) > 1 else ''} of pool layouts over "
            f"the budget of {devices} devices (one instance each), e.g. {over[0]}"
        )
    return tried


def search_disagg(
    spec: ir.Spec | str | Path,
    hw: Hardware | str | Path,
    isl: int,
    osl: int,
    devices: int,
    tpot: float | None = None,
    ttft: float | None = None,
    engine: Engine = STATIC,
    estimate: EstimateMode = DEFAULT_SERVE_ESTIMATE,
    calibration: Calibration | None = None,
    moe_imbalance: float | None = None,
    objective: Objective = DEFAULT_OBJECTIVE,
) -> DisaggSearch:
    """Choose the pools: each pool's layout in `candidate_layouts`, counts xP, yD ≥ 1 with
    xP·tpP + yD·tpD ≤ `devices` (at most MAX_DEVICES); for each pair of layouts its
    best counts (`_best_counts`), and the pair `objective` chooses (`choice_key`). The
    decode pool runs the most sequences meeting `tpot`, or one a replica for `latency`
    (the lowest TPOT it can give)."""
    check_request(isl, osl, None, tpot, ttft)
    _check_engine(engine)
    check_objective(objective)
    if not 2 <= devices <= MAX_DEVICES:
        raise SpecError(f"the device budget must be 2 to {MAX_DEVICES:,} (a prefill and a "
                        f"decode device at least), got {devices}", filename="modelcost",
                        hint="--devices N")  # fmt: skip
    spec, hw = as_spec(spec), as_hardware(hw)
    work = (spec, hw, isl, osl, engine, estimate_mode(estimate), calibration, moe_imbalance)
    refused: list[str] = []
    prefills, decodes, request_bytes = _pools_alone(work, devices, objective, tpot, refused)
    tried = _pairs(prefills, decodes, devices, request_bytes, (tpot, ttft, objective), refused)
    if not tried:
        raise SpecError(
            f"no pair of pool layouts runs {spec.name} on {hw.title} within {devices} "
            "devices", filename="modelcost", hint="; ".join(refused) or None,
        )  # fmt: skip
    found = {"model": spec.name, "model_title": spec.title, "hardware": hw.name,
             "hardware_title": hw.title, "isl": isl, "osl": osl,
             "devices": devices, "tried": tuple(tried), "refused": tuple(refused),
             "objective": objective}  # fmt: skip
    meeting = [s for s in tried if s.meets_targets]
    if not meeting:
        return DisaggSearch.trusted(**found, chosen=None,
                                    why="no pair of pool layouts meets the targets")  # fmt: skip
    chosen = min(meeting, key=lambda s: choice_key(objective, s))
    return DisaggSearch.trusted(**found, chosen=chosen)
