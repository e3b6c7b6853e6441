"""Attention and cross-attention: query and key/value heads with their projections,
split over tensor-parallel ranks by heads, keeping a KV cache (causal attention per
token of its own sequence, cross-attention per token of its source stream)."""

from __future__ import annotations

import modelcost.language.spec as ir
from modelcost.base.dtypes import DType
from modelcost.ir.parallel import heads_refusal, kv_heads
from modelcost.perfmodel import BinaryOp, NormOp, RopeOp, SdpaOp, UnaryOp, bpe

from .emit import Emit, Lowerer, gemm
from .room import EVERY_PARAM, REFUSES_NOTHING, Component, Room, kv_cache, linear


def heads_per_rank(op: ir.Attention | ir.CrossAttention, tp: int) -> tuple[int, int]:
    """(query heads, KV heads) on one of `tp` ranks: its params, cache and lowering
    split by this one rule (parallel.kv_heads: one replicated KV head when tp exceeds
    them)."""
    return op.heads // tp, kv_heads(op.kv_heads, tp)


def keys(lw: Lowerer, op: ir.Attention | ir.MLA) -> int:
    """Keys an SDPA op attends over (a chunked layer's decode: its chunk's). Under
    context parallelism a rank's queries are two chunks, one early and one late
    (Megatron-LM's load balancing), which attend exactly the causal pairs of S/cp
    queries over the last (S + S/cp)/2 keys: 1/cp of all of them."""
    s = lw.s
    if s.decode and isinstance(op, ir.Attention) and op.chunk:
        return (s.n_kv - 1) % op.chunk + 1  # the new token sees its own chunk only
    if lw.par.cp == 1 or s.decode or not op.causal:
        return s.n_kv
    return (s.n_kv + s.S) // 2


def _projections(lw: Lowerer, e: Emit, op: ir.Attention, name: str, H: int, KV: int,
                 x: str) -> tuple[str, str, str]:  # fmt: skip
    """The query, key and value projections of this rank's H query and KV key-value
    heads (the queries with their output gate where the model gates it): one fused GEMM,
    or one each."""
    s, d, hd = lw.s, op.dtypes, op.head_dim
    if op.fused_qkv:
        qkv = gemm(s.T, (H * (2 if op.gate else 1) + 2 * KV) * hd, op.dim, op.qkv_bias, d)
        q = lw.gemm_node(e, f"{name}.qkv_proj", qkv, (x,))
        return q, q, q
    q_n = H * hd * (2 if op.gate else 1)  # the queries and their output gate
    q = lw.gemm_node(e, f"{name}.q_proj", gemm(s.T, q_n, op.dim, op.qkv_bias, d), (x,))
    k = lw.gemm_node(e, f"{name}.k_proj", gemm(s.T, KV * hd, op.dim, op.qkv_bias, d), (x,))
    v = lw.gemm_node(e, f"{name}.v_proj", gemm(s.T, KV * hd, op.dim, op.qkv_bias, d), (x,))
    return q, k, v


