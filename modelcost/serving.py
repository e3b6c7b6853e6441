"""Serving a request mix: the largest concurrency that fits the KV cache, time to first
token, time per output token, request latency and throughput, from compiled totals.

For requests of `isl` input and `osl` output tokens on a layout (each data-parallel
replica serves its own requests), of whose input a `prefix_hit` share is already cached
(a prefix-cache hit: only the rest is prefilled, attending to the cached part too):

- concurrency: sequences per replica whose KV cache, at the full isl + osl, fits the
  memory the engine gives it beside the weights and activations (vLLM: floor((0.9 ×
  capacity − weights − activations) / KV per sequence)), solved (activations are
  those of the batch solved for);
- TPOT: one decode step of the whole batch at the mean context isl + osl/2.

How prefills and decodes share the device is the engine's scheduling:

- `static` (no token budget): a batch of N requests arrives together and is prefilled
  as the engine does it (whole prompts up to its prefill tokens a step, the steps one
  after another), then decoded for osl steps. TTFT is when a request's prefill step
  ends, the mean over the batch (the worst: the whole prefill); output tokens/s =
  N·osl / (the prefill steps + osl × TPOT), per replica.
- `chunked` (a token budget per step, as vLLM's max_num_batched_tokens and
  TensorRT-LLM's max_num_tokens): every step decodes the N running sequences and
  prefills a chunk of c new prompt tokens in the same GEMMs. In the steady state as
  many requests start as finish, N/osl = c/new, so c = ⌈N·new/osl⌉ and N + c must fit
  the budget. TPOT is that mixed step; output tokens/s = N / step per replica; TTFT is
  the ⌈new/c⌉ steps a prompt's chunks take.

The engine (`Engine.name`, engines.py and specs/kernels/engines.json) adds its host
share of a step and any extra decode steps to the headline, keeps back the memory it
does (which sets the concurrency) and caps the sequences an instance runs. The bound is
the roofline at the same concurrency: no host time, no extra step, one request's
prefill as its TTFT and the batch's prefill in one step.

Speculative decoding (`speculation`, speculative.py): each step a draft proposes k
tokens per sequence in k decode passes (a draft model, or the target's own
multi-token-prediction module) and the target verifies them in one decode step of
k + 1 tokens per sequence; a step yields E tokens (the acceptance's), so TPOT = (the
verify + k draft passes) / E, with the engine's host share taken once over the step.
The draft prefills the prompt beside the target (in TTFT); its weights and KV cache
join the memory the concurrency must fit, and the larger of the two steps'
activations. Static batches only: a verify beside a prefill chunk is not modelled.

Every figure is read off `compile_totals` (the totals `compile_report` reports);
targets (`tpot`, `ttft`) pick the largest concurrency meeting them, or say that none
does; `search` tries tensor-parallel sizes and picks the fewest devices that meet them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

import modelcost.spec as ir

from .compile import as_hardware, as_spec, compile_stage, compile_totals
from .costing import DEFAULT_COSTING, costing
from .engines import DEFAULT_ENGINE, ENGINES, Profile, engine_label, profile
from .errors import SpecError
from .executors import Executor, in_order
from .files import read_text
from .frozen import Frozen
from .graph import ONE_DEVICE, Parallel, Phase, Workload
from .hardware import Hardware
from .hooks import shown
from .kinds.registry import room
from .kinds.room import Component
from .record import Record, replace
from .report import Totals
from .roofline import StageStep
from .settings import (
    DEFAULT_OBJECTIVE,
    DEFAULT_SERVE_ESTIMATE,
    MAX_MIX_CLASSES,
    OBJECTIVES,
    SHARES,
    EstimateMode,
    Objective,
    bounded,
    count,
    estimate_mode,
)
from .spec import walk
from .speculative import Settled, Speculation, draft_spec, settle
from .tabular import Tabular

if TYPE_CHECKING:
    from .calibration import Calibration

MAX_SEARCH_TP = 64  # ranks a replica set `search` tries (tp × dp): powers of two up to this
# the pipeline stages `search` tries a tp that fills the scale-up domain in (serving
# engines' pipeline parallelism across nodes: vLLM's --pipeline-parallel-size,
# TensorRT-LLM's PP); at most 2 more layouts, 2 × and 4 × the domain's devices
SEARCH_PIPELINE_STAGES = (2, 4)


Binds = Literal["memory", "engine cap", "token budget"]


class Room(Record, frozen=True):
    """How many sequences a replica runs (`most`) and what binds it: `in_memory`, the
    most whose KV cache fits the memory the engine gives it; `cap`, the engine's own
    limit (None: none); the token budget, when a chunked step cannot hold them all."""

    most: int
    in_memory: int
    cap: int | None
    cap_name: str  # the engine's option, as "vLLM's max_num_seqs"
    budget: int  # tokens a step (0: static batches)
    binds: Binds
    per_sequence: float  # KV bytes of one sequence per device

    @property
    def said(self) -> str:
        """How many run a replica and what binds them, in a line."""
        memory = f"the memory holds {self.in_memory:,}"
        if self.binds == "engine cap":
            why = f"{self.cap_name} caps them; {memory}"
        elif self.binds == "token budget":
            why = f"the {self.budget:,}-token budget holds them with their prompts; {memory}"
        else:
            cap = self.cap
            why = "the memory holds them; " + (
                "the engine has no cap" if cap is None else f"{self.cap_name} is {cap:,}"
            )
        return f"{self.most:,} sequences per replica: {why}"


class Engine(Record, frozen=True):
    """What the serving engine does: `budget` tokens per step for chunked prefill (0:
    static batches), the share of each prompt a prefix cache already holds, which
    engine runs it (`name`, one of engines.ENGINES: its per-step overhead, memory
    fraction and batching defaults, specs/kernels/engines.json) and, when given, the
    `memory_fraction` that replaces the engine's own (read by the engine's rule)."""

    budget: int = 0
    prefix_hit: float = 0.0
    name: str = DEFAULT_ENGINE
    memory_fraction: float | None = None

    def __post_init__(self) -> None:
        hit = self.prefix_hit
        if isinstance(hit, bool) or not isinstance(hit, int | float) or not 0 <= hit < 1:
            raise ValueError(f"prefix_hit must be in [0, 1), got {hit!r}")
        if not _whole(self.budget) or self.budget < 0:
            raise ValueError(f"budget must be a whole number of tokens, got {self.budget!r}")
        if self.name not in ENGINES:
            raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {self.name!r}")
        f = self.memory_fraction
        if f is not None and (isinstance(f, bool) or not isinstance(f, int | float)
                              or not 0 < f <= 1):  # fmt: skip
            raise ValueError(f"memory_fraction must be in (0, 1], got {f!r}")

    @property
    def label(self) -> str:
        what = f"chunked prefill, {self.budget:,} tokens a step" if self.budget else "static"
        return f"{engine_label(self.name)}, {what}" + (
            f", {self.prefix_hit:.0%} prefix hits" if self.prefix_hit else ""
        )


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_request(
    isl: object, osl: object, concurrency: object, tpot: object, ttft: object
) -> None:
    """The API refuses what the command line's flags cannot say, with the same errors."""
    for name, value in (("isl", isl), ("osl", osl), ("concurrency", concurrency)):
        if value is None and name == "concurrency":
            continue
        if not (isinstance(value, int) and not isinstance(value, bool) and value > 0):
            raise SpecError(f"{name} must be a positive whole number, got {value!r}",
                            filename="modelcost")  # fmt: skip
        try:
            bounded(name, value)
        except ValueError as err:  # past the bound on a size
            raise SpecError(str(err), filename="modelcost") from None
    for name, value in (("tpot", tpot), ("ttft", ttft)):
        if value is None:
            continue
        if not (isinstance(value, int | float) and not isinstance(value, bool)
                and math.isfinite(value) and value > 0):  # fmt: skip
            raise SpecError(f"{name} must be a positive, finite number of seconds, got "
                            f"{value!r}", filename="modelcost")  # fmt: skip


