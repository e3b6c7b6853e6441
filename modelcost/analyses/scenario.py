"""A serving scenario: one model, target, layout and engine, its prefill and decode steps
priced once and composed for any batch (Scenario), and the most sequences the memory
holds (fitting)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import modelcost.language.spec as ir
from modelcost.base.errors import SpecError
from modelcost.base.record import replace
from modelcost.base.settings import EstimateMode
from modelcost.estimate.costing import DEFAULT_COSTING, costing
from modelcost.estimate.engines import Profile, profile
from modelcost.ir.graph import Parallel, Phase, Workload
from modelcost.ir.report import Totals
from modelcost.roofline.compile import compile_stage, compile_totals
from modelcost.roofline.estimated import StageStep

from .serving_records import Binds, Engine, Room
from .speculative import Settled, Speculation, draft_spec, settle

if TYPE_CHECKING:
    from modelcost.estimate.calibration import Calibration


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
