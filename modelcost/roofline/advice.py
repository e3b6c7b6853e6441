"""Fitting advice: which layout options not yet set would make a device hold the
workload, the cheapest first by step time × devices.

Every candidate layout is first judged by what its pipeline stage holds besides
activations: the weights, caches, gradients and optimizer states its rooms state per
shard (memory.model_facts, from the workload's shape and the stage plan, without
lowering). Those alone are a lower bound on its footprint, so a candidate they do not
leave room for cannot fit and is dropped unlowered; only a candidate they leave room
for is lowered, to count its activations and price its step.
"""

from __future__ import annotations

import modelcost.language.spec as ir
from modelcost.base.errors import SpecError
from modelcost.base.record import Record, replace
from modelcost.estimate.costing import DEFAULT_COSTING, Costing
from modelcost.ir.graph import Parallel, Phase, Workload
from modelcost.lowering.lower import lower
from modelcost.lowering.memory import model_facts
from modelcost.lowering.stages import layer_count, stage
from modelcost.lowering.validate import workload_shape
from modelcost.targets.hardware import Hardware

from .cost import cost
from .footprint import fits, memory_parts
from .step import totals
from .timing import time_nodes


def held_bytes(spec: ir.Spec, workload: Workload) -> float:
    """What one device of the workload's layout holds besides activations: weights, KV
    cache and states, gradients and optimizer states, as lowering sizes them for its
    pipeline stage (memory.model_facts on the stage plan lower() uses), without
    lowering; raises as lowering would where the layout cannot be."""
    shape, _ = workload_shape(spec, workload)
    par = shape.par
    facts = model_facts(spec, shape, stage(spec, par.pp, shape.train, par.vpp).held)
    return sum(memory_parts(facts, 0.0).values())  # the footprint's parts, activations 0


MAX_TP = 64
MAX_PP = 64  # the pipeline stages the advice tries at most (doubling)
MAX_MICROBATCH_TRIES = 4  # more microbatches: m·2, m·4, m·8, m·16 at most


class Lever(Record, frozen=True):
    """One layout option the advice may pull: the Parallel field it sets and the values
    it tries, the weakest first (the advice names the first that fits)."""

    field: str
    values: tuple[int | str | bool, ...]

    def flag(self, value: int | str | bool) -> str:
        """The flag as the user types it: `--zero 3`, `--sp`."""
        return f"--{self.field}" if value is True else f"--{self.field} {value}"