STATIC = Engine()


class CurvePoint(Frozen):
    """One concurrency on a layout's latency-throughput curve."""

    concurrency: int
    ttft_s: float
    tpot_s: float
    output_tokens_per_s: float  # the whole job's
    output_tokens_per_s_device: float


class Bound(Frozen):
    """The serving figures at the roofline: what no engine beats (the headline's bound,
    at the same concurrency)."""

    ttft_s: float  # static batches: one prompt's prefill alone, which no request beats
    ttft_worst_s: float  # static batches: the whole batch's prefill, in one step
    tpot_s: float
    latency_s: float
    output_tokens_per_s: float  # the whole job's
    total_tokens_per_s: float
    output_tokens_per_s_device: float


class Speculative(Frozen):
    """Speculative decoding as served: the draft, k, the acceptance a and the tokens E
    a step yields (where they came from), the step (k draft passes and the verify) as
    the headline and as the bound read it, and what the draft holds per device."""

    draft: str  # the draft model's name, or the target's module's (`deepseek_v3.mtp`)
    draft_kind: str  # `mtp` (the target's own module) or `model`
    tokens: int  # k, proposed a step
    acceptance: float  # a, per proposed token
    accepted_per_step: float  # E = (1 − a^(k+1)) / (1 − a), or the published length at k
    source: str  # where a (or E) came from
    step_s: float  # one step of the headline: the verify and k draft passes
    bound_step_s: float
    draft_weights: float  # bytes per device
    draft_kv_per_sequence: float  # bytes per device at isl + osl


class Serving(Tabular, Frozen):
    """The serving figures of one request class on one layout: the headline, as
    `estimate` reads step times (`kernels`: what the kernels that would serve each op
    do; `roofline`: the bound), and `bound`, the same figures at the roofline. `curve`
    holds the headline figures at concurrency 1, 2, 4, … up to the most that fit. In a
    notebook it shows itself as a page with the curve's chart."""

    model: str
    model_title: str  # the spec's title, as compile's header says it
    hardware: str
    hardware_title: str  # the target's title, as compile's header says it
    layout: str
    devices: int
    isl: int
    osl: int
    engine: str  # the scheduling, as `Engine.label` says it
    engine_name: str  # which engine (engines.ENGINES): its overhead, memory, defaults
    engine_reason: str  # what the engine adds to the kernels' times, and what it leaves out
    memory_fraction: float  # the engine's (or --memory-fraction), read by its rule
    cached: int  # prompt tokens a prefix-cache hit saves per request
    chunk: int  # prompt tokens prefilled per step beside the decodes (chunked)
    max_concurrency: int  # sequences per replica that run: the least of the three below
    concurrency_in_memory: int  # the most whose KV cache the memory holds
    engine_cap: int | None  # the engine's cap on sequences a replica runs (None: none)
    engine_cap_said: str  # that cap with its option and source, or why there is none
    concurrency_binds: Binds  # which bounds max_concurrency: memory, engine cap, budget
    concurrency_said: str  # max_concurrency and what binds it, in a line
    concurrency: int  # the one chosen (the largest meeting the targets)
    ttft_s: float  # static batches: the mean over the batch of when a prompt's prefill ends
    ttft_worst_s: float  # the last request's (static: the whole batch's prefill)
    tpot_s: float
    latency_s: float
    output_tokens_per_s: float  # the whole job's
    total_tokens_per_s: float  # input and output
    output_tokens_per_s_device: float
    estimate: EstimateMode  # how the headline figures read a step's time
    bound: Bound  # the same figures at the roofline
    memory: float  # bytes per device at the chosen concurrency, at isl + osl
    capacity: float
    fits: bool
    kv_per_sequence: float  # bytes per device at isl + osl
    meets_targets: bool
    why: str = ""  # when no concurrency meets the targets
    tpot_target_s: float | None = None
    ttft_target_s: float | None = None
    curve: tuple[CurvePoint, ...] = ()
    speculative: Speculative | None = None  # speculative decoding, when on

    def records(self) -> list[dict]:
        return [self.row()]

    def row(self) -> dict:
        """The figures as one flat row: the bound's as `bound_<figure>`, speculative
        decoding's (when on) as `speculative_<figure>`."""
        bound = {f"bound_{k}": v for k, v in self.bound.model_dump().items()}
        row = self.model_dump(exclude={"curve", "bound", "speculative"}) | bound
        if self.speculative is not None:
            row |= {f"speculative_{k}": v for k, v in self.speculative.model_dump().items()}
        return row

    def _repr_html_(self) -> str:
        return shown(self, "html")


