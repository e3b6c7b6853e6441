"""The pipeline in one call: spec → lower → cost → roofline → report model."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import modelcost.spec as ir

from .bulk import in_bulk
from .cost import cost
from .costing import DEFAULT_COSTING, Costing, costing
from .errors import SpecError
from .graph import OpGraph, Parallel, Phase, Workload, settled
from .hardware import Hardware, load_hardware
from .lower import lower
from .params import ParamCount
from .params import count_params as parameters
from .perfmodel import Conventions
from .record import Record, replace
from .report import Report, Totals
from .resolve import load_spec
from .roofline import StageStep, build_report, estimated, fits, served_stage, time_nodes, totals
from .settings import DEFAULT_ESTIMATE, DEFAULT_PEAK, EstimateMode, PeakMode

if TYPE_CHECKING:
    from .calibration import Calibration


@in_bulk
def compile_report(
    spec: ir.Spec | str | Path,
    hw: Hardware | str | Path,
    workload: Workload | Phase | str = Phase.prefill,
    conventions: Conventions | str = Conventions.modelcost,
    peak: PeakMode = DEFAULT_PEAK,
    bandwidth: PeakMode = DEFAULT_PEAK,
    only: frozenset[str] | None = None,
    advise: bool = True,
    calibration: Calibration | None = None,
    estimate: EstimateMode = DEFAULT_ESTIMATE,
    how: Costing | None = None,
) -> Report:
    """The report of `spec` (a Spec, or the path of a `.model` file) on `hw` (a Hardware,
    a shipped target's name such as `"h100"`, or a `.hw` file) for `workload` (a
    Workload, or a phase name for its defaults: `"decode"` is batch 1, context 2048).
    With `advise`, a model that does not fit is told what would make it fit
    (fitting_advice);
    `estimate="kernels"` adds the kernel-aware estimate beside the roofline; a
    `calibration` (calibration.py) applies a machine's measurements on top of it (and
    implies the estimate). `how`, a Costing, says all of these at once (in their place)."""
    spec, hw = as_spec(spec), as_hardware(hw)
    if not isinstance(workload, Workload):
        workload = Workload(Phase(workload))
    if how is None:
        how = costing(conventions, peak, bandwidth, estimate, calibration)
    workload = settled(workload, how.conventions)
    graph = lower(spec, workload)
    advice = None if not advise or fits(graph, hw) else fitting_advice(spec, hw, workload)
    return build_report(cost(graph, how.conventions), hw, how, only, advice)


def as_spec(spec: ir.Spec | str | Path) -> ir.Spec:
    """The one rule of every entry point of the API: a Spec, or the path of a `.model`
    file (its errors are SpecErrors, as on the command line)."""
    if isinstance(spec, ir.Spec):
        return spec
    if isinstance(spec, str | Path):
        return load_spec(spec)
    raise TypeError(f"expected a Spec or the path of a .model file, got {type(spec).__name__}")


def as_hardware(hw: Hardware | str | Path) -> Hardware:
    """A Hardware, a shipped target's name (`"h100"`) or the path of a `.hw` file."""
    if isinstance(hw, Hardware):
        return hw
    if isinstance(hw, str | Path):
        return load_hardware(hw)
    raise TypeError(f"expected a Hardware, a target's name or a .hw path, got {type(hw).__name__}")


def count_params(spec: ir.Spec | str | Path) -> ParamCount:
    """The model's parameters (params.count_params) of a Spec or a `.model` path."""
    return parameters(as_spec(spec))


@in_bulk
def compile_totals(
    spec: ir.Spec, hw: Hardware, workload: Workload, how: Costing = DEFAULT_COSTING
) -> tuple[OpGraph, Totals]:
    """The same pipeline as `compile_report`, stopping at the totals: what a sweep row
    or a serving figure reads, without the report's per-op, layer and kind entries
    (the totals are the very ones `compile_report` puts in its report, the kernels'
    estimate among them with `how.kernels` or a calibration)."""
    costed = cost(lower(spec, settled(workload, how.conventions)), how.conventions)
    times = time_nodes(costed, hw, how.peak, how.bandwidth)
    tot = totals(costed, times, hw, how.peak)
    if how.estimated:
        tot = estimated(costed, times, tot, hw, how.calibration, how.engine, how.moe_imbalance)
    return costed.graph, tot


def compile_stage(
    spec: ir.Spec, hw: Hardware, workload: Workload, how: Costing = DEFAULT_COSTING
) -> StageStep:
    """The same pipeline as `compile_totals`, stopping at the report's pipeline stage
    split into its own work and its p2p receive (roofline.served_stage): what a served
    decode pipeline's TPOT is composed from."""
    costed = cost(lower(spec, settled(workload, how.conventions)), how.conventions)
    times = time_nodes(costed, hw, how.peak, how.bandwidth)
    return served_stage(costed, times, hw, how)


