"""The data between lowering and costing: workloads, op-graph nodes, layer groups."""

from __future__ import annotations

from enum import StrEnum
from itertools import pairwise
from typing import Literal

from modelcost.base.dtypes import DType
from modelcost.base.record import Record, force_setattr, replace
from modelcost.base.settings import bounded
from modelcost.perfmodel import MODELCOST, Conventions, OpRecord


class Phase(StrEnum):
    prefill = "prefill"
    decode = "decode"
    train = "train"


DEFAULT_BATCH = 1
DEFAULT_SEQ = 2048  # prefill/train queries per sequence, when not given
DEFAULT_CONTEXT = 2048  # decode cached positions per sequence, when not given


# collectives hidden behind compute: none; those Megatron-Core runs beside compute (the
# layout's `Node.beside`); all of them, as far as compute lasts
Overlap = Literal["none", "megatron", "full"]
OVERLAPS: tuple[Overlap, ...] = ("none", "megatron", "full")
# the dtype training accumulates and reduces gradients in (memory.gradient_dtype)
Grads = Literal["fp32", "param"]
GRADS: tuple[Grads, ...] = ("fp32", "param")


class Parallel(Record, frozen=True):
    """How one job is split over devices, in Megatron-LM's terms.

    `tp` tensor-parallel ranks split every layer's heads and hidden widths (column- then
    row-parallel GEMMs, an all-reduce after each attention and MLP); with `sp` (sequence
    parallelism) that all-reduce becomes a reduce-scatter and an all-gather, and norms
    and residuals run on 1/tp of the tokens. `dp` data-parallel replicas each run
    batch/dp sequences; `ep` expert-parallel ranks, taken from the data-parallel ones as
    in Megatron (attention data-parallel, each expert's width over the tp ranks), each
    hold experts/ep experts and exchange tokens by all-to-all. Where ep does not divide
    dp, or `etp` (the expert tensor-parallel size) is given and differs from tp, the
    experts are folded onto the tp × dp ranks instead (Megatron-Core's MoE parallel
    folding; vLLM's `--enable-expert-parallel`, SGLang's `--tp 8 --ep 8`): attention
    tensor-parallel over tp, the experts over ep × etp ranks, etp innermost (default 1:
    each expert whole on its rank); ep × etp must divide tp × dp (Megatron-Core's rule,
    the rest expert-data-parallel copies) and be a multiple of tp (an expert group is
    whole attention-TP groups: the tokens reach it by all-gather over its dp replicas,
    kinds/moe.py). `zero`
    shards optimizer states (1), gradients (2) and weights (3, FSDP) over the
    data-parallel ranks. `pp` pipeline stages each hold a run of layers (the embedding
    on the first, the head on the last), passing activations on by point-to-point
    sends; each replica's batch runs as `microbatches` microbatches, and a step takes
    (microbatches + pp − 1) stage times (1F1B; the pp − 1 are the bubble). With `vpp`
    virtual stages (Megatron-LM's interleaved 1F1B, Narayanan et al. 2021, §2.2.2) each
    stage holds vpp chunks of layers/(pp·vpp) layers, chunk j on stage j mod pp: the
    bubble shrinks to (pp − 1)/vpp microbatch times and every microbatch crosses each
    stage vpp times, so the point-to-point traffic grows vpp-fold. `overlap`
    `full` hides collectives behind the compute of the same step as far as it lasts;
    `megatron` hides only those Megatron-Core runs beside compute in the published
    recipes (`Node.beside`: the gradient reduce-scatter and parameter all-gather,
    sequence parallelism's all-gathers and reduce-scatters under TP communication
    overlap, ring attention's exchange, an interleaved pipeline's sends), the others
    (a tp all-reduce, MoE's all-to-all) exposed.
    `recompute` `full` (training) keeps only each layer's input and runs its forward
    again in the backward (Korthikanti et al. 2022); `selective` recomputes the
    attention core, which the flash-attention SDPA op already does, so it keeps what
    `none` keeps.
    `grads` (training) is the dtype gradients are accumulated and reduced in: `fp32`, as
    Megatron-LM keeps a bf16 model's, or `param`, the parameters' own, as
    Megatron-Bridge's performance recipes run (grad_reduce_in_fp32 False).
    `offload` (training) is how many layers' saved activations are copied to host
    memory during the forward and back for the backward, beside compute (Megatron-Core's
    cpu_offloading_num_layers over Transformer Engine's CPU offload: the first
    `offload` layers, at most layers − offload layers' activations on the device).
    `cp` context-parallel ranks each take 1/cp of every sequence's tokens and pass
    keys and values around a ring for attention (prefill and training).
    Devices = tp × cp × dp × pp, numbered in that order, tp innermost (Megatron-LM).
    """

    tp: int = 1
    sp: bool = False
    ep: int = 1
    dp: int = 1
    zero: int = 0
    pp: int = 1
    cp: int = 1
    microbatches: int = 1
    vpp: int = 1
    overlap: Overlap = "none"
    recompute: Literal["none", "selective", "full"] = "none"
    grads: Grads = "fp32"
    offload: int = 0
    etp: int | None = None  # None: tp (ep taken from dp), or 1 (ep folded onto tp × dp)

    def __post_init__(self) -> None:
        if self.overlap not in OVERLAPS:
            raise ValueError(f"overlap must be 'none', 'megatron' or 'full', got {self.overlap!r}")
        if self.grads not in GRADS:
            raise ValueError(f"grads must be 'fp32' or 'param', got {self.grads!r}")
        if self.recompute not in ("none", "selective", "full"):
            raise ValueError(
                f"recompute must be 'none', 'selective' or 'full', got {self.recompute!r}"
            )
        for name in ("tp", "ep", "dp", "pp", "cp", "microbatches", "vpp"):
            bounded(name, getattr(self, name))
        bounded("offload", self.offload, least=0)
        if self.zero not in (0, 1, 2, 3):
            raise ValueError(f"zero must be 0, 1, 2 or 3, got {self.zero!r}")
        if self.sp and self.tp == 1:
            raise ValueError(
                "sequence parallelism (sp) splits tokens over the tp ranks: it needs tp > 1"
            )
        if self.etp is not None:
            bounded("etp", self.etp)
        if self.folded:
            self._check_folded()

    def _check_folded(self) -> None:
        """Megatron-Core's rule for folded experts: ep × etp divides tp × dp (the rest
        are expert-data-parallel copies); here also whole tp groups (tokens are
        replicated over a tp group and gathered over its dp replicas)."""
        ep, etp, tp, dp = self.ep, self.expert_tp, self.tp, self.dp
        grid = ep * etp
        if self.cp > 1:
            raise ValueError(
                f"ep = {ep} does not divide dp = {dp}, which folds the experts onto the "
                "tp × dp ranks, and folding is not modelled with context parallelism "
                f"(cp = {self.cp}): use an ep that divides dp"
            )
        if (tp * dp) % grid or grid % tp:
            raise ValueError(
                f"ep × etp = {ep} × {etp} = {grid} must divide tp × dp = {tp} × {dp} = "
                f"{tp * dp} and be a multiple of tp = {tp}: the experts fold onto whole "
                f"tensor-parallel groups (Megatron-Core's MoE parallel folding), e.g. "
                f"--tp {grid} --ep {ep}{f' --etp {etp}' if etp > 1 else ''} (attention "
                f"tensor-parallel over the experts' ranks), or --dp {ep} --ep {ep} "
                f"(attention data-parallel, each expert split over tp)"
            )

    @property
    def devices(self) -> int:
        return self.tp * self.cp * self.dp * self.pp

    # which ranks form each group, and how far apart they sit (for the links they use)
    @property
    def weight_copies(self) -> int:
        """Ranks holding the same dense weights: gradients sync and ZeRO shards over
        them (data- and context-parallel ranks)."""
        return self.dp * self.cp

    @property
    def expert_tp(self) -> int:
        """Ranks one expert's width splits over: `etp`, or by default tp where ep is
        taken from dp (Megatron-Core's default) and 1 where ep folds onto tp × dp
        (vLLM's and SGLang's expert parallelism: each expert whole on its rank)."""
        if self.etp is not None:
            return self.etp
        return self.tp if self.dp % self.ep == 0 else 1

    @property
    def folded(self) -> bool:
        """Whether the experts fold onto the tp × dp ranks (Megatron-Core's MoE
        parallel folding) rather than taking ep from dp with each expert over tp."""
        return self.dp % self.ep != 0 or self.expert_tp != self.tp

    @property
    def expert_gather(self) -> int:
        """Folded: the dp replicas one expert group spans, (ep × etp) / tp, whose
        tokens it gathers; 1 otherwise."""
        return self.ep * self.expert_tp // self.tp if self.folded else 1

    @property
    def expert_copies(self) -> int:
        """Ranks holding the same experts."""
        if self.folded:  # expert-data-parallel: tp × dp over the ep × etp grid
            return self.tp * self.dp // (self.ep * self.expert_tp)
        return self.dp // self.ep * self.cp

    @property
    def copies_stride(self) -> int:
        return self.tp  # the cp ranks, then the dp ranks, sit just outside the tp group

    @property
    def expert_copies_stride(self) -> int:
        """Ranks with the same experts skip the other ep ranks (with cp, the nearest of
        them are the cp ranks, tp apart)."""
        if self.folded:  # expert ranks run etp, then ep, innermost (Megatron-Core)
            return self.ep * self.expert_tp
        return self.tp if self.cp > 1 else self.tp * self.ep

    @property
    def ep_stride(self) -> int:
        if self.folded:
            return self.expert_tp  # each expert's etp ranks sit between
        return self.tp * self.cp  # expert-parallel ranks are data-parallel ranks

    @property
    def pp_stride(self) -> int:
        return self.tp * self.cp * self.dp

    @property
    def single(self) -> bool:
        return self.devices == 1

    @property
    def label(self) -> str:
        """`tp 8, sp, dp 2, ep 2, zero 1`; empty on one device."""
        parts = [f"tp {self.tp}"] if self.tp > 1 else []
        parts += ["sp"] if self.sp else []
        parts += [f"dp {self.dp}"] if self.dp > 1 else []
        parts += [f"ep {self.ep}"] if self.ep > 1 else []
        parts += [f"etp {self.expert_tp}"] if self.folded else []
        parts += [f"cp {self.cp}"] if self.cp > 1 else []
        parts += [f"pp {self.pp}"] if self.pp > 1 else []
        parts += [f"vpp {self.vpp}"] if self.vpp > 1 else []
        parts += [f"{self.microbatches} microbatches"] if self.microbatches > 1 else []
        parts += [f"zero {self.zero}"] if self.zero else []
        parts += ["overlap"] if self.overlap == "full" else []
        parts += ["megatron overlap"] if self.overlap == "megatron" else []
        parts += [f"recompute {self.recompute}"] if self.recompute != "none" else []
        parts += ["grads param"] if self.grads == "param" else []
        parts += [f"offload {self.offload}"] if self.offload else []
        return ", ".join(parts)


