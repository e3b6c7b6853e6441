"""Workload validation: a spec and a workload → the token geometry lowering runs
(`graph.Shape`), or a SpecError naming what the spec or the layout cannot run and the
flag to change. Each layer's room says what layouts and workload features it refuses;
this module asks them, and checks the lengths, streams and serving extras."""

from __future__ import annotations

from collections.abc import Sequence

import modelcost.language.spec as ir
from modelcost.base.errors import SpecError, did_you_mean
from modelcost.base.memo import per_object
from modelcost.base.record import replace
from modelcost.ir.graph import (
    DEFAULT_CONTEXT,
    DEFAULT_SEQ,
    Parallel,
    Phase,
    Shape,
    Workload,
    settled,
)
from modelcost.ir.parallel import refuse
from modelcost.kinds.registry import room
from modelcost.kinds.room import Component, Feature
from modelcost.language.spec import streams_of, walk


def check_layout(spec: ir.Spec, par: Parallel, batch: int) -> None:
    """Raise a SpecError for a layout `spec` cannot run with `batch` sequences: each
    layer's room says how it splits (parallel.py holds the shared rules)."""
    if batch % (par.dp * par.microbatches):
        raise refuse(
            f"batch {batch} does not split over dp = {par.dp} replicas of "
            f"{par.microbatches} microbatch{'es' if par.microbatches > 1 else ''}",
            f"use a batch that is a multiple of {par.dp * par.microbatches}",
        )
    if par.vpp > 1:
        _check_interleaving(par)
    if par.offload:
        _check_offload(par)
    if par.single:
        return
    refused = _refused_layout(spec, par)
    if refused is not None:
        raise refuse(*refused)


@per_object
def _refused_layout(spec: ir.Spec, par: Parallel) -> tuple[str, str] | None:
    """(message, hint) of the first layer that cannot split over `par`, or None: the
    same for every batch, so a sweep walks the spec once per layout."""
    has_experts = False
    for op, _ in walk(spec.body):
        where = f"`{op.kind}` of `{spec.name}`"
        r = room(op)
        has_experts = has_experts or r.component is Component.experts
        cp = r.refusal(Feature.cp)
        if cp is not None and par.cp > 1:
            return (
                f"--cp {par.cp}: {cp.why} of {where} runs along the whole sequence",
                "context parallelism is for attention layers; use --tp or --dp",
            )
        error = r.sharding(op, par, where)
        if error is not None:  # a room's refusal (parallel.refuse: modelcost's, hinted)
            return error.message, error.hint or ""
    if par.etp is not None and not has_experts:
        return (
            f"--etp {par.etp}: `{spec.name}` has no experts to split",
            "expert tensor parallelism applies to MoE layers; use --tp for the rest",
        )
    if par.ep > 1 and not has_experts:
        return (
            f"--ep {par.ep}: `{spec.name}` has no experts to split",
            "expert parallelism applies to MoE layers; use --dp for data parallelism",
        )
    return None


def _check_offload(par: Parallel) -> None:
    """What Megatron-Core refuses of activation offloading (TransformerConfig): a
    pipeline ("no support for Pipeline parallelism with CPU offloading") and
    recomputation ("CPU offloading does not work when activation recomputation is
    enabled"); the layer count is checked where the layers are known (lower.py)."""
    if par.pp > 1:
        raise refuse(
            f"--offload {par.offload}: Megatron-Core offloads activations on one pipeline "
            f"stage only, and --pp is {par.pp}",
            "leave --pp at 1, or --offload out",
        )
    if par.recompute != "none":
        raise refuse(
            f"--offload {par.offload}: Megatron-Core does not offload activations that "
            f"--recompute {par.recompute} rebuilds",
            "use one of --offload and --recompute",
        )


