"""Choosing a serving layout (`search`): the layouts a model can run on a target, each
served, the best by the objective among those meeting the targets, and the Pareto front."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import modelcost.language.spec as ir
from modelcost.base.errors import SpecError
from modelcost.base.frozen import Frozen
from modelcost.base.hooks import shown
from modelcost.base.record import replace
from modelcost.base.settings import (
    DEFAULT_OBJECTIVE,
    DEFAULT_SERVE_ESTIMATE,
    OBJECTIVES,
    EstimateMode,
    Objective,
)
from modelcost.base.tabular import Tabular
from modelcost.ir.graph import ONE_DEVICE, Parallel
from modelcost.kinds.registry import room
from modelcost.kinds.room import Component
from modelcost.language.spec import walk
from modelcost.roofline.compile import as_hardware, as_spec
from modelcost.targets.hardware import Hardware

from .executors import Executor, in_order
from .serving import serve
from .serving_records import (
    MAX_SEARCH_TP,
    SEARCH_PIPELINE_STAGES,
    STATIC,
    CurvePoint,
    Engine,
    Serving,
    check_request,
)
from .speculative import Speculation

if TYPE_CHECKING:
    from modelcost.estimate.calibration import Calibration


class FrontPoint(Frozen):
    """One layout at one concurrency as the search's front reads it: output tokens/s
    per user (1/TPOT) against output tokens/s per device, the chart serving benchmarks
    publish."""

    layout: str
    devices: int
    concurrency: int
    ttft_s: float
    tpot_s: float
    output_tokens_per_s_user: float  # 1 / TPOT
    output_tokens_per_s_device: float
    meets_targets: bool
    front: bool  # on the Pareto front of every point tried
    chosen: bool


class Search(Tabular, Frozen):
    """The layouts tried for a request class, the one `objective` chose among those
    meeting the targets, and every point tried (each layout along its curve and at the
    concurrency serve chose for it) with the Pareto front of output tokens/s per user
    against output tokens/s per device flagged. As rows: one per point."""

    model: str
    model_title: str  # the spec's title, as compile's header says it
    hardware: str
    hardware_title: str  # the target's title, as compile's header says it
    isl: int
    osl: int
    tried: tuple[Serving, ...]
    refused: tuple[str, ...]  # layouts that cannot run the model or hold one sequence
    chosen: Serving | None
    why: str = ""
    objective: Objective = DEFAULT_OBJECTIVE
    points: tuple[FrontPoint, ...] = ()

    def records(self) -> list[dict]:
        return [p.model_dump() for p in self.points]

    def _repr_html_(self) -> str:
        return shown(self, "html")


def pareto_front(points: list[tuple[float, float]]) -> tuple[bool, ...]:
    """Which (x, y) points no other point dominates, both maximised: none other is at
    least as large in both and larger in one (equal points stay on the front together).
    Quadratic: the search's points are bounded (its layouts × their curves)."""
    return tuple(
        not any(a >= x and b >= y and (a > x or b > y) for a, b in points) for x, y in points
    )


def has_experts(spec: ir.Spec) -> bool:
    return any(room(op).component is Component.experts for op, _ in walk(spec.body))


