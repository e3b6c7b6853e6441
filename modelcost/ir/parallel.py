"""What one device of a parallel layout holds and runs: the sharding rules, in one place.

Megatron-LM's tensor parallelism (Shoeybi et al. 2019; Korthikanti et al. 2022 for
sequence parallelism): attention splits its query heads over the tp ranks (KV heads
too; when tp exceeds them each rank keeps one, replicated), MLPs their hidden width,
Mamba-2 its heads and groups, Gated DeltaNet its key and value heads, the embedding and
the LM head their vocabulary (padded to a multiple of tp); norms, routers, positions,
patch embeddings, poolers and classifiers are replicated. Experts are split over ep
ranks, each expert's width over tp.

This module holds the per-rank arithmetic every kind shares (`kv_heads`, `vocab_shard`)
and the refusal a kind's sharding rule raises; each kind's room (modelcost/kinds) says
which of its widths split and what layout it refuses, and its parameters and lowering
split by the same rules. `validate.check_layout` asks every layer's room.
"""

from __future__ import annotations

from modelcost.base.errors import SpecError


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def kv_heads(kv: int, tp: int) -> int:
    """KV heads one of `tp` tensor-parallel ranks keeps: kv/tp, or one (replicated)
    when tp exceeds them."""
    return kv // tp if kv >= tp else 1


def vocab_shard(vocab: int, tp: int) -> int:
    """One rank's slice of a vocabulary-parallel embedding or head (padded to tp)."""
    return ceil_div(vocab, tp)


def refuse(what: str, hint: str) -> SpecError:
    """A layout refused: what does not split, and how to choose one that does."""
    return SpecError(what, filename="modelcost", hint=hint)


def heads_refusal(heads: int, kv: int | None, tp: int, where: str) -> SpecError | None:
    """Attention's rule: tp divides the query heads, and the KV heads and tp divide one
    another (`kv` None: no KV heads of its own, MLA's latent)."""
    if heads % tp:
        return refuse(
            f"--tp {tp} does not divide the {heads} heads of {where}",
            f"tensor parallelism splits attention by heads: use a divisor of {heads}",
        )
    if kv is not None and kv % tp and tp % kv:
        return refuse(
            f"--tp {tp} and the {kv} KV heads of {where} do not divide one another",
            "each rank keeps kv_heads/tp KV heads, or one replicated when tp exceeds them",
        )
    return None