def _check_interleaving(par: Parallel) -> None:
    """What Megatron-LM refuses of its interleaved schedule (virtual stages): fewer than
    3 pipeline stages (megatron/core/parallel_state.py: "pipeline-model-parallel size
    should be greater than 2 with interleaved schedule"), and microbatches that are not
    a multiple of the stages (schedules.py: "number of microbatches is not divisible by
    pipeline-model-parallel-size when using interleaved schedule"). The layers must
    split into pp·vpp equal chunks too (stages.py, which counts them). With its p2p
    overlap (overlap_p2p_comm, which `--overlap megatron` runs) 2 stages do
    (megatron/training/arguments.py: "pipeline-model-parallel size should be greater
    than 1" then; Megatron-Bridge's Qwen3-30B-A3B recipe runs pp 2, vpp 24)."""
    least = 2 if par.overlap == "megatron" else 3
    if par.pp < least:
        raise refuse(
            f"--vpp {par.vpp} interleaves pipeline stages: it needs --pp greater than "
            f"{least - 1}, got --pp {par.pp}",
            f"Megatron-LM's interleaved schedule runs on {least} or more stages"
            + ("" if least == 2 else " (2 with --overlap megatron: its p2p overlap)")
            + "; use --pp 4 or leave --vpp at 1",
        )
    if par.microbatches % par.pp:
        raise refuse(
            f"--vpp {par.vpp}: --microbatches {par.microbatches} is not a multiple of "
            f"--pp {par.pp} (Megatron-LM's interleaved schedule needs one)",
            f"use --microbatches a multiple of {par.pp}",
        )


@per_object
def check_imbalance(spec: ir.Spec, imbalance: float | None) -> None:
    """Raise a SpecError for a routed load over the mean (`--moe-imbalance`) that no
    routing reaches: the hottest expert holds at most every routed token, experts /
    top_k times the mean (the smallest over the spec's MoE layers)."""
    limit = _imbalance_limit(spec)
    if imbalance is None or limit is None or imbalance <= limit[0]:
        return
    most, said = limit
    raise SpecError(
        f"--moe-imbalance {imbalance:g}: the hottest expert holds at most every routed "
        f"token, {most:g}× the mean ({said})",
        filename="modelcost",
        hint=f"use a load over the mean from 1 to {most:g}",
    )


@per_object
def _imbalance_limit(spec: ir.Spec) -> tuple[float, str] | None:
    """(experts / top_k, how the spec says it) of the MoE layer where it is smallest;
    None for a model without routed experts."""
    moes = {(op.experts, op.top_k) for op, _ in walk(spec.body, auxiliary=True)
            if isinstance(op, ir.MoE)}  # fmt: skip
    if not moes:
        return None
    experts, k = min(moes, key=lambda e: e[0] / e[1])
    return experts / k, f"{experts} experts, each token routed to {k}"


@per_object
def input_facts(spec: ir.Spec) -> tuple[ir.PatchEmbed | None, ir.PositionEmbedding | None, bool]:
    """(the patch embedding, the learned positions, whether any layer decodes) of the
    main stream: the same for every workload, so walked once per spec."""
    ops = [op for op, _ in walk(spec.body, streams=False)]
    patch = next((op for op in ops if isinstance(op, ir.PatchEmbed)), None)
    positions = next((op for op in ops if isinstance(op, ir.PositionEmbedding)), None)
    return patch, positions, any(op.decodes for op in ops)


def decodes(spec: ir.Spec) -> bool:
    """Whether the main stream has a decode step (causal attention or an SSM)."""
    return input_facts(spec)[2]


# The options each phase reads, said once: the command line (compile, diff, site, serve,
# sweep) and the API refuse an option no phase asked for reads (it would be taken and
# ignored), with one message. `microbatches` is also read by any phase run in pipeline
# stages (a pipeline's microbatches); `zero` shards over the data-parallel replicas,
# so it needs more than one.
READ_BY: dict[str, tuple[Phase, ...]] = {
    "seq": (Phase.prefill, Phase.train),
    "context": (Phase.decode,),
    "recompute": (Phase.train,),
    "grads": (Phase.train,),
    "offload": (Phase.train,),
    "zero": (Phase.train,),
    "microbatches": (Phase.train,),
}


def given_options(w: Workload) -> dict[str, object]:
    """The options of READ_BY that `w` sets, each with its value (formatted only in a
    refusal: a sweep's length stays a variable, grid.py)."""
    par, out = w.parallel, dict[str, object]()
    if w.seq is not None:
        out["seq"] = w.seq
    if w.context is not None:
        out["context"] = w.context
    if par.recompute != "none":
        out["recompute"] = par.recompute
    if par.grads != "fp32":
        out["grads"] = par.grads
    if par.offload:
        out["offload"] = par.offload
    if par.zero:
        out["zero"] = par.zero
    if par.microbatches > 1 and par.pp == 1:
        out["microbatches"] = par.microbatches
    return out


