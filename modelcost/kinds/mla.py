"""Multi-head latent attention (DeepSeek-V2/V3): its query heads split over the
tensor-parallel ranks, its low-rank a-projections and its latent KV cache replicated;
decode runs the absorbed form over the latent cache."""

from __future__ import annotations

import modelcost.language.spec as ir
from modelcost.ir.parallel import heads_refusal
from modelcost.perfmodel import RopeOp, SdpaOp, bpe

from .attention import keys
from .emit import Emit, Lowerer, gemm
from .room import EVERY_PARAM, Component, Feature, Refusal, Room, kv_cache

MLA_DECODE_NOTE = (
    "MLA decode uses the absorbed form: attention runs over the compressed latent cache "
    "(one KV head, d_qk = kv_lora_rank + qk_rope_head_dim, d_v = kv_lora_rank); W_UK and "
    "W_UV are applied as per-head batched GEMMs."
)


def _queries(lw: Lowerer, e: Emit, op: ir.MLA, name: str, H: int, x: str) -> str:
    """This rank's H heads' queries: through the low-rank projection and its norm where
    the model has one (DeepSeek-V2/V3's q_lora_rank), else one GEMM."""
    s, d, a = lw.s, op.dtypes, op.dtypes.activations
    n = H * (op.qk_nope_head_dim + op.qk_rope_head_dim)
    if not op.q_lora_rank:
        return lw.gemm_node(e, f"{name}.q_proj", gemm(s.T, n, op.dim, False, d), (x,))
    q = lw.gemm_node(e, f"{name}.q_a_proj", gemm(s.T, op.q_lora_rank, op.dim, False, d), (x,))
    q = lw.rmsnorm_node(e, f"{name}.q_a_norm", 1, op.q_lora_rank, a, q)
    return lw.gemm_node(e, f"{name}.q_b_proj", gemm(s.T, n, op.q_lora_rank, False, d), (q,))


def lower(lw: Lowerer, e: Emit, op: ir.MLA, name: str) -> None:
    s, d = lw.s, op.dtypes
    a, kv = d.activations, d.kv_cache
    H, nope, rope, vd, r = (
        op.heads // lw.tp,
        op.qk_nope_head_dim,
        op.qk_rope_head_dim,
        op.v_head_dim,
        op.kv_lora_rank,
    )
    x = lw.enter(e, name, op.dim, a)
    q = _queries(lw, e, op, name, H, x)
    c = lw.gemm_node(e, f"{name}.kv_a_proj", gemm(s.T, r + rope, op.dim, False, d), (x,))
    c = lw.rmsnorm_node(e, f"{name}.kv_a_norm", 1, r, a, c)
    q = e.add(
        f"{name}.rope", RopeOp(s.T, H + 1, rope, a), (q, c), out=s.T * (H + 1) * rope * bpe(a)
    )
    if not s.train and op.causal:
        lw.kv_write(e, name, op, _cache_per_token(op, lw.tp), (c,))
    flash = op.kernel is ir.AttentionKernel.flash
    if s.decode:
        if MLA_DECODE_NOTE not in lw.notes:
            lw.notes.append(MLA_DECODE_NOTE)
        ql = lw.gemm_node(
            e,
            f"{name}.q_absorb",
            gemm(s.T, r, nope, False, d, batch=H, quantized=False),
            (q,),
        )
        sdpa = SdpaOp(s.B, s.S, H, s.n_kv, 1, r + rope, r, causal=False, act=a, kv=kv,
                      flash_impl=flash, v_in_k=True)  # fmt: skip
        att = e.add(f"{name}.sdpa", sdpa, (ql, c), out=s.T * H * r * bpe(a))
        att = lw.gemm_node(
            e,
            f"{name}.o_absorb",
            gemm(s.T, vd, r, False, d, batch=H, quantized=False),
            (att,),
        )
    else:
        kvb = lw.gemm_node(e, f"{name}.kv_b_proj", gemm(s.T, H * (nope + vd), r, False, d), (c,))
        # the ring sends each head's key (the rope part broadcast to it, as Megatron-Core
        # builds the keys) and value: Transformer Engine's torch.cat of k and v
        ring = H * (nope + rope + vd)
        kvb = lw.ring(e, name, ring, a, kvb)
        n_keys = keys(lw, op)
        sdpa = SdpaOp(s.B, s.S, H, n_keys, H, nope + rope, vd, causal=op.causal, act=a, kv=a,
                      flash_impl=flash)  # fmt: skip
        att = e.add(f"{name}.sdpa", sdpa, (q, kvb), out=s.T * H * vd * bpe(a))
        lw.ring_merge(e, name, H * (nope + rope), H * vd, ring, op.causal, a, att)
    o = lw.gemm_node(e, f"{name}.o_proj", gemm(s.T, op.dim, H * vd, False, d), (att,))
    e.stream = lw.exit(e, name, op.dim, a, o)


def _params(op: ir.MLA, tp: int, ep: int) -> tuple[int, int]:
    """The low-rank a-projections are replicated, the heads split."""
    heads = op.heads // tp
    qk_head = op.qk_nope_head_dim + op.qk_rope_head_dim
    if op.q_lora_rank:
        q = op.dim * op.q_lora_rank + op.q_lora_rank + op.q_lora_rank * heads * qk_head
    else:
        q = op.dim * heads * qk_head
    kv = (
        op.dim * (op.kv_lora_rank + op.qk_rope_head_dim)
        + op.kv_lora_rank
        + op.kv_lora_rank * heads * (op.qk_nope_head_dim + op.v_head_dim)
    )
    return q + kv + heads * op.v_head_dim * op.dim, 0


def _cache_per_token(op: ir.MLA, tp: int) -> int:
    """The latent and the rope key: not split by heads, so every rank keeps all of it."""
    return op.kv_lora_rank + op.qk_rope_head_dim if op.causal else 0


def _sharding(op: ir.MLA, par, where: str):
    """Its heads split over the tp ranks (tp divides them); the latent cache is every
    rank's whole."""
    return heads_refusal(op.heads, None, par.tp, where)


# a prefix or a chunk would up-project cached latents: not costed as attention's
_LATENT = "MLA up-projects its cached latents"

MLA = Room(
    kind=ir.MLA,
    lower=lower,
    params=_params,
    active=EVERY_PARAM,
    component=Component.attention,
    memory=kv_cache(_cache_per_token),
    sharding=_sharding,
    refuses=(Refusal(Feature.chunk, _LATENT), Refusal(Feature.prefix, _LATENT)),
)
