"""What one device of a parallel layout holds and runs: the sharding rules, in one place.

Megatron-LM's tensor parallelism (Shoeybi et al. 2019; Korthikanti et al. 2022 for
sequence parallelism): attention splits its query heads over the tp ranks (KV heads
too; when tp exceeds them each rank keeps one, replicated), MLPs their hidden width,
Mamba-2 its heads and groups, the embedding and the LM head their vocabulary (padded to
a multiple of tp); norms, routers, positions, patch embeddings, poolers and classifiers
are replicated. Experts are split over ep ranks, each expert's width over tp.

The parameter formulas, per device and in total, are `params.device_params` (with
`kv_heads` and `vocab_shard`); lowering splits its ops by the same rules. This module's
`check_layout` refuses a layout a spec cannot run, naming the layer and the flag to
change.
"""

from __future__ import annotations

from . import spec as ir
from .errors import SpecError
from .graph import Parallel
from .params import walk


def _refuse(what: str, hint: str) -> SpecError:
    return SpecError(what, filename="modelcost", hint=hint)


def check_layout(spec: ir.Spec, par: Parallel, batch: int) -> None:
    """Raise a SpecError for a layout `spec` cannot run with `batch` sequences."""
    if batch % (par.dp * par.microbatches):
        raise _refuse(
            f"batch {batch} does not split over dp = {par.dp} replicas of "
            f"{par.microbatches} microbatch{'es' if par.microbatches > 1 else ''}",
            f"use a batch that is a multiple of {par.dp * par.microbatches}",
        )
    if par.single:
        return
    tp, ep = par.tp, par.ep
    has_experts = False
    for op, _ in walk(spec.body):
        where = f"`{op.kind}` of `{spec.name}`"
        match op:
            case ir.Attention() | ir.MLA() if op.heads % tp:
                raise _refuse(
                    f"--tp {tp} does not divide the {op.heads} heads of {where}",
                    f"tensor parallelism splits attention by heads: use a divisor of {op.heads}",
                )
            case ir.Attention() if op.kv_heads % tp and tp % op.kv_heads:
                raise _refuse(
                    f"--tp {tp} and the {op.kv_heads} KV heads of {where} do not divide "
                    "one another",
                    "each rank keeps kv_heads/tp KV heads, or one replicated when tp exceeds them",
                )
            case ir.MLP() if op.d_ff % tp:
                raise _refuse(
                    f"--tp {tp} does not divide d_ff = {op.d_ff} of {where}",
                    f"use a divisor of {op.d_ff}",
                )
            case ir.MoE():
                has_experts = True
                if op.experts % ep:
                    raise _refuse(
                        f"--ep {ep} does not divide the {op.experts} experts of {where}",
                        f"use a divisor of {op.experts}",
                    )
                if op.d_ff % tp or (op.shared_experts and op.shared_d_ff % tp):
                    raise _refuse(
                        f"--tp {tp} does not divide the expert width d_ff = {op.d_ff} "
                        f"(or the shared experts') of {where}",
                        "each expert's width is split over the tp ranks",
                    )
            case ir.Mamba2() if par.cp > 1:
                raise _refuse(
                    f"--cp {par.cp}: the SSM scan of {where} runs along the whole sequence",
                    "context parallelism is for attention layers; use --tp or --dp",
                )
            case ir.Mamba2() if op.heads % tp or op.groups % tp:
                raise _refuse(
                    f"--tp {tp} does not divide the {op.heads} SSD heads and "
                    f"{op.groups} groups of {where}",
                    "tensor parallelism splits Mamba-2 by heads and by B/C groups",
                )
    if ep > 1 and not has_experts:
        raise _refuse(
            f"--ep {ep}: `{spec.name}` has no experts to split",
            "expert parallelism applies to MoE layers; use --dp for data parallelism",
        )