ONE_DEVICE = Parallel()


class Workload(Record, frozen=True):
    """What runs: prefill(batch, seq), decode(batch, context) or train(batch, seq).

    Decode produces one new token per sequence, attending to `context` cached positions.
    Prefill computes logits for every token (`all`) or only each sequence's last one;
    None leaves it to the counting conventions (`Conventions.logits`: `last`, or `all`
    under TraceLens's).
    `seq` and `context` left as None take DEFAULT_SEQ and DEFAULT_CONTEXT (the CLI's
    defaults too), or the length a model fixes itself (a vision model's patch count).
    `phase` may be given as its name (`Workload("decode", 8)`). `batch` is the whole
    job's; `parallel` says how it is split over devices (one by default). `streams`
    sets the length of a model's other token streams per sequence, by name (T5's
    source: `{"encoder": 512}`); each stream not named keeps its spec's length.

    What serving engines do: `prefix` cached prompt tokens (a prefix-cache hit) precede
    each prefill sequence's `seq` queries, which attend to them too. A decode step may
    carry a prefill `chunk` (chunked prefill, as vLLM and TensorRT-LLM schedule): that
    many prompt tokens per replica, from prompts of `prompt` new tokens (default: one
    whole prompt of `chunk`) after their `prefix`, through the same GEMMs as the
    decode tokens. A decode step may also take `queries` new tokens per sequence (a
    speculative decoding verify: the k proposed tokens and the one before them, k + 1),
    each attending to the whole cache and, in the head, giving logits.
    """

    phase: Phase
    batch: int = DEFAULT_BATCH
    seq: int | None = None
    context: int | None = None
    logits: Literal["all", "last"] | None = None
    parallel: Parallel = ONE_DEVICE
    prefix: int = 0
    chunk: int = 0
    prompt: int = 0
    streams: tuple[tuple[str, int], ...] = ()
    queries: int = 1

    def __post_init__(self) -> None:
        if isinstance(self.streams, dict):
            force_setattr(self, "streams", tuple(sorted(self.streams.items())))
        for item in self.streams:
            if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)):
                raise ValueError(f"streams maps a stream's name to its length, got {item!r}")
            bounded(f"stream {item[0]!r}'s length", item[1])
        if not isinstance(self.phase, Phase):
            try:
                force_setattr(self, "phase", Phase(self.phase))  # normalizing, in __init__
            except ValueError:
                raise ValueError(
                    f"unknown phase {self.phase!r}; choose from {', '.join(Phase)}"
                ) from None
        if self.logits not in ("all", "last", None):
            raise ValueError(f"logits must be 'all' or 'last', got {self.logits!r}")
        for name in ("batch", "seq", "context"):
            if (value := getattr(self, name)) is not None:
                bounded(name, value)
        for name in ("prefix", "chunk", "prompt"):
            bounded(name, getattr(self, name), least=0)
        q = self.queries
        if not isinstance(q, int) or isinstance(q, bool) or q <= 0:
            raise ValueError(f"queries must be a positive integer, got {q!r}")