def lower(lw: Lowerer, e: Emit, op: ir.Attention, name: str) -> None:
    s, d = lw.s, op.dtypes
    a, kv = d.activations, d.kv_cache
    (H, KV), hd = heads_per_rank(op, lw.tp), op.head_dim
    x = lw.enter(e, name, op.dim, a)
    q, k, v = _projections(lw, e, op, name, H, KV, x)
    if op.qk_norm:
        q = lw.rmsnorm_node(e, f"{name}.q_norm", H, hd, a, q)
        k = lw.rmsnorm_node(e, f"{name}.k_norm", KV, hd, a, k)
    if op.rope:
        q = k = e.add(
            f"{name}.rope", RopeOp(s.T, H + KV, hd, a), (q, k), out=s.T * (H + KV) * hd * bpe(a)
        )
    if op.qk_l2_norm:  # per head, no weight
        elems = s.T * (H + KV) * hd
        rec = NormOp("rmsnorm", elems, hd, False, False, s.train, a)
        q = k = e.add(f"{name}.qk_l2_norm", rec, (q, k), out=elems * bpe(a))
    cache_dtype, qa = a, a
    fp8 = lw.recipe.attention and not s.train  # FP8 attention (FlashAttention-3)
    if not s.train and op.causal:  # bidirectional attention keeps no cache
        lw.kv_write(e, name, op, _cache_per_token(op, lw.tp), (k, v))
        cache_dtype = kv if s.decode or fp8 else a
    if fp8:  # the queries too: QKᵀ and PV at the FP8 peak
        qa = DType.fp8_e4m3
        q = lw.quantize(e, f"{name}.sdpa", q, s.T, H * hd, a, qa)
    if lw.par.cp > 1:
        k = v = lw.ring(e, name, 2 * KV * hd, a, (k, v))
    sdpa = SdpaOp(
        s.B,
        s.S,
        H,
        keys(lw, op),
        KV,
        hd,
        hd,
        # a decode step's new queries (one, or a verify's k + 1) each see every cached key
        causal=op.causal and not s.decode,
        window=op.window,
        act=qa,
        kv=cache_dtype,
        chunk=op.chunk if not s.decode else 0,
        flash_impl=op.kernel is ir.AttentionKernel.flash,
    )
    att = e.add(f"{name}.sdpa", sdpa, (q, k, v), out=s.B * s.S * H * hd * bpe(a))
    lw.ring_merge(e, name, H * hd, H * hd, 2 * KV * hd, op.causal, a, att)
    parts = (att, *_chunk_attention(lw, e, name, op, H, KV, (q, k, v), qa))
    if op.gate:  # sigmoid(gate) ∘ attention output (Qwen3-Next)
        gated = (s.T, H * hd)
        g = e.add(f"{name}.gate", UnaryOp(gated, "sigmoid", a, a), (q,),
                  out=s.T * H * hd * bpe(a))  # fmt: skip
        parts = (e.add(f"{name}.gate_mul", BinaryOp(gated, gated, "mul", a, a, a),
                       (*parts, g), out=s.T * H * hd * bpe(a)),)  # fmt: skip
    o = lw.gemm_node(e, f"{name}.o_proj", gemm(s.T, op.dim, H * hd, op.out_bias, d), parts)
    e.stream = lw.exit(e, name, op.dim, a, o)


