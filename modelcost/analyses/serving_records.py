"""What `serve` answers with and runs on: an engine's scheduling (Engine), the room a
device has for sequences (Room), a request's checks, and the records of a serving answer
(Serving, its bound, its curve points, speculative decoding's figures)."""

from __future__ import annotations

import math
from typing import Literal

from modelcost.base.errors import SpecError
from modelcost.base.frozen import Frozen
from modelcost.base.hooks import shown
from modelcost.base.record import Record
from modelcost.base.settings import EstimateMode, bounded
from modelcost.base.tabular import Tabular
from modelcost.estimate.engines import DEFAULT_ENGINE, ENGINES, engine_label

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