class Shape(Record, frozen=True):
    """The token geometry lowering settled on for a workload: the one place that says
    how many tokens a step processes, how many queries and keys each sequence has,
    whether a cache is read and a backward pass runs, and how the step is labelled.

    `B` sequences in one microbatch on one device (the job's batch / dp / microbatches),
    `S` queries each, attending
    `n_kv` keys; `logits_all`: logits for every position (else each sequence's last);
    `par`: the device layout."""

    phase: Phase
    B: int
    S: int
    n_kv: int
    logits_all: bool
    par: Parallel = ONE_DEVICE
    # a decode step's prefill chunk: `chunk` tokens from prompts of `prompt` new tokens
    # after `prefix` cached ones (whole prompts, then the rest of one)
    chunk: int = 0
    prompt: int = 0
    prefix: int = 0
    # the model's other token streams (encoders, towers): each one's length per
    # sequence; and the tokens of theirs that join each main sequence (in S and n_kv)
    streams: tuple[tuple[str, int], ...] = ()
    joins: tuple[tuple[str, int], ...] = ()

    @property
    def joined(self) -> int:
        """Tokens of each main sequence that other streams contributed (image tokens)."""
        return sum(n for _, n in self.joins)

    @property
    def T(self) -> int:
        """Tokens through every layer of one device in one step."""
        return self.B * self.S + self.chunk

    @property
    def T_job(self) -> int:
        """Tokens the whole job processes in one step (every microbatch of every
        data-parallel replica, every context-parallel chunk)."""
        return self.T * self.par.microbatches * self.par.dp * self.par.cp

    @property
    def B_device(self) -> int:
        """Sequences one device holds in a step: all its replica's microbatches."""
        return self.B * self.par.microbatches

    @property
    def batch(self) -> int:
        """The job's sequences per step (every replica's, every microbatch)."""
        return self.B_device * self.par.dp

    @property
    def seq(self) -> int:
        """Queries per sequence, over all its context-parallel chunks."""
        return self.S * self.par.cp

    @property
    def T_seq(self) -> int:
        """Tokens a norm or residual handles on one device: 1/tp of them under
        sequence parallelism."""
        return self.T // self.par.tp if self.par.sp else self.T

    @property
    def chunk_sequences(self) -> int:
        """Prompts a decode step's chunk touches: its whole ones and a partial one."""
        return -(-self.chunk // self.prompt) if self.chunk else 0

    @property
    def decode(self) -> bool:
        """New queries (S per sequence: one, or a speculative verify's k + 1) over a cache
        that is read, not written in full."""
        return self.phase is Phase.decode

    @property
    def train(self) -> bool:
        """A backward pass, a loss and an optimizer step follow the forward."""
        return self.phase is Phase.train

    @property
    def label(self) -> str:
        """`context 2048` for decode, `seq 197` otherwise; then the layout, if any."""
        if self.decode:
            length = f"context {self.n_kv}" + (f", {self.S} queries" if self.S > 1 else "")
        else:
            length = f"seq {self.S * self.par.cp}" + (
                f" after {self.prefix}" if self.prefix else ""
            )
        if self.chunk:
            length += f", chunk {self.chunk} of {self.prompt}-token prompts" + (
                f" after {self.prefix}" if self.prefix else ""
            )
        for name, tokens in self.joins:
            length += f" with {tokens} {name} tokens"
        for name, tokens in self.streams:
            length += f", {name} stream {tokens}"
        return f"{length}, {self.par.label}" if self.par.label else length


class Node(Record, frozen=True):
    """One op of the graph, standing for `count` identical instances.

    `name` is hierarchical and stable (`layers.3.attn.q_proj`; a node of a repeated
    group is named after the group's first layer). `inputs` name the nodes whose output
    tensors it reads; `out_bytes` is the size of the tensor it produces.
    """

    name: str
    group: str
    count: int
    op: OpRecord
    inputs: tuple[str, ...] = ()
    out_bytes: float = 0
    step: bool = False  # once per step, outside forward and backward (optimizer, grad sync)
    beside: bool = False  # a collective Megatron-Core runs beside compute (overlap megatron)


RECEIVED = "pipeline.recv"  # the node by which a pipeline stage's input arrives


class Group(Record, frozen=True):
    """A layer group: `count` identical layers (or the model-level ops, count 1)."""

    name: str
    block: str
    layers: tuple[int, ...]
    count: int

    @property
    def layer_label(self) -> str:
        """`0-79`, `0, 2, …, 40`, `3`, `12-15, 28-31` (an interleaved pipeline stage's
        chunks) — or empty for model-level groups."""
        ls = self.layers
        if not ls:
            return ""
        if len(ls) == 1:
            return str(ls[0])
        step = ls[1] - ls[0]
        if any(b - a != step for a, b in pairwise(ls)):  # runs
            starts = [i for i in range(len(ls)) if i == 0 or ls[i] - ls[i - 1] != 1]
            ends = [*(i - 1 for i in starts[1:]), len(ls) - 1]
            return ", ".join(
                str(ls[a]) if a == b else f"{ls[a]}-{ls[b]}"
                for a, b in zip(starts, ends, strict=True)
            )
        if step == 1:
            return f"{ls[0]}-{ls[-1]}"
        if len(ls) == 2:
            return f"{ls[0]}, {ls[1]}"
        return f"{ls[0]}, {ls[1]}, …, {ls[-1]}"


class ModelFacts(Record, frozen=True):
    """What reporting needs of the spec, computed once by lowering (memory.model_facts):
    after lowering only the graph travels on."""

    name: str
    title: str
    params_total: int
    params_active: int
    device_dense: int  # parameters one device holds outside the experts (before ZeRO-3)
    device_experts: int  # and of the experts
    width: int  # the residual stream's: what a layer takes in per token
    activations: DType  # the model's activation dtype
    compute: DType  # what its GEMMs are fed (a recipe's quantized activations): the MFU's
    # and the knee's precision
    weight_bytes: float
    cache_bytes: float  # KV cache and SSM state of the workload's sequences (inference)
    gradient_bytes: float  # training
    optimizer_bytes: float  # training: AdamW states and master weights


class OpGraph(Record, frozen=True):
    """A lowered workload: its nodes and layer groups, the token geometry, the facts of
    the model it came from, and notes for the reader."""

    facts: ModelFacts
    workload: Workload
    shape: Shape
    nodes: tuple[Node, ...]
    groups: tuple[Group, ...]
    notes: tuple[str, ...] = ()


def settled(w: Workload, conventions: Conventions = MODELCOST) -> Workload:
    """`w` with what it left to the conventions filled in (prefill's logits)."""
    return w if w.logits is not None else replace(w, logits=conventions.logits)