def check_reads(phases: Sequence[Phase], given: dict[str, object], weight_copies: int = 2) -> None:
    """Raise a SpecError for an option in `given` (READ_BY's name → its value, as the
    user typed it) that none of `phases` reads, or ZeRO over `weight_copies` of one."""
    for name, value in given.items():
        users = READ_BY[name]
        if not any(p in users for p in phases):
            pipeline = " or a pipeline (--pp)" if name == "microbatches" else ""
            raise SpecError(
                f"--{name} {value} applies to {' and '.join(users)}{pipeline}, and the "
                f"phases asked for are {', '.join(phases)}",
                filename="modelcost",
                hint=f"add {users[0]} to --phase, or leave --{name} out",
            )
    if "zero" in given and weight_copies == 1:
        raise SpecError(
            f"--zero {given['zero']} shards over the data-parallel replicas, and there is one",
            filename="modelcost",
            hint="add --dp (or --cp) ranks, or leave --zero out",
        )


def for_phase(w: Workload) -> Workload:
    """`w` for its own phase: what a multi-phase command gave every phase, less the
    options this one does not read (check_reads has checked that some phase does)."""
    given = given_options(w)
    unread = {k for k in given if w.phase not in READ_BY[k]}
    if not unread:
        return w
    par = w.parallel
    layout = replace(
        par,
        recompute="none" if "recompute" in unread else par.recompute,
        grads="fp32" if "grads" in unread else par.grads,
        offload=0 if "offload" in unread else par.offload,
        zero=0 if "zero" in unread else par.zero,
        microbatches=1 if "microbatches" in unread else par.microbatches,
    )
    return replace(w, seq=None if "seq" in unread else w.seq,
                   context=None if "context" in unread else w.context, parallel=layout)  # fmt: skip


def _sequence(spec: ir.Spec, w: Workload, patch: ir.PatchEmbed | None, limit: int | None,
              notes: list[str]) -> int:  # fmt: skip
    """The sequence length: as given, else the default within the learned positions
    (`limit`), noted; a model with a patch embedding takes its image's tokens, and
    another length given is an error."""
    S = w.seq
    if S is None:  # decode reads no sequence length: its note would say nothing true
        said = [] if w.phase is Phase.decode else notes
        S = _default_length("sequence length", DEFAULT_SEQ, limit, spec, said)
    if patch is None:
        return S
    image_tokens = patch.tokens
    if w.seq is not None and w.seq != image_tokens:
        raise SpecError(
            f"`{spec.name}` takes its sequence length from its image: {image_tokens} "
            f"tokens, not seq {w.seq}",
            filename="modelcost",
            hint="leave --seq out for a model with a patch embedding",
        )
    notes.append(
        f"sequence length {image_tokens} is set by the image: ({patch.image}/{patch.patch})² "
        "patches" + (" + 1 class token" if patch.cls_token else "")
    )
    return image_tokens


def _check_splits(spec: ir.Spec, w: Workload, S: int) -> None:
    """The layout's splits of the work, checked: the interleaved schedule (not for
    decode), each layer's sharding and the batch's split (check_layout), context
    parallelism's split of the sequence (not for decode)."""
    par = w.parallel
    if par.vpp > 1 and w.phase is Phase.decode:  # Megatron's schedules run forward-only
        raise refuse(  # too (prefill, evaluation); no serving engine interleaves a decode
            f"--vpp {par.vpp} interleaves Megatron-LM's pipeline schedule (training, or a "
            "forward-only prefill); a serving engine's decode runs no such schedule",
            "leave --vpp at 1 for decode",
        )
    check_layout(spec, par, w.batch)
    if par.cp > 1:
        if w.phase is Phase.decode:
            raise SpecError(
                "context parallelism splits a sequence's tokens: decode has one per sequence",
                filename="modelcost",
                hint="use --tp or --dp for decode",
            )
        if S % par.cp:
            raise SpecError(
                f"--cp {par.cp} does not divide the sequence length {S}",
                filename="modelcost",
                hint=f"use a sequence length that is a multiple of {par.cp}",
            )