def _chunk_attention(
    lw: Lowerer, e: Emit, name: str, op: ir.Attention, H: int, KV: int, qkv, qa: DType
):
    """A decode step's prefill chunk attends apart from the decode tokens: its whole
    prompts causally over their own tokens (after any cached prefix), and a partial
    prompt's tokens as a chunk from the middle of a prompt, which attends exactly
    the mean (query, key) pairs of all the chunks a prompt is cut into."""
    s, a, kv, hd = lw.s, op.dtypes.activations, op.dtypes.kv_cache, op.head_dim
    if not s.chunk:
        return ()
    whole, rest = divmod(s.chunk, s.prompt)
    out = []
    for label, B, S, keys in (
        ("sdpa_prompts", whole, s.prompt, s.prefix + s.prompt),
        ("sdpa_chunk", 1 if rest else 0, rest, s.prefix + (s.prompt + rest) // 2),
    ):
        if B:
            rec = SdpaOp(B, S, H, keys, KV, hd, hd, causal=op.causal, window=op.window,
                         act=qa, kv=kv, chunk=op.chunk,
                         flash_impl=op.kernel is ir.AttentionKernel.flash)  # fmt: skip
            out.append(e.add(f"{name}.{label}", rec, qkv, out=B * S * H * hd * bpe(a)))
    return tuple(out)


def lower_cross(lw: Lowerer, e: Emit, op: ir.CrossAttention, name: str) -> None:
    """Queries from this stream; keys and values from the source stream's output,
    projected once by prefill into the cross-attention cache that decode reads."""
    s, d = lw.s, op.dtypes
    a, kv = d.activations, d.kv_cache
    (H, KV), hd = heads_per_rank(op, lw.tp), op.head_dim
    L = dict(s.streams)[op.source]
    x = lw.enter(e, name, op.dim, a)
    q = lw.gemm_node(e, f"{name}.q_proj", gemm(s.T, H * hd, op.dim, op.qkv_bias, d),
                     (x,))  # fmt: skip
    inputs: tuple[str, ...] = (q,)
    if not s.decode:
        src, rows = lw.outputs[op.source], s.B * L
        k_rec = gemm(rows, KV * hd, op.source_dim, op.k_bias, d)
        v_rec = gemm(rows, KV * hd, op.source_dim, op.qkv_bias, d)
        k = lw.gemm_node(e, f"{name}.k_proj", k_rec, (src,))
        v = lw.gemm_node(e, f"{name}.v_proj", v_rec, (src,))
        inputs = (q, k, v)
        if not s.train:  # kept for every decode step
            elements = rows * _cross_per_token(op, lw.tp)
            rec = UnaryOp((elements,), "copy", a, kv)
            e.add(f"{name}.kv_cache_write", rec, (k, v), out=elements * bpe(kv))
    sdpa = SdpaOp(s.B, s.S, H, L, KV, hd, hd, causal=False, act=a,
                  kv=kv if s.decode else a,
                  flash_impl=op.kernel is ir.AttentionKernel.flash)  # fmt: skip
    att = e.add(f"{name}.sdpa", sdpa, inputs, out=s.T * H * hd * bpe(a))
    o = lw.gemm_node(e, f"{name}.o_proj", gemm(s.T, op.dim, H * hd, op.out_bias, d),
                     (att,))  # fmt: skip
    e.stream = lw.exit(e, name, op.dim, a, o)


def _params(op: ir.Attention, tp: int, ep: int) -> tuple[int, int]:
    H, KV = heads_per_rank(op, tp)
    q, kv = H * op.head_dim, KV * op.head_dim
    n = (
        linear(op.dim, q * (2 if op.gate else 1), op.qkv_bias)  # and its gate
        + linear(op.dim, kv, op.k_bias)
        + linear(op.dim, kv, op.qkv_bias)
        + linear(q, op.dim, op.out_bias)
        + (2 * op.head_dim if op.qk_norm else 0)
        + (H if op.sinks else 0)
    )
    return n, 0


def _cross_params(op: ir.CrossAttention, tp: int, ep: int) -> tuple[int, int]:
    """As attention's, k and v read the source's width."""
    H, KV = heads_per_rank(op, tp)
    q, kv = H * op.head_dim, KV * op.head_dim
    n = (
        linear(op.dim, q, op.qkv_bias)
        + linear(op.source_dim, kv, op.k_bias)
        + linear(op.source_dim, kv, op.qkv_bias)
        + linear(q, op.dim, op.out_bias)
    )
    return n, 0


def _cache_per_token(op: ir.Attention, tp: int) -> int:
    """Keys and values of its KV heads on one rank (bidirectional attention, an
    encoder's, keeps none)."""
    return 2 * heads_per_rank(op, tp)[1] * op.head_dim if op.causal else 0


def _kept(op: ir.Attention, length: int, sources: dict[str, int]) -> int:
    """At most a window's or a chunk's tokens."""
    return min(length, op.window or op.chunk) if op.window or op.chunk else length


def _cross_per_token(op: ir.CrossAttention, tp: int) -> int:
    """Its source stream's keys and values, per source token."""
    return 2 * heads_per_rank(op, tp)[1] * op.head_dim


def _source_tokens(op: ir.CrossAttention, length: int, sources: dict[str, int]) -> int:
    return sources[op.source]


def _sharding(op: ir.Attention | ir.CrossAttention, par, where: str):
    """Its heads split over the tp ranks: tp divides the heads, and the KV heads and tp
    divide one another (each rank keeps kv_heads/tp, or one replicated)."""
    return heads_refusal(op.heads, op.kv_heads, par.tp, where)


ATTENTION = Room(
    kind=ir.Attention,
    lower=lower,
    params=_params,
    active=EVERY_PARAM,
    component=Component.attention,
    memory=kv_cache(_cache_per_token, _kept),
    sharding=_sharding,
    refuses=REFUSES_NOTHING,
)

CROSS_ATTENTION = Room(
    kind=ir.CrossAttention,
    lower=lower_cross,
    params=_cross_params,
    active=EVERY_PARAM,
    component=Component.attention,
    memory=kv_cache(_cross_per_token, _source_tokens),
    sharding=_sharding,
    refuses=REFUSES_NOTHING,
)
