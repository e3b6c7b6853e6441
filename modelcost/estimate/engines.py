"""The serving engines (vLLM, TensorRT-LLM, SGLang) between kernel times and a served
request: each figure a published one from specs/kernels/engines.json, with its source.

- Per-step host overhead: the share of a decode step in which the GPU waits on the
  host (scheduling, input preparation, sampling) with CUDA/HIP graphs on (every
  engine's default), so a step takes kernels / (1 − share); steps a request stays in
  the batch beyond its output tokens (TensorRT-LLM's overlap scheduler: one). A figure
  not published (a prefill step's host share; decode without graphs, whose launch
  latency has no primary source) is a gap: not modelled, and said so.
- Memory the engine keeps back: vLLM's gpu_memory_utilization (of the whole device),
  TensorRT-LLM's free_gpu_memory_fraction (of what the weights and activations leave),
  SGLang's mem_fraction_static (weights and KV cache within it).
- Batching defaults: the tokens one prefill step holds and the most sequences an
  engine instance runs.

The roofline bound reads none of this: these figures shape the headline estimate only.
"""

from __future__ import annotations

from typing import Any, Literal

from modelcost.base.record import Record
from modelcost.base.resources import kernel_table

MemoryRule = Literal["of_total", "of_free", "static"]


def _data() -> dict[str, Any]:
    return kernel_table("engines")


ENGINES: tuple[str, ...] = tuple(_data()["engines"])  # the names --engine takes
DEFAULT_ENGINE: str = _data()["default"]


def engine_label(name: str) -> str:
    """An engine's name as its project writes it (`trtllm`: TensorRT-LLM)."""
    label: str = _data()["engines"][name]["label"]
    return label


class Memory(Record, frozen=True):
    """What an engine gives its KV cache: `fraction` read by `rule`."""

    rule: MemoryRule
    fraction: float
    source: str

    def kv_room(self, capacity: float, weights: float, activations: float) -> float:
        """Bytes the KV cache may take on a device of `capacity` holding `weights` and a
        step's `activations` (none where nothing is left)."""
        free = capacity - weights - activations
        if self.rule == "of_total":  # all of it within fraction × capacity
            room = self.fraction * capacity - weights - activations
        elif self.rule == "of_free":  # a fraction of what the weights and activations leave
            room = self.fraction * free
        else:  # static: weights and KV cache within fraction × capacity, activations beside
            room = min(self.fraction * capacity - weights, free)
        return max(room, 0.0)

    @property
    def said(self) -> str:
        what = {
            "of_total": "of the device",
            "of_free": "of the memory the weights and activations leave",
            "static": "of the device for weights and KV cache",
        }
        return f"{self.fraction:g} {what[self.rule]}"


class Profile(Record, frozen=True):
    """One engine's figures for one layout on one device."""

    name: str
    label: str
    decode_host_share: float | None  # None: a gap
    decode_source: str
    prefill_host_share: float | None
    prefill_source: str
    extra_decode_steps: int
    memory: Memory
    prefill_tokens: int
    max_sequences: int | None  # None: the memory alone bounds the batch
    max_sequences_option: str  # the engine's option that sets it ("" where none)
    max_sequences_source: str

    @property
    def cap_said(self) -> str:
        """The engine's cap on sequences a replica runs, with its source, in a line."""
        if self.max_sequences is None:
            return f"none ({self.label}: {self.max_sequences_source})"
        return (f"{self.max_sequences:,} sequences ({self.label}'s "
                f"{self.max_sequences_option}: {self.max_sequences_source})")  # fmt: skip

    def step(self, kernels_s: float, phase: Literal["decode", "prefill"]) -> float:
        """A step's time from its kernels' time, with the host's share where published."""
        share = self.decode_host_share if phase == "decode" else self.prefill_host_share
        return kernels_s / (1 - share) if share else kernels_s

    def reason(self) -> str:
        """What the headline adds to the kernels, and what it leaves out, in a line."""
        said = [f"{self.label}"]
        d = self.decode_host_share
        said.append(
            f"decode steps +{d / (1 - d):.1%} host time (graphs on)" if d
            else "decode host work overlapped (graphs on)"
        )  # fmt: skip
        if self.extra_decode_steps:
            said.append(f"{self.extra_decode_steps} extra decode step a request")
        if self.prefill_host_share is None:
            said.append("prefill host time: no published figure, not modelled")
        said.append("decode without graphs: no published launch latency, not modelled")
        said.append(f"KV cache: {self.memory.said}")
        return "; ".join(said)


def _sized(entry: dict[str, Any] | None, part: str, capacity: float) -> int | None:
    if entry is None:
        return None
    large = capacity >= entry["large_bytes"] and part not in entry["except"]
    return int(entry["large" if large else "small"])


def profile(
    name: str, part: str, capacity: float, tp: int, memory_fraction: float | None = None
) -> Profile:
    """Engine `name`'s figures on `part` (`capacity` bytes) at tensor-parallel size `tp`;
    `memory_fraction` replaces the engine's own fraction (read by the same rule)."""
    e = _data()["engines"][name]
    mem = e["memory"]
    if "fraction_by_tp" in mem:  # the table's entry for the largest tp up to this one
        sizes = sorted(int(k) for k in mem["fraction_by_tp"])
        fraction = mem["fraction_by_tp"][str(max([s for s in sizes if s <= tp] or sizes[:1]))]
    else:
        fraction = mem["fraction"]
    source = mem["source"]
    if memory_fraction is not None:
        fraction, source = memory_fraction, "--memory-fraction"
    prefill_tokens = _sized(e["prefill_tokens"], part, capacity)
    cap = e["max_sequences"]
    assert prefill_tokens is not None  # every engine publishes one
    return Profile(
        name=name,
        label=e["label"],
        decode_host_share=e["decode_host_share"],
        decode_source=e["decode_source"],
        prefill_host_share=e["prefill_host_share"],
        prefill_source=e["prefill_source"],
        extra_decode_steps=e["extra_decode_steps"],
        memory=Memory(rule=mem["rule"], fraction=fraction, source=source),
        prefill_tokens=prefill_tokens,
        max_sequences=_sized(cap, part, capacity),
        max_sequences_option="" if cap is None else cap["option"],
        max_sequences_source=e["max_sequences_source"] if cap is None else cap["source"],
    )