def workload_shape(spec: ir.Spec, w: Workload) -> tuple[Shape, list[str]]:
    check_reads((w.phase,), given_options(w), w.parallel.weight_copies)
    notes: list[str] = []
    patch, positions, decodes = input_facts(spec)
    if w.phase is Phase.decode and not decodes:
        raise SpecError(
            f"decode needs a causal decoder, and `{spec.name}` has no causal attention or SSM",
            filename="modelcost",
            hint="use --phase prefill (a forward pass) or train",
        )
    limit = positions.positions if positions is not None else None
    S = _sequence(spec, w, patch, limit, notes)
    if w.context is not None:
        context = w.context
    elif w.phase is Phase.decode:
        context = _default_length("context", DEFAULT_CONTEXT, limit, spec, notes)
    else:
        context = DEFAULT_CONTEXT  # read by decode only
    length = context if w.phase is Phase.decode else S
    if positions is not None and length > positions.positions:
        what = "context" if w.phase is Phase.decode else "sequence length"
        raise SpecError(
            f"{what} {length} exceeds the {positions.positions} learned positions of `{spec.name}`",
            filename="modelcost",
            hint=f"use at most {positions.positions}",
        )
    par = w.parallel
    _check_splits(spec, w, S)
    B = w.batch // par.dp // par.microbatches  # sequences per microbatch of a replica
    prompt = _serving_extras(spec, w)
    streams, joins = _stream_lengths(spec, w)
    S += sum(n for _, n in joins)  # image tokens join the text
    context += sum(n for _, n in joins)
    tokens = B * (w.queries if w.phase is Phase.decode else S // par.cp) + w.chunk
    if par.sp and tokens % par.tp:
        raise SpecError(
            f"sequence parallelism splits {tokens} tokens over tp = {par.tp} ranks unevenly",
            filename="modelcost",
            hint=f"use a batch and length whose tokens per replica divide by {par.tp}",
        )
    if w.phase is Phase.decode:
        shape = Shape(w.phase, B, w.queries, context, False, par, w.chunk, prompt, w.prefix,
                      streams, joins)  # fmt: skip
        return shape, notes
    shape = Shape(w.phase, B, S // par.cp, S + w.prefix, settled(w).logits == "all", par,
                  prefix=w.prefix, streams=streams, joins=joins)  # fmt: skip
    return shape, notes


def _default_length(
    what: str, default: int, limit: int | None, spec: ir.Spec, notes: list[str]
) -> int:
    """A length the user left out: the default, or the model's learned positions where
    it has fewer (GPT-2's 1,024, BERT's 512), said in a note."""
    if limit is None or default <= limit:
        return default
    notes.append(f"{what} {limit}: the default {default} capped at the {limit} learned "
                 f"positions of `{spec.name}`")  # fmt: skip
    return limit


def _stream_lengths(
    spec: ir.Spec, w: Workload
) -> tuple[tuple[tuple[str, int], ...], tuple[tuple[str, int], ...]]:
    """Each encoder or tower stream's length for this workload (the spec's unless the
    workload names it), and the tokens each joining stream adds to a main sequence.
    Layouts and engine features not modelled across streams are refused here."""
    streams = streams_of(spec)
    own = {st.name: st for st in streams if not st.auxiliary}
    for name, _ in w.streams:
        if name not in own:
            aux = any(st.name == name for st in streams)
            raise SpecError(
                f"`{spec.name}` has no stream `{name}` with a length of its own"
                if aux or own else f"`{spec.name}` has one token stream: --stream does not apply",
                filename="modelcost",
                hint=("an auxiliary stream runs over the main sequence" if aux else
                      did_you_mean(name, list(own)) or
                      (f"streams: {', '.join(own)}" if own else None)),
            )  # fmt: skip
    if not own:
        return (), ()
    par = w.parallel
    refused = [what for what, on in (
        ("--pp", par.pp > 1), ("--cp", par.cp > 1), ("--sp", par.sp),
        ("--recompute full", par.recompute == "full"), ("--chunk", bool(w.chunk)),
        ("--prefix", bool(w.prefix)),
    ) if on]  # fmt: skip
    if refused:
        raise SpecError(
            f"{', '.join(refused)} with several token streams (`{spec.name}` has "
            f"{', '.join(own)}) is not modelled",
            filename="modelcost",
            hint="use --tp, --dp and --ep with encoder-decoder and multimodal models",
        )
    given = dict(w.streams)
    lengths = tuple((st.name, _stream_length(spec, st, given.get(st.name, st.length)))
                    for st in own.values())  # fmt: skip
    joins = tuple((st.name, st.joins) for st in own.values() if st.joins)
    return lengths, joins


def _stream_length(spec: ir.Spec, st: ir.Stream, n: int) -> int:
    """Stream `st`'s length `n`, checked: a fixed length (a tower's image, an audio
    window) not changed, within its learned positions, no shorter than the tokens it
    joins."""
    fixed = _fixed_length(st)
    if fixed and n != st.length:
        raise SpecError(
            f"stream `{st.name}` of `{spec.name}` takes its length from its {fixed}: "
            f"{st.length} tokens, not {n}",
            filename="modelcost",
            hint=f"leave --stream {st.name} out",
        )
    positions = next((op.positions for op, _ in walk(st.body)
                      if isinstance(op, ir.PositionEmbedding)), None)  # fmt: skip
    if positions is not None and n > positions:
        raise SpecError(
            f"stream `{st.name}` of `{spec.name}` has {positions} learned positions, "
            f"fewer than its length {n}",
            filename="modelcost",
            hint=f"--stream {st.name}={positions} at most",
        )
    if n < st.joins:
        raise SpecError(
            f"stream `{st.name}` joins {st.joins} tokens: its length {n} is shorter",
            filename="modelcost",
            hint=f"--stream {st.name}={st.joins} at least",
        )
    return n


@per_object
def _fixed_length(stream: ir.Stream) -> str:
    """What fixes a stream's length, if anything, as its first layer that does says it
    (`fixes_length` on the layer's class: an image, an audio window, a token grid)."""
    return next((op.fixes_length for op, _ in walk(stream.body) if op.fixes_length), "")


def _serving_extras(spec: ir.Spec, w: Workload) -> int:
    """Check a workload's prefix-cache hit and prefill chunk against the phase and the
    layers; the chunk's prompt length (its new tokens) when there is one."""
    if w.chunk and w.phase is not Phase.decode:
        raise SpecError(
            "a prefill chunk rides on a decode step: use --phase decode with --chunk",
            filename="modelcost",
            hint="for a plain prefill of the prompt use --phase prefill --seq",
        )
    if w.prefix and w.phase is Phase.train:
        raise SpecError("training has no prefix cache", filename="modelcost",
                        hint="--prefix is for prefill (and a decode step's chunk)")  # fmt: skip
    if w.prefix and w.phase is Phase.decode and not w.chunk:
        raise SpecError(
            "--prefix counts cached prompt tokens before a prefill: decode's cache is --context",
            filename="modelcost",
            hint="give --chunk too, or use --phase prefill",
        )
    if w.queries > 1:
        _check_queries(spec, w)
    if w.prompt and not w.chunk:
        raise SpecError("--prompt is the length of a chunk's prompts: give --chunk",
                        filename="modelcost")  # fmt: skip
    if (w.prefix or w.chunk) and w.parallel.cp > 1:
        raise SpecError(
            "context parallelism with a prefix cache or a prefill chunk is not modelled",
            filename="modelcost",
            hint="drop --cp",
        )
    if w.prefix or w.chunk:
        # a latent or recurrent layer would take prefix and chunk otherwise than
        # grouped-query attention does: its room refuses them, rather than have them
        # costed as attention
        asked = [f for f, on in ((Feature.chunk, w.chunk), (Feature.prefix, w.prefix)) if on]
        for op, _ in walk(spec.body):
            refusal = next(filter(None, map(room(op).refusal, asked)), None)
            if refusal is not None:
                chunk = refusal.feature is Feature.chunk
                what = "a prefill chunk" if chunk else "a prefix cache"
                raise SpecError(
                    f"{what} is modelled for attention layers; `{spec.name}` has a "
                    f"{type(op).__name__} layer ({refusal.why})",
                    filename="modelcost",
                    hint="leave out --chunk and --prefix for this model",
                )
    return w.prompt or w.chunk


def _check_queries(spec: ir.Spec, w: Workload) -> None:
    """Several new tokens per sequence (a speculative verify) ride on a decode step of
    attention layers alone, without a prefill chunk."""
    if w.phase is not Phase.decode or w.chunk:
        raise SpecError(
            f"{w.queries} queries per sequence are a decode step's (a speculative verify), "
            "without a prefill chunk",
            filename="modelcost",
            hint="use phase decode without a chunk",
        )
    for op, _ in walk(spec.body):
        refusal = room(op).refusal(Feature.queries)
        if refusal is not None:
            raise SpecError(
                f"a decode step of {w.queries} tokens per sequence is modelled for attention "
                f"layers; `{spec.name}` has a {type(op).__name__} layer ({refusal.why})",
                filename="modelcost",
                hint="speculative decoding is modelled for attention models",
            )