class Scenario:
    """One request class on one layout under one engine: each figure as a function of
    the concurrency n (sequences per replica), each compile done once."""

    def __init__(
        self,
        spec,
        hw,
        par: Parallel,
        isl: int,
        osl: int,
        engine: Engine,
        estimate: EstimateMode = "roofline",
        calibration: Calibration | None = None,
        speculation: Speculation | None = None,
        moe_imbalance: float | None = None,
    ) -> None:
        self.spec, self.hw, self.par, self.isl, self.osl = spec, hw, par, isl, osl
        self.engine = engine
        # a figure's step as the scenario plans it; a memory probe reads the roofline alone
        self.how = costing(estimate=estimate, calibration=calibration, engine=engine.name,
                           moe_imbalance=moe_imbalance)  # fmt: skip
        self.kernels = self.how.estimated
        self.profile: Profile = profile(engine.name, hw.name, hw.capacity, par.tp,
                                        engine.memory_fraction)  # fmt: skip
        self.cached = math.floor(isl * engine.prefix_hit)
        self.new = isl - self.cached  # prompt tokens each request prefills
        self.mean = isl + osl // 2
        self._totals: dict[tuple[Workload, bool, bool], Totals] = {}
        self._stages: dict[Workload, StageStep] = {}
        # a decode pipeline keeps one batch of n sequences in flight per stage
        self.in_flight = par.pp
        # speculative decoding: the draft's spec and layout (a draft model keeps no
        # experts to split; the target's module follows its layout), k, a and E
        self.speculation: Settled | None = None
        self.draft: ir.Spec | None = None
        self.draft_par = par
        self.draft_kind = ""  # speculative.DraftKind, when on
        self.queries = 1  # new tokens per sequence in a decode step
        if speculation is not None:
            self.speculation = settle(speculation)
            self.draft = draft_spec(spec, speculation)
            self.draft_par = par if speculation.draft is None else replace(par, ep=1)
            self.draft_kind = speculation.kind
            self.queries = speculation.tokens + 1

    def totals(self, w: Workload, timed: bool = False, draft: bool = False) -> Totals:
        """A workload's totals (of the draft, with `draft`); `timed` (a figure's step
        time, not a memory probe) adds the kernels' estimate when the scenario plans with
        it, its collectives as the engine runs them (its custom all-reduce)."""
        key = (w, timed and self.kernels, draft)
        t = self._totals.get(key)
        if t is None:
            how = self.how if key[1] else DEFAULT_COSTING
            spec = self.draft if draft and self.draft is not None else self.spec
            t = self._totals[key] = compile_totals(spec, self.hw, w, how)[1]
        return t

    def seconds(self, t: Totals, bound: bool, phase: Phase = Phase.decode) -> float:
        """A step's time: the roofline's (the bound), or the kernels' estimate with the
        engine's host time for the step's `phase` (engines.Profile.step)."""
        return self.steps(((t, 1),), bound, phase)

    def steps(self, parts: tuple[tuple[Totals, int], ...], bound: bool,
              phase: Phase = Phase.decode) -> float:  # fmt: skip
        """One engine step made of `parts` (each run its count of times, one after
        another): the roofline's times summed (the bound), or the kernels' estimates
        summed with the engine's host time for the step's `phase` taken once."""
        if bound or not self.kernels or any(t.estimate_s is None for t, _ in parts):
            return sum(t.time_s * times for t, times in parts)
        kernels = sum((t.estimate_s or 0.0) * times for t, times in parts)
        return self.profile.step(kernels, "prefill" if phase == Phase.prefill else "decode")

    def extra_steps(self, bound: bool = False) -> int:
        """Decode steps a request stays beyond its output tokens (the engine's; the
        bound: none)."""
        return 0 if bound or not self.kernels else self.profile.extra_decode_steps

    def _decode_workload(self, n: int, context: int, chunk: int = 0,
                         isl: int | None = None) -> Workload:  # fmt: skip
        cached, new = self.cached, self.new
        if isl is not None and isl != self.isl:  # the chunk's requests are of another length
            cached = math.floor(isl * self.engine.prefix_hit)
            new = isl - cached
        return Workload(Phase.decode, n * self.par.dp, context=context, parallel=self.par,
                        chunk=chunk, prompt=new if chunk else 0,
                        prefix=cached if chunk else 0, queries=self.queries)  # fmt: skip

    def decode(self, n: int, context: int, chunk: int = 0, timed: bool = False,
               isl: int | None = None) -> Totals:  # fmt: skip
        """A decode step of n sequences per replica (speculative: the verify, k + 1
        new tokens per sequence), its prefill chunk from prompts of `isl` input tokens
        (default: the scenario's)."""
        return self.totals(self._decode_workload(n, context, chunk, isl), timed)

    def stage(self, n: int, context: int, chunk: int = 0) -> StageStep:
        """The report's pipeline stage in a decode step of a batch of n sequences: its
        own work and its receive of the previous stage's activations (compile_stage)."""
        w = self._decode_workload(n, context, chunk)
        st = self._stages.get(w)
        if st is None:
            st = self._stages[w] = compile_stage(self.spec, self.hw, w, self.how)
        return st

    def pipelined_step(self, n: int, bound: bool = False) -> float:
        """A decode step of one batch of n sequences across pp pipeline stages, as
        serving engines run a pipeline (vLLM's virtual engines, vllm-project/vllm issue
        11945; TensorRT-LLM's pipeline-parallel in-flight batching): each stage holds
        1/pp of the layers, one batch is in flight per stage, and a batch's step passes
        every stage once, so

            TPOT = pp × s + (pp − 1) × p

        with s the stage's time for the batch (every stage taken as the report's, the
        last: ⌈L/pp⌉ layers and the head, the slowest) and p the p2p send of the
        batch's activations, n × d_model × bytes, over each of the pp − 1 stage
        boundaries (on the link between the stages, network.py's: scale-up inside the
        domain, scale-out across it). No fill and drain: the pp batches keep every
        stage busy, so a replica yields pp × n tokens a TPOT (`output_rate`). The
        estimate adds the engine's host time once a step, as for any decode step."""
        pp = self.par.pp
        st = self.stage(n, self.mean, self.chunk(n))
        if bound or not self.kernels or st.stage_estimate_s is None:
            return pp * st.stage_s + (pp - 1) * st.p2p_s
        kernels = pp * st.stage_estimate_s + (pp - 1) * (st.p2p_estimate_s or 0.0)
        return self.profile.step(kernels, "decode")

    def draft_decode(self, n: int, context: int, timed: bool = False) -> Totals:
        """One draft pass: a decode step of the draft, one token per sequence."""
        w = Workload(Phase.decode, n * self.par.dp, context=context, parallel=self.draft_par)
        return self.totals(w, timed, draft=True)

    def prefill(self, n: int, bound: bool = False) -> float:
        """The prefill of n prompts per replica (and the draft's of them)."""
        w = Workload(Phase.prefill, n * self.par.dp, self.new, parallel=self.par,
                     prefix=self.cached)  # fmt: skip
        parts: tuple[tuple[Totals, int], ...] = ((self.totals(w, timed=True), 1),)
        if self.draft is not None:
            parts += ((self.totals(replace(w, parallel=self.draft_par), True, True), 1),)
        return self.steps(parts, bound, Phase.prefill)

    def prefill_steps(self, n: int, bound: bool = False) -> list[tuple[int, float]]:
        """A static batch of n requests prefilled as the engine does it: (prompts, seconds)
        of each step, whole prompts up to the engine's prefill tokens a step (a longer
        prompt alone, its chunks taken as one prefill)."""
        per = max(1, self.profile.prefill_tokens // self.new)
        full, rest = divmod(n, per)
        steps = [(per, self.prefill(per, bound))] * full
        return steps + ([(rest, self.prefill(rest, bound))] if rest else [])

    def static_ttft(self, n: int) -> tuple[float, float]:
        """(mean, worst) over a static batch of n requests arriving together of the time
        until a request's prefill step ends (the headline's schedule)."""
        done = total = 0.0
        for k, t in self.prefill_steps(n):
            done += t
            total += k * done
        return total / n, done

    def chunk(self, n: int) -> int:
        """Prompt tokens per step that start requests as fast as n decodes finish them."""
        return -(-n * self.new // self.osl) if self.engine.budget else 0

    def step(self, n: int, bound: bool = False) -> float:
        """One decode step at the mean context (speculative: the verify and k draft
        passes; pipeline stages: `pipelined_step`)."""
        if self.par.pp > 1:
            return self.pipelined_step(n, bound)
        parts: tuple[tuple[Totals, int], ...] = (
            (self.decode(n, self.mean, self.chunk(n), timed=True), 1),
        )
        if self.speculation is not None:
            parts += ((self.draft_decode(n, self.mean, timed=True), self.speculation.tokens),)
        return self.steps(parts, bound)

    def tpot(self, n: int, bound: bool = False) -> float:
        """A step over the tokens it yields: one; speculative, E (the acceptance's), and
        for the bound k + 1, every proposed token accepted, which no acceptance beats."""
        s = self.speculation
        per_step = 1.0 if s is None else (s.tokens + 1 if bound else s.accepted_per_step)
        return self.step(n, bound) / per_step

    def memory(self, n: int) -> tuple[float, float, float, float]:
        """(bytes held beside the KV cache, the KV cache, the activations, the capacity)
        per device for n sequences per replica at isl + osl: the target's and the
        draft's weights and caches; the larger of the verify's and a draft pass's
        activations (they run one after the other). With pp pipeline stages n is one
        batch in flight: a device holds the KV cache of its layers for all pp × n
        sequences, and one batch's activations."""
        full = self.isl + self.osl
        m = self.decode(n, full).memory
        held, kv, act = m.weights + m.gradients + m.optimizer_states, m.kv_cache, m.activations
        if self.in_flight > 1:
            kv = self.decode(self.in_flight * n, full).memory.kv_cache
        if self.draft is not None:
            d = self.draft_decode(n, full).memory
            held, kv, act = held + d.weights, kv + d.kv_cache, max(act, d.activations)
        return held, kv, act, m.capacity

    def ttft(self, n: int, bound: bool = False, worst: bool = False) -> float:
        """Time to first token at concurrency n. Static batches: the headline is the mean
        over the batch (`worst`: the last request's) of when its prefill step ends; the
        bound is one request's prefill alone, which no schedule beats (`worst`: the whole
        batch's in one step, which no last request beats)."""
        if not self.engine.budget:
            if bound or not self.kernels:
                return self.prefill(n if worst else 1, bound)
            return self.static_ttft(n)[1 if worst else 0]
        return -(-self.new // self.chunk(n)) * self.tpot(n, bound)

    def output_rate(self, n: int, bound: bool = False) -> float:
        """Output tokens/s of the whole job (pipeline stages: pp batches of n in flight,
        their prefills pipelined as their decodes are)."""
        steps = self.osl + self.extra_steps(bound)
        running = self.in_flight * n * self.par.dp
        if self.engine.budget:
            return running * self.osl / (steps * self.tpot(n, bound))
        if bound or not self.kernels:
            first = self.prefill(n, bound)
        else:
            first = sum(t for _, t in self.prefill_steps(n))
        return running * self.osl / (first + steps * self.tpot(n, bound))

    def most(self) -> Room:
        """The most sequences per replica that run, what binds them (the memory, the
        engine's cap, the token budget) and the KV bytes of one per device; with
        pipeline stages, the most in one batch in flight."""
        per_seq = self.memory(1)[1]  # one sequence per replica (a batch of one a stage)

        def kv_room(n: int) -> float:  # bytes the engine gives the KV cache beside n's
            held, _, activations, capacity = self.memory(n)
            return self.profile.memory.kv_room(capacity, held, activations)

        def fits(n: int) -> bool:
            return self.memory(n)[1] <= kv_room(n)

        def room(n: int) -> int:  # the sequences the memory beside n's activations holds
            return max(int(kv_room(n) // per_seq), 0) if per_seq else 0

        # Memory only grows with the batch (KV and activations), so `fits` is true up to
        # the answer and false after. What fits beside one sequence's activations bounds
        # the answer from above (hi); what fits beside hi's fits (lo ≤ hi, and its own
        # activations are no larger): a binary search between them finds it exactly.
        hi = room(1)
        lo = min(room(hi), hi) if hi else 0
        in_memory = _last(lo, hi, fits)
        # The engine runs at most its max_num_seqs (max_batch_size) a replica.
        cap = self.profile.max_sequences
        most = fitting = min(in_memory, cap) if cap is not None else in_memory
        if self.engine.budget:  # the decodes, the chunk and its prompts must all fit
            while most and (most + self.chunk(most) > self.engine.budget
                            or most + -(-self.chunk(most) // self.new) > fitting):  # fmt: skip
                most -= 1
        binds: Binds = (
            "token budget" if most < fitting
            else "engine cap" if cap is not None and cap < in_memory
            else "memory"
        )  # fmt: skip
        name = f"{self.profile.label}'s {self.profile.max_sequences_option}"
        return Room(most=most, in_memory=in_memory, cap=cap, cap_name=name,
                    budget=self.engine.budget, binds=binds,
                    per_sequence=per_seq / self.in_flight)  # fmt: skip


def fitting(sc: Scenario) -> Room:
    """`sc.most()`, or the SpecError that says why not one sequence fits."""
    room = sc.most()
    if room.most:
        return room
    budget = sc.engine.budget
    if budget and budget < 1 + sc.chunk(1):
        raise SpecError(
            f"a {budget}-token budget cannot hold one decode and its chunk of "
            f"{sc.chunk(1)} prompt tokens",
            filename="modelcost",
            hint=f"use a budget of at least {1 + sc.chunk(1)}",
        )
    raise SpecError(
        f"not one {sc.isl + sc.osl}-token sequence fits beside the weights on {sc.hw.title} "
        f"in the memory {sc.profile.label} keeps for them ({sc.profile.memory.said})",
        filename="modelcost",
        hint="split the model over more devices (--tp, --pp), shorten the requests or "
        "raise --memory-fraction",
    )


def serve(
    spec: ir.Spec | str | Path,
    hw: Hardware | str | Path,
    isl: int,
    osl: int,
    parallel: Parallel = ONE_DEVICE,
    concurrency: int | None = None,
    tpot: float | None = None,
    ttft: float | None = None,
    engine: Engine = STATIC,
    estimate: EstimateMode = DEFAULT_SERVE_ESTIMATE,
    calibration: Calibration | None = None,
    speculation: Speculation | None = None,
    moe_imbalance: float | None = None,
) -> Serving:
    """The serving figures of `isl`/`osl` requests; `concurrency` fixes the batch (else
    the largest that fits and meets `tpot`, `ttft` in seconds). `spec` and `hw` may be
    paths or a target's name, as for `compile_report`. The figures read step times as
    `estimate` says (`kernels`, the default: the kernel-aware estimate, with a
    `calibration` on top; `roofline`: the bound), and carry the bound beside them.
    `speculation` turns speculative decoding on (speculative.Speculation). With
    pipeline stages `concurrency` is one batch in flight, pp of them a replica
    (`Scenario.pipelined_step`);
    `moe_imbalance` the estimate's routed load on the hottest expert over the mean
    (costing.Costing; the bound keeps the mean)."""
    check_request(isl, osl, concurrency, tpot, ttft)
    spec, hw = as_spec(spec), as_hardware(hw)
    _check_speculation(speculation, engine, parallel)
    sc = Scenario(spec, hw, parallel, isl, osl, engine, estimate_mode(estimate), calibration,
                   speculation, moe_imbalance)  # fmt: skip
    room = fitting(sc)
    most = room.most

    def ok(n: int) -> bool:
        return (tpot is None or sc.tpot(n) <= tpot) and (ttft is None or sc.ttft(n) <= ttft)

    why = ""
    if concurrency is not None:
        n, met = concurrency, ok(concurrency)
        if not met:
            why = _why(sc, concurrency, tpot, ttft)
    else:
        best = largest_meeting(
            most, (lambda n: sc.tpot(n) <= tpot) if tpot is not None else None, ok
        )
        n, met = best or 1, best is not None
        if best is None:
            why = _why(sc, 1, tpot, ttft)
    return _figures(sc, room, n, met, why, tpot, ttft)


def _check_speculation(s: Speculation | None, engine: Engine, par: Parallel) -> None:
    """What speculative decoding is not modelled with."""
    if s is None:
        return
    if engine.budget:
        raise SpecError("speculative decoding is modelled with static batches: a verify "
                        "beside a prefill chunk is not", filename="modelcost",
                        hint="leave out --budget")  # fmt: skip
    if par.pp > 1:
        raise SpecError("speculative decoding is modelled without pipeline stages",
                        filename="modelcost", hint="leave out --pp")  # fmt: skip


def _why(sc: Scenario, n: int, tpot: float | None, ttft: float | None) -> str:
    """Why concurrency n (the smallest tried) misses the targets."""
    if tpot is not None and sc.tpot(n) > tpot:
        return (
            f"{'one sequence' if n == 1 else f'{n} sequences'} per replica already "
            f"take{'s' if n == 1 else ''} over {tpot * 1e3:g} ms a token"
        )
    assert ttft is not None  # only the two targets rule a concurrency out
    return f"TTFT is {sc.ttft(n) * 1e3:.1f} ms, over the {ttft * 1e3:g} ms target"


def largest_meeting(most: int, rising: Callable[[int], bool] | None, ok: Callable[[int], bool]):
    """The largest n in 1..most with ok(n). `rising` (TPOT within target: true up to some
    n, false after) bounds it by a binary search; below that bound ok is tried from the
    top down (TTFT need not be monotone under chunked prefill)."""
    hi = most
    if rising is not None:
        if not rising(1):
            return None
        hi = _last(1, hi, rising)
    for n in range(hi, 0, -1):
        if ok(n):
            return n
    return None


def _last(lo: int, hi: int, holds: Callable[[int], bool]) -> int:
    """The largest n in lo..hi for which `holds`, where it holds at lo and, once false,
    stays false (a binary search)."""
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if holds(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _curve(sc: Scenario, most: int) -> tuple[CurvePoint, ...]:
    """The figures at concurrency 1, 2, 4, … and at the most that fit."""
    ns = sorted({*(2**k for k in range(most.bit_length()) if 2**k <= most), most})
    return tuple(
        CurvePoint.trusted(
            concurrency=n,
            ttft_s=sc.ttft(n),
            tpot_s=sc.tpot(n),
            output_tokens_per_s=sc.output_rate(n),
            output_tokens_per_s_device=sc.output_rate(n) / sc.par.devices,
        )
        for n in ns
    )


def _figures(
    sc: Scenario,
    room: Room,
    n: int,
    met: bool,
    why: str,
    tpot_target: float | None,
    ttft_target: float | None,
) -> Serving:
    par, isl, osl = sc.par, sc.isl, sc.osl
    tpot, first, worst = sc.tpot(n), sc.ttft(n), sc.ttft(n, worst=True)
    out = sc.output_rate(n)
    b_tpot, b_first, b_out = sc.tpot(n, bound=True), sc.ttft(n, bound=True), sc.output_rate(n, True)
    bound = Bound.trusted(
        ttft_s=b_first,
        ttft_worst_s=sc.ttft(n, bound=True, worst=True),
        tpot_s=b_tpot,
        latency_s=b_first + osl * b_tpot,
        output_tokens_per_s=b_out,
        total_tokens_per_s=b_out * (isl + osl) / osl,
        output_tokens_per_s_device=b_out / par.devices,
    )
    at_full = sc.decode(n, isl + osl).memory
    memory = at_full.total
    if sc.draft is not None:  # the draft's weights and cache, and any larger activations
        d = sc.draft_decode(n, isl + osl).memory
        memory += d.weights + d.kv_cache + max(d.activations - at_full.activations, 0.0)
    return Serving.trusted(
        model=sc.spec.name,
        model_title=sc.spec.title,
        hardware=sc.hw.name,
        hardware_title=sc.hw.title,
        layout=par.label,
        devices=par.devices,
        isl=isl,
        osl=osl,
        engine=sc.engine.label,
        engine_name=sc.engine.name,
        engine_reason=_reason(sc),
        memory_fraction=sc.profile.memory.fraction,
        cached=sc.cached,
        chunk=sc.chunk(n),
        max_concurrency=room.most,
        concurrency_in_memory=room.in_memory,
        engine_cap=room.cap,
        engine_cap_said=sc.profile.cap_said,
        concurrency_binds=room.binds,
        concurrency_said=room.said,
        concurrency=n,
        ttft_s=first,
        ttft_worst_s=worst,
        tpot_s=tpot,
        latency_s=first + (osl + sc.extra_steps()) * tpot,
        output_tokens_per_s=out,
        total_tokens_per_s=out * (isl + osl) / osl,
        output_tokens_per_s_device=out / par.devices,
        estimate="kernels" if sc.kernels else "roofline",
        bound=bound,
        memory=memory,
        capacity=at_full.capacity,
        fits=memory <= at_full.capacity,
        kv_per_sequence=room.per_sequence,
        meets_targets=met,
        why=why,
        tpot_target_s=tpot_target,
        ttft_target_s=ttft_target,
        curve=_curve(sc, room.most),
        speculative=_speculative(sc, n),
    )


def _speculative(sc: Scenario, n: int) -> Speculative | None:
    """Speculative decoding's figures at concurrency n, when on."""
    if sc.speculation is None or sc.draft is None:
        return None
    s, full = sc.speculation, sc.isl + sc.osl
    return Speculative.trusted(
        draft=sc.draft.name,
        draft_kind=sc.draft_kind,
        tokens=s.tokens,
        acceptance=s.acceptance,
        accepted_per_step=s.accepted_per_step,
        source=s.source,
        step_s=sc.step(n),
        bound_step_s=sc.step(n, bound=True),
        draft_weights=sc.draft_decode(n, full).memory.weights,
        draft_kv_per_sequence=sc.draft_decode(1, full).memory.kv_cache,
    )


def _reason(sc: Scenario) -> str:
    """What the engine adds to the kernels' step times and the schedule, in a line."""
    p = sc.profile
    if not sc.kernels:  # the headline is the bound: only the memory is the engine's
        return f"{p.label}; KV cache: {p.memory.said}; step times: the roofline"
    said = p.reason()
    if not sc.engine.budget:
        per = max(1, p.prefill_tokens // sc.new)
        said += (f"; static batches prefilled {per:,} prompt{'s' if per > 1 else ''} a step "
                 f"({p.prefill_tokens:,} tokens a step): TTFT is the batch's mean, the "
                 "worst is the whole prefill")  # fmt: skip
    return said


# ---- choosing the layout


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
    if objective not in OBJECTIVES:
        raise SpecError(f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}",
                        filename="modelcost")  # fmt: skip
    spec, hw = as_spec(spec), as_hardware(hw)
    experts = has_experts(spec)
    tried: list[tuple[Parallel, Serving]] = []
    refused: list[str] = []
    over: list[str] = []  # layouts beyond `max_devices`
    # pipelines where tp alone fills the scale-up domain (not beside a --pp given, nor
    # with speculative decoding, which is modelled without them)
    piped = base.pp == 1 and speculation is None
    top = MAX_SEARCH_TP if max_devices is None else min(MAX_SEARCH_TP, max_devices)
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
        work = (spec, hw, isl, osl, tpot, ttft, engine, estimate, calibration, speculation,
                moe_imbalance)  # fmt: skip
        answers = in_order(_serve_each, work, [[par] for par in layouts], jobs, executor,
                           address)  # fmt: skip
        for par, answer in zip(layouts, answers, strict=True):
            if isinstance(answer, Serving):
                tried.append((par, answer))
            else:
                refused.append(f"{_named(par)}: {answer}")
        ranks *= 2
    if over:
        refused.append(f"{' / '.join(over)}: over the budget of {max_devices:,} devices")
    what = "layout" if experts else "tensor-parallel size"
    if not tried:  # nothing to compare: an error, as `serve` on one layout says it
        raise SpecError(
            f"no {what} up to {top} runs {spec.name} on {hw.title} "
            f"with {isl:,} + {osl:,}-token requests",
            filename="modelcost",
            hint=group_reasons(refused),
        )
    found = {"model": spec.name, "model_title": spec.title, "hardware": hw.name,
             "hardware_title": hw.title, "isl": isl, "osl": osl,
             "tried": tuple(s for _, s in tried), "refused": tuple(refused),
             "objective": objective}  # fmt: skip
    pick: Serving | None = None
    if (chosen := _choose(tried, objective, tpot, ttft)) is not None:
        (par, served), n = chosen
        pick = served
        if n != served.concurrency:  # latency: another concurrency
            pick = serve(spec, hw, isl, osl, par, n, tpot, ttft, engine, estimate, calibration,
                         speculation, moe_imbalance)  # fmt: skip
    points = _points([s for _, s in tried], pick, tpot, ttft)
    if pick is None:
        why = f"no {what} up to {top} meets the targets"
        return Search.trusted(**found, chosen=None, why=why, points=points)
    return Search.trusted(**found, chosen=pick, points=points)


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


# ---- request mixes


class RequestClass(Record, frozen=True):
    isl: int
    osl: int
    share: float  # of the requests


class MixServing(Tabular, Frozen):
    """Each request class served on its own, and the mix: the classes taking turns on
    the devices in proportion to their share of requests, so output tokens/s of the mix
    = Σ shareᵢ·oslᵢ / Σ shareᵢ·oslᵢ/rateᵢ."""

    classes: tuple[Serving, ...]
    shares: tuple[float, ...]
    output_tokens_per_s: float
    output_tokens_per_s_device: float
    estimate: EstimateMode  # how the classes' headline figures read step times
    bound_output_tokens_per_s: float  # the mix at the classes' roofline rates
    bound_output_tokens_per_s_device: float
    meets_targets: bool

    def records(self) -> list[dict]:
        return [{"share": w} | s.row() for w, s in zip(self.shares, self.classes, strict=True)]

    def _repr_html_(self) -> str:
        return shown(self, "html")


def serve_mix(
    spec: ir.Spec | str | Path,
    hw: Hardware | str | Path,
    mix: list[RequestClass],
    parallel: Parallel = ONE_DEVICE,
    tpot: float | None = None,
    ttft: float | None = None,
    engine: Engine = STATIC,
    estimate: EstimateMode = DEFAULT_SERVE_ESTIMATE,
    calibration: Calibration | None = None,
    speculation: Speculation | None = None,
    moe_imbalance: float | None = None,
) -> MixServing:
    """Each class of `mix` served on its own, and the mix (MixServing): at most
    MAX_MIX_CLASSES classes, each share from SHARES[0] to SHARES[1] (SpecError)."""
    _check_mix(mix)
    spec, hw = as_spec(spec), as_hardware(hw)
    total = sum(c.share for c in mix)  # at most MAX_MIX_CLASSES × SHARES[1]: finite
    shares = tuple(c.share / total for c in mix)  # each ≥ SHARES[0] / that: above zero
    classes = tuple(serve(spec, hw, c.isl, c.osl, parallel, None, tpot, ttft, engine,
                          estimate, calibration, speculation, moe_imbalance)
                    for c in mix)  # fmt: skip
    rate = _mix_rate(shares, [s.output_tokens_per_s for s in classes], classes)
    bound = _mix_rate(shares, [s.bound.output_tokens_per_s for s in classes], classes)
    return MixServing.trusted(
        classes=classes,
        shares=shares,
        output_tokens_per_s=rate,
        output_tokens_per_s_device=rate / parallel.devices,
        estimate=classes[0].estimate,
        bound_output_tokens_per_s=bound,
        bound_output_tokens_per_s_device=bound / parallel.devices,
        meets_targets=all(s.meets_targets for s in classes),
    )


def _mix_rate(shares: tuple[float, ...], rates: list[float], classes) -> float:
    """Output tokens/s of classes taking turns by share: Σ wᵢ·oslᵢ / Σ wᵢ·oslᵢ/rateᵢ."""
    tokens = sum(w * s.osl for w, s in zip(shares, classes, strict=True))
    return tokens / sum(w * s.osl / r for w, s, r in zip(shares, classes, rates, strict=True))


def _check_mix(mix: list[RequestClass]) -> None:
    """The limits a mix file is held to, for a mix built in Python."""
    where = "the request mix"
    if not mix:
        raise SpecError("a request mix needs at least one request class", filename=where)
    if len(mix) > MAX_MIX_CLASSES:
        raise SpecError(f"{len(mix):,} request classes: {_too_many()}", filename=where,
                        hint=MERGE_CLASSES)  # fmt: skip
    for i, c in enumerate(mix):
        if not SHARES[0] <= c.share <= SHARES[1]:
            raise SpecError(f"class {i} (ISL {c.isl}, OSL {c.osl}): {_share_message(c.share)}",
                            filename=where)  # fmt: skip


def _share_message(got: object) -> str:
    return f"SHARE must be a positive number from {SHARES[0]:g} to {SHARES[1]:g}, got {got!r}"


def _too_many() -> str:
    return f"a mix takes at most {MAX_MIX_CLASSES:,} (each is a serving search of its own)"


MERGE_CLASSES = "merge classes of similar lengths, adding their shares"


def load_mix(path: str | Path) -> list[RequestClass]:
    """A mix file: one request class a line, `ISL OSL [SHARE]` (counts take K/M; the
    share defaults to 1 and is normalized over the file); `#` starts a comment. At most
    MAX_MIX_CLASSES classes, each share from SHARES[0] to SHARES[1]."""
    name = str(path)
    out: list[RequestClass] = []
    for number, raw in enumerate(read_text(path).splitlines(), 1):
        c = _mix_line(name, number, raw)
        if c is None:
            continue
        if len(out) == MAX_MIX_CLASSES:  # refused where the limit is passed, unread beyond
            raise SpecError(f"request class {len(out) + 1:,}: {_too_many()}", filename=name,
                            line=number, column=1, source_line=raw, width=len(raw.rstrip()),
                            hint=MERGE_CLASSES)  # fmt: skip
        out.append(c)
    if not out:
        raise SpecError(f"{name} names no request class", filename=name,
                        hint="one `ISL OSL [SHARE]` a line")  # fmt: skip
    return out


def _mix_line(name: str, number: int, raw: str) -> RequestClass | None:
    line = raw.split("#", 1)[0]
    found = list(re.finditer(r"\S+", line))
    fields = [m.group() for m in found]
    if not fields:
        return None

    def bad(message: str, index: int, hint: str) -> SpecError:
        column = found[index].start() + 1 if index < len(found) else len(line) + 1
        width = len(fields[index]) if index < len(fields) else 1
        return SpecError(message, filename=name, line=number, column=column, hint=hint,
                         source_line=raw, width=width)  # fmt: skip

    if len(fields) not in (2, 3):
        raise bad(f"expected ISL OSL [SHARE], got {len(fields)} fields",
                  min(len(fields) - 1, 3), "e.g. `2048 128 0.5`")  # fmt: skip
    values = []
    for i, what in enumerate(("ISL", "OSL")):
        try:
            values.append(count(fields[i]))
        except ValueError:
            hint = "a whole number of tokens, K/M suffixes allowed"
            raise bad(f"{what} must be a positive count, got {fields[i]!r}", i, hint) from None
    share = 1.0
    if len(fields) == 3:
        try:
            share = float(fields[2])
        except ValueError:
            share = math.nan
        if not SHARES[0] <= share <= SHARES[1]:  # NaN, inf, 1e308 and 0 too
            raise bad(_share_message(fields[2]), 2, "a weight such as 0.25 or 3")
    return RequestClass(values[0], values[1], share)
