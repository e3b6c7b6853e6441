"""Serving curves as benchmark clients measure them: one layout (or each layout a
search tries) under the load of vLLM's and SGLang's `bench_serving` at each of several
concurrencies, simulated step by step (scheduler.run), as the dashboards plot them:
output tokens/s per device against tokens/s per user, with TTFT, TPOT and end-to-end
latency by percentile and the Pareto front over every point.

The load is the clients': `--max-concurrency C` with no request rate (closed loop:
C requests in flight, the next sent the moment one finishes), `--num-prompts N`
requests, and with `--random-range-ratio R` input and output lengths each drawn
uniformly from the whole numbers in [max(⌊R × L⌋, 1), L], as SGLang's random dataset
draws them (`compute_random_lens`, python/sglang/benchmark/datasets/common.py). Both
clients default to 1,000 prompts. A concurrency above what a replica runs at once (its
memory, the engine's cap, the token budget: serving.Room) is what the clients send
anyway: the engine runs what it holds and the rest wait in its queue, their wait in
their TTFT. Concurrency is per data-parallel replica, as `serve` counts it everywhere.

Each point is simulated twice, on the estimate's step times and on the roofline's:
the bound beside the headline, the same schedule at the speed no kernel beats.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import modelcost.language.spec as ir
from modelcost.base.errors import SpecError
from modelcost.base.frozen import Frozen
from modelcost.base.hooks import shown
from modelcost.base.record import replace
from modelcost.base.settings import (
    DEFAULT_PROMPTS,
    DEFAULT_SERVE_ESTIMATE,
    MAX_CURVE_POINTS,
    MAX_REQUESTS,
    EstimateMode,
    estimate_mode,
)
from modelcost.base.tabular import Tabular
from modelcost.ir.graph import ONE_DEVICE, Parallel
from modelcost.roofline.compile import as_hardware, as_spec
from modelcost.targets.hardware import Hardware

from .arrivals import Latencies, ScenarioSteps, flat, latencies, one_batch
from .scenario import Scenario, fitting
from .scheduler import ClosedLoop, cap_note, run
from .serving_records import MAX_SEARCH_TP, STATIC, Engine, Room, check_request
from .serving_search import has_experts, pareto_front, search_layouts

if TYPE_CHECKING:
    from modelcost.estimate.calibration import Calibration


def bench_lengths(full: int, ratio: float, n: int, rng: random.Random) -> tuple[int, ...]:
    """n lengths uniform over the whole numbers in [max(⌊ratio × full⌋, 1), full]
    (SGLang's `compute_random_lens`; ratio 1: every one `full`), drawn as
    lo + ⌊U × (full − lo + 1)⌋ with U from `rng` (the formula written out, so a run does
    not depend on how a Python version draws integers)."""
    lo = max(int(full * ratio), 1)
    return tuple(lo + int(rng.random() * (full - lo + 1)) for _ in range(n))


class BenchLoad(Frozen):
    """What the benchmark client sends: `prompts` requests at each concurrency, input
    and output lengths drawn in [ratio × isl, isl] and [ratio × osl, osl] from `seed`."""

    prompts: int = DEFAULT_PROMPTS
    ratio: float = 1.0
    seed: int = 0

    def lengths(self, isl: int, osl: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """Each request's (input, output) lengths: all the inputs drawn, then all the
        outputs, as `sample_random_requests` draws them."""
        rng = random.Random(self.seed)
        inputs = bench_lengths(isl, self.ratio, self.prompts, rng)
        return inputs, bench_lengths(osl, self.ratio, self.prompts, rng)

    def said(self, isl: int, osl: int) -> str:
        """`1,000 prompts at each concurrency, 1,024 in and 1,024 out` or, drawn,
        `… inputs uniform in [819, 1,024], outputs in [819, 1,024] (seed 0)`."""
        head = f"{self.prompts:,} prompts at each concurrency, "
        if self.ratio == 1:
            return head + f"{isl:,} in, {osl:,} out"
        lo_in, lo_out = max(int(isl * self.ratio), 1), max(int(osl * self.ratio), 1)
        ranges = f"inputs uniform in [{lo_in:,}, {isl:,}], outputs in [{lo_out:,}, {osl:,}]"
        return head + f"{ranges} (ratio {self.ratio:g}, seed {self.seed})"


BENCH_LOAD = BenchLoad()  # the clients' defaults: 1,000 prompts of fixed lengths
CLIENTS = ("closed loop as vLLM's and SGLang's bench_serving run it (--max-concurrency, "
           "no request rate): the next request sent as one finishes")  # fmt: skip


class LoadPoint(Frozen):
    """One concurrency of a curve: its figures on the estimate's step times and the
    bound's, and where it sits (output tokens/s per device; per user, 1 / mean TPOT)."""

    concurrency: int  # requests in flight per replica, the client's
    running: int  # the most a replica runs at once: min(concurrency, its room)
    output_tokens_per_s_device: float
    output_tokens_per_s_user: float | None  # 1 / mean TPOT (none: one-token outputs)
    bound_output_tokens_per_s_device: float
    bound_output_tokens_per_s_user: float | None
    figures: Latencies
    bound: Latencies
    front: bool = False  # on the Pareto front of every point of the answer
    note: str = ""  # when the run stopped at the step cap


class Curve(Frozen):
    """One layout's curve under one engine."""

    layout: str
    devices: int
    room: str  # how many run at once and what binds them (Room.said)
    points: tuple[LoadPoint, ...]


class Curves(Tabular, Frozen):
    """The curves of one request class: one a layout, the Pareto front over every
    point (the most output tokens/s per device for the tokens/s per user), and the
    layouts a search could not run with why."""

    model: str
    model_title: str
    hardware: str
    hardware_title: str
    isl: int  # the longest input (every input, at ratio 1)
    osl: int
    load: BenchLoad
    clients: str  # how the clients send, in words (CLIENTS)
    engine: str  # the engine and its scheduling, as `Engine.label` says it
    cached: int  # prompt tokens a prefix-cache hit saves, of the longest input
    estimate: EstimateMode
    curves: tuple[Curve, ...]
    refused: tuple[str, ...] = ()

    def records(self) -> list[dict]:
        return [self.row(c, p) for c in self.curves for p in c.points]

    def row(self, c: Curve, p: LoadPoint) -> dict:
        """One point as a flat row: the request class, the layout, the point's figures
        (`ttft_p99_s`, …) and the bound's (`bound_…`)."""
        head = {"model": self.model, "hardware": self.hardware, "isl": self.isl,
                "osl": self.osl, "prompts": self.load.prompts, "ratio": self.load.ratio,
                "seed": self.load.seed, "engine": self.engine, "estimate": self.estimate,
                "layout": c.layout, "devices": c.devices}  # fmt: skip
        own = p.model_dump(exclude={"figures", "bound"})
        return head | own | flat(p.figures, "") | flat(p.bound, "bound_")

    def _repr_html_(self) -> str:
        return shown(self, "html")


def _per_user(f: Latencies) -> float | None:
    return 1 / f.tpot.mean if f.tpot is not None else None


def _check(concurrencies: object, load: object) -> None:
    """The API refuses what the flags cannot say, with the same limits."""
    if not isinstance(load, BenchLoad):
        raise SpecError(f"load must be a BenchLoad, got {load!r}", filename="modelcost")
    if not (isinstance(concurrencies, Sequence) and 1 <= len(concurrencies) <= MAX_CURVE_POINTS
            and all(isinstance(c, int) and not isinstance(c, bool) and c > 0
                    for c in concurrencies)):  # fmt: skip
        raise SpecError(f"concurrencies must be 1 to {MAX_CURVE_POINTS} positive whole "
                        f"numbers, got {concurrencies!r}", filename="modelcost")  # fmt: skip
    p, r, s = load.prompts, load.ratio, load.seed
    if not (isinstance(p, int) and not isinstance(p, bool) and 1 <= p <= MAX_REQUESTS):
        raise SpecError(f"prompts must be from 1 to {MAX_REQUESTS:,}, got {p!r}",
                        filename="modelcost")  # fmt: skip
    if not (isinstance(r, int | float) and not isinstance(r, bool) and 0 <= r <= 1):
        raise SpecError(f"the length ratio must be from 0 to 1, got {r!r}",
                        filename="modelcost")  # fmt: skip
    if not (isinstance(s, int) and not isinstance(s, bool) and 0 <= s < 2**63):
        raise SpecError(f"seed must be a whole number from 0, got {s!r}", filename="modelcost")


def _layout_curve(
    spec: ir.Spec,
    hw: Hardware,
    par: Parallel,
    isl: int,
    osl: int,
    concurrencies: Sequence[int],
    load: BenchLoad,
    engine: Engine,
    mode: EstimateMode,
    calibration: Calibration | None,
    moe_imbalance: float | None,
) -> tuple[Curve, bool]:
    """One layout's curve and whether it was timed by the kernels' estimate; SpecError
    when not one sequence fits or the model has no step of prompts beside decodes."""
    one_batch(par, "a pipeline's figures: serve it at one concurrency without --prompts or "
              "--length-ratio")  # fmt: skip
    memory = Scenario(spec, hw, par, isl, osl, replace(engine, budget=0))
    room: Room = fitting(memory)  # the longest request's room: every shorter one fits
    most = min(room.most, engine.budget) if engine.budget else room.most
    sc = Scenario(spec, hw, par, isl, osl, engine, mode, calibration,
                  moe_imbalance=moe_imbalance)  # fmt: skip
    try:  # a step carries prompts beside its decodes: the model must have such a step
        sc.decode(1, isl + osl, sc.new, timed=True)
    except SpecError as err:
        raise SpecError(f"a curve runs prompts beside decodes in one step, and {err.message}",
                        filename="modelcost", hint="serve it at one concurrency, without "
                        "--prompts or --length-ratio (static batches)") from None  # fmt: skip
    inputs, outputs = load.lengths(isl, osl)
    news = tuple(i - math.floor(i * engine.prefix_hit) for i in inputs)
    points = []
    for c in concurrencies:
        running = min(c, most)
        figures, notes = [], []
        for bound in (False, True) if sc.kernels else (False,):
            trace = run(ClosedLoop(requests=load.prompts, clients=c), inputs, news, outputs,
                        ScenarioSteps(sc, bound), running, engine.budget)  # fmt: skip
            figures.append(latencies(trace, outputs, par.dp))
            notes.append(cap_note(trace, figures[-1].finished, load.prompts))
        head, bound_figures = figures[0], figures[-1]
        note = notes[0] or (f"the bound's run {notes[-1]}" if notes[-1] else "")
        points.append(LoadPoint.trusted(
            concurrency=c, running=running,
            output_tokens_per_s_device=head.output_tokens_per_s / par.devices,
            output_tokens_per_s_user=_per_user(head),
            bound_output_tokens_per_s_device=bound_figures.output_tokens_per_s / par.devices,
            bound_output_tokens_per_s_user=_per_user(bound_figures),
            figures=head, bound=bound_figures, note=note,
        ))  # fmt: skip
    curve = Curve.trusted(layout=par.label or "tp 1", devices=par.devices, room=room.said,
                          points=tuple(points))  # fmt: skip
    return curve, sc.kernels


def _on_front(done: list[Curve]) -> tuple[Curve, ...]:
    """The curves with each point marked where it is on the Pareto front of them all
    (throughput per device against tokens/s per user)."""
    every = [(p.output_tokens_per_s_device, p.output_tokens_per_s_user or 0.0)
             for c in done for p in c.points]  # fmt: skip
    front = iter(pareto_front(every))
    return tuple(c.model_copy(update={"points": tuple(p.model_copy(update={"front": next(front)})
                                                      for p in c.points)})
                 for c in done)  # fmt: skip


def curves(
    spec: ir.Spec | str | Path,
    hw: Hardware | str | Path,
    isl: int,
    osl: int,
    concurrencies: Sequence[int],
    load: BenchLoad = BENCH_LOAD,
    layouts: Sequence[Parallel] = (ONE_DEVICE,),
    engine: Engine = STATIC,
    estimate: EstimateMode = DEFAULT_SERVE_ESTIMATE,
    calibration: Calibration | None = None,
    moe_imbalance: float | None = None,
    search: bool = False,
) -> Curves:
    """The curve of each of `layouts` (with `search`, of each layout `serve --search`
    would try from the first: 1, 2, 4, … ranks up to the scale-up domain, see
    `searched`) at each of `concurrencies` requests in flight per replica, under the
    benchmark client's `load`, with `engine`'s scheduling (its token budget: chunked
    prefill interleaving arriving prompts with the decodes; none: whole prompts). A
    layout that cannot run is an error when given alone, and a line in `refused` in a
    search (an error when none runs)."""
    check_request(isl, osl, None, None, None)
    _check(concurrencies, load)
    spec, hw = as_spec(spec), as_hardware(hw)
    mode = estimate_mode(estimate, calibration)
    tried = searched(spec, hw, layouts[0]) if search else list(layouts)
    done: list[Curve] = []
    refused: list[str] = []
    kernels = False
    for par in tried:
        try:
            curve, kernels = _layout_curve(spec, hw, par, isl, osl, concurrencies, load,
                                           engine, mode, calibration, moe_imbalance)  # fmt: skip
        except SpecError as err:
            if len(tried) == 1:
                raise
            refused.append(f"{par.label or 'tp 1'}: {err.message}")
            continue
        done.append(curve)
    if not done:
        raise SpecError(f"no layout tried runs {spec.name} on {hw.title} with {isl:,} + "
                        f"{osl:,}-token requests", filename="modelcost",
                        hint="; ".join(refused))  # fmt: skip
    probe = Scenario(spec, hw, tried[0], isl, osl, engine)
    return Curves.trusted(
        model=spec.name,
        model_title=spec.title,
        hardware=hw.name,
        hardware_title=hw.title,
        isl=isl,
        osl=osl,
        load=load,
        clients=CLIENTS,
        engine=engine.label,
        cached=probe.cached,
        estimate="kernels" if kernels else "roofline",
        curves=_on_front(done),
        refused=tuple(refused),
    )


def searched(spec: ir.Spec, hw: Hardware, base: Parallel) -> list[Parallel]:
    """The layouts a curve search tries: `serve --search`'s on 1, 2, 4, … ranks up to
    the scale-up domain (serving.search_layouts: tp alone; for a MoE model the experts
    over the ranks with attention over tp × dp; where tp fills the domain, that tp in
    2 and 4 pipeline stages, which a curve does not run and says so)."""
    experts, out, ranks = has_experts(spec), [], 1
    top = min(MAX_SEARCH_TP, hw.scaleup_domain)
    while ranks <= top:
        out += search_layouts(base, ranks, experts, base.pp == 1 and ranks == top)
        ranks *= 2
    return out
