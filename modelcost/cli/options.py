"""The workload and roofline options, declared once.

Each option's flag, parser, default and help live here; `modelcost compile`, `diff`
(with a `--NAME-b` for side B where that makes sense) and `site` take their flags from
this table, and the defaults are the constants the Python API uses (`Workload`,
`compile_report`; the domain's own settings are settings.py's), so the two cannot
drift apart.

How each flag's value is read is values.py's.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence

from modelcost.base.record import Record, replace
from modelcost.base.settings import (
    DEFAULT_ESTIMATE,
    DEFAULT_PEAK,
    ESTIMATE_MODES,
    PEAK_MODES,
)
from modelcost.estimate.engines import DEFAULT_ENGINE, ENGINES
from modelcost.ir.graph import (
    DEFAULT_BATCH,
    DEFAULT_CONTEXT,
    DEFAULT_SEQ,
    GRADS,
    ONE_DEVICE,
    OVERLAPS,
    Phase,
)
from modelcost.perfmodel import Conventions

from .values import (
    choices_of,
    counts,
    imbalance,
    listing,
    phases,
    positive,
    stream_lengths,
    whole,
    zero_stage,
)


class Option(Record, frozen=True):
    name: str  # the flag is --name, the argparse dest name
    parse: Callable[[str], object] | None
    default: object
    help: str
    choices: tuple[str, ...] | None = None
    sided: bool = False  # `diff` also takes --name-b for side B
    flag: bool = False  # takes no value: present means on


OPTIONS: dict[str, Option] = {
    o.name: o
    for o in (
        Option("phase", phases, [Phase.prefill],
               "prefill, decode or train; several separated by commas", sided=True),
        Option("batch", positive, DEFAULT_BATCH, "sequences per step", sided=True),
        Option("seq", positive, None, f"prefill/train length (default {DEFAULT_SEQ}; a "
               "vision model's is its image's token count)", sided=True),
        Option("context", positive, None,
               f"decode: cached positions per sequence (default {DEFAULT_CONTEXT})", sided=True),
        Option("prefix", whole, 0, "prefill: prompt tokens already cached before each "
               "sequence (a prefix-cache hit); decode: before each prompt of --chunk"),
        Option("chunk", whole, 0, "decode: prompt tokens prefilled in the same step "
               "(chunked prefill), per replica"),
        Option("prompt", whole, 0, "decode: new tokens in each prompt the chunk comes from "
               "(default: one prompt of --chunk)"),
        Option("stream", stream_lengths, (), "another token stream's length per sequence, "
               "NAME=LENGTH (T5's source: encoder=512); default the spec's", sided=True),
        Option("logits", None, None,
               "prefill: logits for every position or each sequence's last (default last, "
               "as serving engines compute them; all under --conventions tracelens)",
               ("all", "last")),
        Option("conventions", None, Conventions.modelcost.value,
               "counting conventions: modelcost's, or TraceLens's exactly",
               tuple(c.value for c in Conventions)),
        Option("peak", None, DEFAULT_PEAK,
               "compute peaks: the datasheet's, or the best published measurement", PEAK_MODES),
        Option("bandwidth", None, DEFAULT_PEAK,
               "HBM bandwidth: the datasheet's, or the best published measurement", PEAK_MODES),
        Option("estimate", None, DEFAULT_ESTIMATE,
               "how step times are read: the roofline (a bound) alone, or the kernel-aware "
               "estimate (what the kernels that would serve each op do) beside it",
               ESTIMATE_MODES),
        Option("calibrate", str, None, "a calibration file (modelcost calibrate) on top of "
               "the kernel-aware estimate; implies --estimate kernels"),
        Option("engine", None, DEFAULT_ENGINE, "the serving engine "
               "(specs/kernels/engines.json): the custom all-reduce an inference step's "
               "collectives run as in the estimate (a training step's run as NCCL/RCCL's); "
               "under serve also its per-step overhead, the memory it keeps back and its "
               "batching defaults", ENGINES),
        Option("moe-imbalance", imbalance, None,
               "the kernel-aware estimate's routed load on the hottest expert and expert "
               "rank over the mean (default: the documented figure, specs/kernels/"
               "library.json `moe`: DeepSeek-R1 without EPLB, TensorRT-LLM); the "
               "roofline, a bound, keeps the mean"),
        Option("tp", positive, ONE_DEVICE.tp, "tensor-parallel ranks (Megatron)", sided=True),
        Option("sp", None, ONE_DEVICE.sp,
               "sequence parallelism with tp: reduce-scatter/all-gather instead of "
               "all-reduce, norms on 1/tp of the tokens", flag=True),
        Option("dp", positive, ONE_DEVICE.dp,
               "data-parallel replicas (the batch is the whole job's)", sided=True),
        Option("ep", positive, ONE_DEVICE.ep,
               "expert-parallel ranks, taken from the dp ranks where ep divides dp, else "
               "folded onto the tp × dp ranks (vLLM's --enable-expert-parallel, SGLang's "
               "--ep)", sided=True),
        Option("etp", positive, ONE_DEVICE.etp,
               "expert tensor-parallel ranks: each expert's width split over them (default: "
               "tp where ep is taken from dp, 1 where ep folds onto tp × dp); ep × etp "
               "must divide tp × dp (Megatron-Core's MoE parallel folding)", sided=True),
        Option("zero", zero_stage, ONE_DEVICE.zero,
               "training: ZeRO stage over the dp ranks (3 = FSDP)", sided=True),
        Option("pp", positive, ONE_DEVICE.pp,
               "pipeline stages (the report is the last stage's device)", sided=True),
        Option("vpp", positive, ONE_DEVICE.vpp,
               "virtual pipeline stages per --pp stage (Megatron-LM's interleaved 1F1B): "
               "the bubble / vpp, the p2p traffic × vpp", sided=True),
        Option("cp", positive, ONE_DEVICE.cp,
               "context-parallel ranks: 1/cp of each sequence, ring attention "
               "(prefill, train)", sided=True),
        Option("microbatches", positive, ONE_DEVICE.microbatches,
               "microbatches per replica and step (pipeline: 1F1B)", sided=True),
        Option("overlap", None, ONE_DEVICE.overlap,
               "collectives hidden behind compute: none; megatron, those Megatron-Core "
               "runs beside compute (gradient sync, sp gathers under TP overlap, ring "
               "attention, interleaved p2p); full, all as far as compute lasts",
               OVERLAPS, sided=True),
        Option("grads", None, ONE_DEVICE.grads,
               "training: the dtype gradients are accumulated and reduced in: fp32 "
               "(Megatron-LM's for bf16 models), or param, the parameters' own "
               "(Megatron-Bridge's performance recipes: grad_reduce_in_fp32 False)",
               GRADS, sided=True),
        Option("offload", whole, ONE_DEVICE.offload,
               "training: layers whose saved activations go to host memory in the "
               "forward and come back for the backward, beside compute (Megatron-Core's "
               "cpu_offloading_num_layers; one pipeline stage, no recomputation)",
               sided=True),
        Option("recompute", None, ONE_DEVICE.recompute,
               "training: activation recomputation (Korthikanti et al. 2022)",
               ("none", "selective", "full"), sided=True),
    )
}  # fmt: skip


def add_options(
    parser: argparse.ArgumentParser,
    names: Sequence[str],
    *,
    sides: bool = False,
    lists: bool = False,
    defaults: Mapping[str, object] | None = None,
) -> None:
    """Add the flags of `names` to `parser`; with `sides`, a `--NAME-b` for each option
    that can differ on side B of a diff (None there means: as side A); with `lists`
    (a sweep), each option takes several values and its default is a one-value list;
    `defaults` overrides an option's default for this command (serve's estimate)."""
    for name in names:
        o = OPTIONS[name]
        if defaults and name in defaults:
            o = replace(o, default=defaults[name])
        shown = "" if o.default in (None, ()) or o.name == "phase" else f" (default {o.default})"
        if o.flag:
            parser.add_argument(f"--{name}", action="store_true", help=o.help)
            continue
        kwargs: dict = {"default": o.default, "help": o.help + shown}
        if o.parse is not None:
            kwargs["type"] = o.parse
        if o.choices is not None:
            kwargs["choices"] = o.choices
        if lists and name != "phase":  # phase is a list already
            kwargs.pop("choices", None)
            if o.parse is positive:
                kwargs["type"] = counts
            elif o.parse is not None:
                kwargs["type"] = listing(o.parse)
            elif o.choices is not None:
                kwargs["type"] = choices_of(o.choices)
            kwargs["default"] = [o.default]
            kwargs["help"] += "; several: a,b,c or lo..hi (doubling) or lo..hi+step"
        parser.add_argument(f"--{name}", **kwargs)
        if sides and o.sided:
            parser.add_argument(f"--{name}-b", **{**kwargs, "default": None,
                                                   "help": f"{name} of side B"})  # fmt: skip


WORKLOAD = ("phase", "batch", "seq", "context", "stream", "logits")


ENGINE = ("prefix", "chunk", "prompt")  # what serving engines do to a step


LAYOUT = ("tp", "sp", "cp", "dp", "ep", "etp", "zero", "pp", "vpp", "microbatches", "overlap",
          "recompute", "grads", "offload")  # fmt: skip


# a site shows prefill and decode: no context parallelism (decode has no sequence to
# split) and nothing that only training reads
SITE_LAYOUT = ("tp", "sp", "dp", "ep", "etp", "pp", "microbatches", "overlap")


ROOFLINE = ("conventions", "peak", "bandwidth")


ESTIMATE = ("estimate", "calibrate", "engine")


MOE = ("moe-imbalance",)  # compile and diff: the estimate's routing imbalance