MAX_TP = 64
MAX_MICROBATCH_TRIES = 4  # more microbatches: m·2, m·4, m·8, m·16 at most


class Lever(Record, frozen=True):
    """One layout option the advice may pull: the Parallel field it sets and the values
    it tries, the weakest first (the advice names the first that fits)."""

    field: str
    values: tuple[int | str | bool, ...]

    def flag(self, value: int | str | bool) -> str:
        """The flag as the user types it: `--zero 3`, `--sp`."""
        return f"--{self.field}" if value is True else f"--{self.field} {value}"


def _levers(workload: Workload) -> list[Lever]:
    """The options not yet pulled that lower a device's memory, in the order the advice
    tries them: ZeRO's stages over the data-parallel ranks (training, more than one
    copy of the weights), full recomputation (training), sequence parallelism (tp > 1),
    more microbatches (training: fewer sequences alive at once, 1F1B keeping min(m, pp)
    of them), then a larger tensor-parallel size (doubling, up to MAX_TP)."""
    par, train = workload.parallel, workload.phase is Phase.train
    levers: list[Lever] = []
    if train and par.weight_copies > 1 and par.zero < 3:
        levers.append(Lever("zero", tuple(range(par.zero + 1, 4))))
    if train and par.recompute != "full":
        levers.append(Lever("recompute", ("full",)))
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
    return levers


def _holds(spec: ir.Spec, hw: Hardware, workload: Workload, par: Parallel, **changes) -> bool:
    """Whether a device of `par` with `changes` holds the workload (False for a layout
    that cannot be: folded experts that a larger tp no longer divides, heads or widths
    that do not split this way, a batch that does not)."""
    try:
        layout = replace(par, **changes)
        return fits(lower(spec, replace(workload, parallel=layout)), hw)
    except (SpecError, ValueError):
        return False


def _fits_with(flags: list[str], given: Parallel, layout: Parallel) -> str:
    """`it fits with --zero 3 --sp (tp 8, dp 2 as given)`: the flags, and what of the
    given layout stays as it is."""
    changed = set(layout.label.split(", ")) - set(given.label.split(", "))
    rest = ", ".join(p for p in layout.label.split(", ") if p and p not in changed)
    return f"it fits with {' '.join(flags)}" + (f" ({rest} as given)" if rest else "")


def fitting_advice(spec: ir.Spec, hw: Hardware, workload: Workload) -> str:
    """What would make a device hold the workload, given the options already set: each
    lever not yet pulled (`_levers`), in order and alone, its weakest setting that fits
    named; else the levers' strongest settings together, added in order (a larger tp
    last) until it fits, then each dropped again that it fits without. Each is checked
    by lowering the changed workload and testing `fits`: at most 3 + 1 + 1 +
    MAX_MICROBATCH_TRIES + 6 lowerings alone, as many together and one a lever dropped
    (a lowering takes milliseconds)."""
    par = workload.parallel
    levers = _levers(workload)
    for lever in levers:
        for value in lever.values:
            if _holds(spec, hw, workload, par, **{lever.field: value}):
                return _fits_with([lever.flag(value)], par, replace(par, **{lever.field: value}))
    # none alone: the strongest settings together, in order, then a larger tp on top
    pulled: dict[str, int | str | bool] = {}
    found = None
    for lever in levers:
        values = lever.values if lever.field == "tp" else lever.values[-1:]
        for value in values:
            if _holds(spec, hw, workload, par, **{**pulled, lever.field: value}):
                found = {**pulled, lever.field: value}
                break
        if found is not None:
            break
        if lever.field != "tp":
            pulled[lever.field] = lever.values[-1]
    if found is None:
        if not pulled:
            return f"no --tp up to {MAX_TP} makes it fit: add --pp stages"
        tried = ", ".join(
            lever.flag(pulled[lever.field]) for lever in levers if lever.field in pulled
        )
        return (
            f"neither {tried} nor --tp up to {MAX_TP} makes it fit, alone or together: "
            "add --pp stages"
        )
    for field in [f for f in found if f != "tp"]:  # what it fits without
        fewer = {k: v for k, v in found.items() if k != field}
        if len(fewer) > 1 and _holds(spec, hw, workload, par, **fewer):
            found = fewer
    flags = [lever.flag(found[lever.field]) for lever in levers if lever.field in found]
    return _fits_with(flags, par, replace(par, **found))