def search_layouts(
    base: Parallel, ranks: int, experts: bool, pipelines: bool = False
) -> list[Parallel]:
    """The layouts of `ranks` = tp × dp ranks a pipeline stage tried: tp = ranks (the
    rest of `base` as given), with `pipelines` (tp alone at the scale-up domain) that
    tp in each of SEARCH_PIPELINE_STAGES stages too (`Scenario.pipelined_step`), and
    for a MoE model the experts over all the ranks, each whole (ep = ranks;
    Megatron-Core's folding, vLLM's --enable-expert-parallel), with attention over
    tp = ranks/dp in dp = 1, 2, 4, … ranks replicas (SGLang's DP attention at dp > 1)."""
    out = [replace(base, tp=ranks, sp=False)]
    if pipelines:
        out += [replace(base, tp=ranks, sp=False, pp=pp) for pp in SEARCH_PIPELINE_STAGES]
    if experts and ranks > 1:
        dps = [2**k for k in range(ranks.bit_length()) if 2**k <= ranks]
        out += [replace(base, tp=ranks // dp, dp=dp, ep=ranks, etp=None, sp=False)
                for dp in dps]  # fmt: skip
    return out


def _named(par: Parallel) -> str:
    return par.label or "tp 1"


def search(
    spec: ir.Spec | str | Path,
    hw: Hardware | str | Path,
    isl: int,
    osl: int,
    tpot: float | None = None,
    ttft: float | None = None,
    engine: Engine = STATIC,
    base: Parallel = ONE_DEVICE,
    estimate: EstimateMode = DEFAULT_SERVE_ESTIMATE,
    calibration: Calibration | None = None,
    speculation: Speculation | None = None,
    objective: Objective = DEFAULT_OBJECTIVE,
    moe_imbalance: float | None = None,
    max_devices: int | None = None,
    jobs: int = 1,
    executor: Executor = "local",
    address: str | None = None,
) -> Search:
    """Serve on 1, 2, 4, … ranks (tp × dp, up to MAX_SEARCH_TP; up to the scale-up
    domain, and beyond it only until a layout meets the targets): on each, tp alone
    and, for a MoE model, the experts over all the ranks with attention over tp × dp
    (`search_layouts`): at most 1 + log2(r) + 1 layouts on r ranks. Of the layouts meeting
    the targets, `objective` chooses: `throughput-per-device` the most output tokens/s
    per device, then the fewest devices; `devices` the fewest devices, then the most
    per device; `latency` the lowest TPOT of any point tried (a layout at a concurrency
    on its curve), then the fewest devices. Where tp alone fills the scale-up domain,
    that tp in 2 and 4 pipeline stages is tried too (SEARCH_PIPELINE_STAGES; a decode
    pipeline as serving engines run it, `Scenario.pipelined_step`).
    Data-parallel replicas of a layout without experts across them are not tried:
    their figures per device and per user are the layout's own. `max_devices`, a device
    budget: layouts of more devices are not tried (said in one line). The layouts of
    one rank count are served at once by `jobs` worker processes or as Ray tasks
    (`executor`, `address`: executors.py), in order."""
    check_request(isl, osl, None, tpot, ttft)
    check_objective(objective)
    spec, hw = as_spec(spec), as_hardware(hw)
    experts = has_experts(spec)
    top = MAX_SEARCH_TP if max_devices is None else min(MAX_SEARCH_TP, max_devices)
    work = (spec, hw, isl, osl, tpot, ttft, engine, estimate, calibration, speculation,
            moe_imbalance)  # fmt: skip
    # pipelines where tp alone fills the scale-up domain (not beside a --pp given, nor
    # with speculative decoding, which is modelled without them)
    piped = base.pp == 1 and speculation is None
    tried, refused = _try_ranks(work, base, experts, piped, top, max_devices,
                                (jobs, executor, address))  # fmt: skip
    what = f"{'layout' if experts else 'tensor-parallel size'} up to {top}"
    if not tried:  # nothing to compare: an error, as `serve` on one layout says it
        said = f"no {what} runs {spec.name} on {hw.title} with {isl:,} + {osl:,}-token requests"
        raise SpecError(said, filename="modelcost", hint=group_reasons(refused))
    pick = _pick(tried, objective, work)
    return Search.trusted(
        model=spec.name, model_title=spec.title, hardware=hw.name, hardware_title=hw.title,
        isl=isl, osl=osl, tried=tuple(s for _, s in tried), refused=tuple(refused),
        objective=objective, chosen=pick, points=_points([s for _, s in tried], pick, tpot, ttft),
        **({"why": f"no {what} meets the targets"} if pick is None else {}),
    )  # fmt: skip


def check_objective(objective: str) -> None:
    """An objective the searches know, else a SpecError naming them."""
    if objective not in OBJECTIVES:
        raise SpecError(f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}",
                        filename="modelcost")  # fmt: skip


def _pick(tried: list[tuple[Parallel, Serving]], objective: Objective,
          work: tuple) -> Serving | None:  # fmt: skip
    """The answer of the layout `objective` chooses (`_choose`), served again where
    `latency` chose another concurrency than its figures were read at; None where no
    layout meets the targets."""
    tpot, ttft = work[4], work[5]
    if (chosen := _choose(tried, objective, tpot, ttft)) is None:
        return None
    (par, served), n = chosen
    if n == served.concurrency:
        return served
    spec, hw, isl, osl, *_, engine, estimate, calibration, speculation, imbalance = work
    return serve(spec, hw, isl, osl, par, n, tpot, ttft, engine, estimate, calibration,
                 speculation, imbalance)  # fmt: skip


def _try_ranks(work: tuple, base: Parallel, experts: bool, piped: bool, top: int,
               max_devices: int | None, run: tuple[int, Executor, str | None],
               ) -> tuple[list[tuple[Parallel, Serving]], list[str]]:  # fmt: skip
    """Each rank count's layouts served (1, 2, 4, … up to `top`; past the scale-up
    domain only until one meets the targets), `run` = (jobs, executor, address): those
    that ran, and why the others did not (those over `max_devices` said together)."""
    hw: Hardware = work[1]
    tried: list[tuple[Parallel, Serving]] = []
    refused: list[str] = []
    over: list[str] = []  # layouts beyond `max_devices`
    ranks = 1
    while ranks <= top:
        if ranks > hw.scaleup_domain and any(s.meets_targets for _, s in tried):
            break
        layouts = []
        for par in search_layouts(base, ranks, experts, piped and ranks == hw.scaleup_domain):
            if max_devices is not None and par.devices > max_devices:
                over.append(_named(par))
            else:
                layouts.append(par)
        answers = in_order(_serve_each, work, [[par] for par in layouts], *run)
        for par, answer in zip(layouts, answers, strict=True):
            if isinstance(answer, Serving):
                tried.append((par, answer))
            else:
                refused.append(f"{_named(par)}: {answer}")
        ranks *= 2
    if over:
        refused.append(f"{' / '.join(over)}: over the budget of {max_devices:,} devices")
    return tried, refused