def _levers(workload: Workload, layers: int) -> list[Lever]:
    """The options not yet pulled that lower a device's memory, in the order the
    combined search adds them: ZeRO's stages over the data-parallel ranks (training,
    more than one copy of the weights), full recomputation (training), activation
    offloading (training on one pipeline stage without recomputation: a quarter, half,
    three quarters of the `layers`, or all but the two Transformer Engine needs on the
    device to overlap the copies; tried alone, as Megatron-Core takes it with neither
    recomputation nor a pipeline), sequence parallelism (tp > 1), more microbatches
    (training: fewer sequences alive at once, 1F1B keeping min(m, pp) of them), a
    larger tensor-parallel size (doubling, up to MAX_TP), then more pipeline stages
    (doubling, up to MAX_PP)."""
    par, train = workload.parallel, workload.phase is Phase.train
    levers: list[Lever] = []
    if train and par.weight_copies > 1 and par.zero < 3:
        levers.append(Lever("zero", tuple(range(par.zero + 1, 4))))
    if train and par.recompute != "full":
        levers.append(Lever("recompute", ("full",)))
    offloads = sorted({n for n in (layers // 4, layers // 2, 3 * layers // 4, layers - 2) if n > 0})
    if train and par.pp == 1 and par.recompute == "none" and not par.offload and offloads:
        levers.append(Lever("offload", tuple(offloads)))
    if par.tp > 1 and not par.sp:
        levers.append(Lever("sp", (True,)))
    if train:
        more = [par.microbatches * 2**k for k in range(1, MAX_MICROBATCH_TRIES + 1)]
        fit = tuple(m for m in more if workload.batch % (par.dp * m) == 0)
        if fit:
            levers.append(Lever("microbatches", fit))
    tps = tuple(par.tp * 2**k for k in range(1, MAX_TP.bit_length()) if par.tp * 2**k <= MAX_TP)
    if tps:
        levers.append(Lever("tp", tps))
    pps = tuple(par.pp * 2**k for k in range(1, MAX_PP.bit_length()) if par.pp * 2**k <= MAX_PP)
    if pps:
        levers.append(Lever("pp", pps))
    return levers


SEARCHED = ("tp", "pp")  # levers whose every value the combined search tries
ALONE = ("offload",)  # levers tried alone: Megatron-Core takes them with no other lever


class Fix(Record, frozen=True):
    """A layout that fits: the flags that make it, its step time at the roofline and
    the devices it takes (what it costs: step time × devices)."""

    flags: tuple[str, ...]
    step_s: float
    devices: int

    @property
    def device_seconds(self) -> float:
        return self.step_s * self.devices


def _fix(spec: ir.Spec, hw: Hardware, workload: Workload, how: Costing,
         changes: dict[str, int | str | bool], levers: list[Lever]) -> Fix | None:  # fmt: skip
    """The fix `changes` make to the workload's layout, or None where that layout does
    not fit or cannot be (folded experts that a larger tp no longer divides, heads or
    widths that do not split this way, a batch that does not)."""
    try:
        layout = replace(workload.parallel, **changes)
        changed = replace(workload, parallel=layout)
        if held_bytes(spec, changed) > hw.capacity:  # no room left for any activation
            return None
        graph = lower(spec, changed)
        if not fits(graph, hw):
            return None
        costed = cost(graph, how.conventions)
        tot = totals(costed, time_nodes(costed, hw, how.peak, how.bandwidth), hw, how.peak)
    except (SpecError, ValueError):
        return None
    flags = tuple(lever.flag(changes[lever.field]) for lever in levers if lever.field in changes)
    return Fix(flags, tot.time_s, layout.devices)


def _seconds(t: float) -> str:
    """A step time in the warning's terms: three significant digits, ms below a second."""
    return f"{t * 1e3:.3g} ms" if t < 1 else f"{t:,.3g} s" if t < 1000 else f"{t:,.0f} s"


def _said(fix: Fix, given: Parallel) -> str:
    more = f" on {fix.devices:,} devices" if fix.devices != given.devices else ""
    return f"{' '.join(fix.flags)} (step {_seconds(fix.step_s)}{more})"


def fitting_advice(
    spec: ir.Spec, hw: Hardware, workload: Workload, how: Costing = DEFAULT_COSTING
) -> str:
    """What would make a device hold the workload, given the options already set: each
    lever not yet pulled (`_levers`) alone, at its weakest setting that fits; and,
    unless one of those keeps the device count, the levers' strongest settings
    together, added in order (every tp, then every pp, on top) until it fits, then each
    dropped again that it fits without. A fix is judged first by what its stage holds
    besides activations (`held_bytes`, no lowering): where that alone exceeds the
    device it cannot fit; otherwise the changed workload is lowered and tested with
    `fits`, and priced at the roofline as `how` costs it. The fixes are named cheapest
    first, by step time × devices (a fix that doubles the devices costs that much),
    each with its step time. Where
    nothing tried fits, it says so and what was tried."""
    par = workload.parallel
    how = replace(how, kernels=False, calibration=None)  # the roofline's step time
    levers = _levers(workload, layer_count(spec))
    fixes: list[Fix] = []
    for lever in levers:
        for value in lever.values:
            fix = _fix(spec, hw, workload, how, {lever.field: value}, levers)
            if fix is not None:
                fixes.append(fix)
                break
    if all(f.devices != par.devices for f in fixes):  # the levers together, on as many
        fix = _together(spec, hw, workload, how, levers)  # devices as they can
        if fix is not None and fix.flags not in {f.flags for f in fixes}:
            fixes.append(fix)
    if not fixes:
        return _nothing_fits(levers)
    fixes.sort(key=lambda f: (f.device_seconds, f.step_s))
    rest = f"; the rest as given ({par.label})" if par.label else ""
    if len(fixes) == 1:
        return f"it fits with {_said(fixes[0], par)}{rest}"
    listed = "; ".join(_said(f, par) for f in fixes)
    return f"it fits with, the least step time × devices first: {listed}{rest}"


def _together(spec: ir.Spec, hw: Hardware, workload: Workload, how: Costing,
              levers: list[Lever]) -> Fix | None:  # fmt: skip
    """The levers together (none alone being enough): the strongest settings in
    order, every tp and pp tried on top; then each setting dropped that it fits
    without."""
    pulled: dict[str, int | str | bool] = {}
    found: dict[str, int | str | bool] | None = None
    levers = [lever for lever in levers if lever.field not in ALONE]
    for lever in levers:
        values = lever.values if lever.field in SEARCHED else lever.values[-1:]
        for value in values:
            if _fix(spec, hw, workload, how, {**pulled, lever.field: value}, levers):
                found = {**pulled, lever.field: value}
                break
        if found is not None:
            break
        pulled[lever.field] = lever.values[-1]
    if found is None:
        return None
    for field in [f for f in found if f not in SEARCHED]:  # what it fits without
        fewer = {k: v for k, v in found.items() if k != field}
        if fewer and _fix(spec, hw, workload, how, fewer, levers):
            found = fewer
    return _fix(spec, hw, workload, how, found, levers)


def _nothing_fits(levers: list[Lever]) -> str:
    """What the advice tried, none of which fits."""
    tried = [lever.flag(lever.values[-1]) for lever in levers if lever.field not in SEARCHED]
    tried += [f"--{lever.field} up to {lever.values[-1]}" for lever in levers
              if lever.field in SEARCHED]  # fmt: skip
    if not tried:
        return "nothing the advice tries makes it fit"
    return f"no layout the advice tries makes it fit ({', '.join(tried)}, alone or together)"