def _serve_each(work: tuple, layouts: list[Parallel]) -> list[Serving | str]:
    """`serve` on each layout (a task of the search), or why it cannot run."""
    spec, hw, isl, osl, tpot, ttft, engine, estimate, calibration, speculation, imb = work
    out: list[Serving | str] = []
    for par in layouts:
        try:
            out.append(serve(spec, hw, isl, osl, par, None, tpot, ttft, engine, estimate,
                             calibration, speculation, imb))  # fmt: skip
        except SpecError as err:
            out.append(err.message)
    return out


def _meets(tpot_s: float, ttft_s: float, tpot: float | None, ttft: float | None) -> bool:
    return (tpot is None or tpot_s <= tpot) and (ttft is None or ttft_s <= ttft)


class _Figures(Protocol):
    @property
    def output_tokens_per_s_device(self) -> float: ...
    @property
    def devices(self) -> int: ...
    @property
    def tpot_s(self) -> float: ...


def choice_key(objective: Objective, s: _Figures) -> tuple[float, ...]:
    """What `objective` minimises over the answers meeting the targets, aggregated or
    disaggregated alike (`_choose` and disagg.search_disagg): the most
    output tokens/s per device, then the fewest devices; the fewest devices, then the
    most per device; the lowest TPOT, then the fewest devices."""
    if objective == "devices":
        return (s.devices, -s.output_tokens_per_s_device)
    if objective == "latency":
        return (s.tpot_s, s.devices, -s.output_tokens_per_s_device)
    return (-s.output_tokens_per_s_device, s.devices)


def _choose(
    tried: list[tuple[Parallel, Serving]],
    objective: Objective,
    tpot: float | None,
    ttft: float | None,
) -> tuple[tuple[Parallel, Serving], int] | None:
    """The layout and concurrency `objective` picks among those meeting the targets."""
    meeting = [(p, s) for p, s in tried if s.meets_targets]
    if not meeting:
        return None
    if objective != "latency":
        t = min(meeting, key=lambda t: choice_key(objective, t[1]))
        return t, t[1].concurrency
    # latency: the lowest TPOT of any point meeting the targets, on any layout's curve
    # (choice_key's order: TPOT, devices, per device)
    at = [(c.tpot_s, t[1].devices, -c.output_tokens_per_s_device, i, c.concurrency)
          for i, t in enumerate(meeting) for c in _curve_of(t[1])
          if _meets(c.tpot_s, c.ttft_s, tpot, ttft)]  # fmt: skip
    best = min(at)  # the served concurrency meets the targets: never empty
    return meeting[best[3]], best[4]


def _curve_of(s: Serving) -> list[CurvePoint]:
    """A layout's curve with the concurrency serve chose for it among its points."""
    served = CurvePoint.trusted(
        concurrency=s.concurrency,
        ttft_s=s.ttft_s,
        tpot_s=s.tpot_s,
        output_tokens_per_s=s.output_tokens_per_s,
        output_tokens_per_s_device=s.output_tokens_per_s_device,
    )
    by_n = {c.concurrency: c for c in s.curve} | {s.concurrency: served}
    return [by_n[n] for n in sorted(by_n)]


def _points(tried: list[Serving], chosen: Serving | None, tpot, ttft) -> tuple[FrontPoint, ...]:
    """Every point tried, the Pareto front and the chosen one flagged."""
    rows = [(s, c) for s in tried for c in _curve_of(s)]
    front = pareto_front([(1 / c.tpot_s, c.output_tokens_per_s_device) for _, c in rows])
    return tuple(
        FrontPoint.trusted(
            layout=s.layout,
            devices=s.devices,
            concurrency=c.concurrency,
            ttft_s=c.ttft_s,
            tpot_s=c.tpot_s,
            output_tokens_per_s_user=1 / c.tpot_s,
            output_tokens_per_s_device=c.output_tokens_per_s_device,
            meets_targets=_meets(c.tpot_s, c.ttft_s, tpot, ttft),
            front=on,
            chosen=chosen is not None
            and (chosen.layout, chosen.concurrency) == (s.layout, c.concurrency),
        )
        for (s, c), on in zip(rows, front, strict=True)
    )


def group_reasons(refused: list[str] | tuple[str, ...]) -> str:
    """'tp 1: why; tp 2: why; tp 4: other' said as 'tp 1, 2: why; tp 4: other'; other
    layouts listed whole, joined by ' / ', the pipelines after the rest."""
    by_why: dict[str, list[str]] = {}
    for line in refused:
        layout, _, why = line.partition(": ")
        by_why.setdefault(why, []).append(layout)
    out = []
    for why, layouts in by_why.items():
        piped = [layout for layout in layouts if ", pp " in layout]
        rest = [layout for layout in layouts if ", pp " not in layout]
        if rest and all(re.fullmatch(r"tp \d+", layout) for layout in rest):
            rest = [f"tp {', '.join(layout.removeprefix('tp ') for layout in rest)}"]
        out.append(f"{' / '.join(rest + piped)}: {why}")
    return "; ".join(out)
