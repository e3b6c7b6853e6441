"""What puts tokens into a stream: the token embedding (vocabulary-parallel), learned
position and token-type tables, a vision patch embedding, an audio convolution stem,
and T5's relative position bias table. None keeps anything across decode steps."""

from __future__ import annotations

import modelcost.language.spec as ir
from modelcost.ir.parallel import vocab_shard
from modelcost.perfmodel import BinaryOp, ConvOp, EmbeddingOp, UnaryOp, bpe

from .emit import Emit, Lowerer
from .room import (
    Component,
    Params,
    Room,
    linear,
    plain_room,
)


def lower_embed(lw: Lowerer, e: Emit, op: ir.Embedding, name: str) -> None:
    s, d = lw.s, op.dtypes
    a = d.activations
    joined = s.B * s.joined if lw.joining else 0  # their places are not looked up
    rec = EmbeddingOp(s.T - joined, vocab_shard(op.vocab, lw.tp), op.dim, d.weights, a)
    x = e.add(name, rec, (), out=(s.T - joined) * op.dim * bpe(a))
    x = lw.exit(e, name, op.dim, a, x)
    if joined:  # the towers' tokens written into their places (LLaVA's masked scatter)
        lw.joining = False
        rec_join = UnaryOp((joined, op.dim), "copy", a, a)
        sources = tuple(lw.outputs[n] for n, _ in s.joins if n in lw.outputs)
        x = e.add(f"{name}.join", rec_join, (x, *sources), out=s.T * op.dim * bpe(a))
    e.stream = e.residual_from = x


def lower_pos_embed(lw: Lowerer, e: Emit, op: ir.PositionEmbedding, name: str) -> None:
    _added_table(lw, e, op.positions, op, name)


def lower_type_embed(lw: Lowerer, e: Emit, op: ir.TokenTypeEmbedding, name: str) -> None:
    _added_table(lw, e, op.types, op, name)


def _added_table(lw: Lowerer, e: Emit, rows: int, op: ir.Op, name: str) -> None:
    """A learned table looked up per token and added to the stream."""
    s, d = lw.s, op.dtypes
    T = s.T_seq
    rec = EmbeddingOp(T, rows, op.dim, d.weights, d.activations)
    out = T * op.dim * bpe(d.activations)
    pos = e.add(name, rec, (), out=out)
    add = BinaryOp((T, op.dim), (T, op.dim), "add", *(d.activations,) * 3)
    e.stream = e.residual_from = e.add(f"{name}.add", add, (e.stream, pos), out=out)


def lower_patch_embed(lw: Lowerer, e: Emit, op: ir.PatchEmbed, name: str) -> None:
    d = op.dtypes
    x = (lw.s.B, op.channels, op.image, op.image)
    w = (op.dim, op.channels, op.patch, op.patch)
    rec = ConvOp(x, w, stride=(op.patch,), bias=op.bias, dtype=d.activations)
    out = lw.s.T * op.dim * bpe(d.activations)
    e.stream = e.residual_from = e.add(name, rec, (), out=out)


def lower_conv_stem(lw: Lowerer, e: Emit, op: ir.ConvStem, name: str) -> None:
    """Whisper's two convolutions (padding k//2, the second of stride 2) over twice
    the stream's length in mel frames, each with a GELU."""
    s, a = lw.s, op.dtypes.activations
    x, channels, frames = "", op.mels, 2 * s.S
    for i, stride in ((1, 1), (2, 2)):
        conv = ConvOp(
            (s.B, channels, frames),
            (op.dim, channels, op.kernel),
            stride=(stride,),
            padding=(op.kernel // 2,),
            bias=True,
            dtype=a,
        )
        frames //= stride
        out = s.B * frames * op.dim * bpe(a)
        x = e.add(f"{name}.conv{i}", conv, (x,) if x else (), out=out)
        gelu = UnaryOp((s.B * frames, op.dim), "gelu", a, a)
        x = e.add(f"{name}.gelu{i}", gelu, (x,), out=out)
        channels = op.dim
    e.stream = e.residual_from = x


def lower_rel_pos_bias(lw: Lowerer, e: Emit, op: ir.RelativePositionBias, name: str) -> None:
    """T5's bias table looked up once per (query, key) pair of a sequence (the same
    for every sequence of the batch) and read by every layer's attention."""
    s, d = lw.s, op.dtypes
    pairs = s.S * s.n_kv
    rec = EmbeddingOp(pairs, op.buckets, op.heads, d.weights, d.activations)
    e.add(name, rec, (), out=pairs * op.heads * bpe(d.activations))


def _embed_params(op: ir.Embedding, tp: int, ep: int) -> tuple[int, int]:
    """Vocabulary-parallel; a tied table is another stream's."""
    return (0 if op.tied else vocab_shard(op.vocab, tp) * op.dim), 0


def _pos_params(op: ir.PositionEmbedding, tp: int, ep: int) -> tuple[int, int]:
    return op.positions * op.dim, 0


def _type_params(op: ir.TokenTypeEmbedding, tp: int, ep: int) -> tuple[int, int]:
    return op.types * op.dim, 0


def _patch_params(op: ir.PatchEmbed, tp: int, ep: int) -> tuple[int, int]:
    conv = linear(op.channels * op.patch * op.patch, op.dim, op.bias)
    return conv + (op.dim if op.cls_token else 0), 0


def _conv_stem_params(op: ir.ConvStem, tp: int, ep: int) -> tuple[int, int]:
    """Two convolutions with biases: mels → dim, dim → dim."""
    return linear(op.mels * op.kernel, op.dim, True) + linear(op.dim * op.kernel, op.dim, True), 0


def _rel_pos_params(op: ir.RelativePositionBias, tp: int, ep: int) -> tuple[int, int]:
    return op.buckets * op.heads, 0


def _table(kind: type[ir.IR], lower, params: Params) -> Room:
    """A replicated embedding-like kind (the vocabulary split is in its params and
    lowering: any tp pads to a multiple)."""
    return plain_room(kind, lower, params, Component.embedding)


EMBEDDING = _table(ir.Embedding, lower_embed, _embed_params)
POSITION_EMBEDDING = _table(ir.PositionEmbedding, lower_pos_embed, _pos_params)
TOKEN_TYPE_EMBEDDING = _table(ir.TokenTypeEmbedding, lower_type_embed, _type_params)
PATCH_EMBED = _table(ir.PatchEmbed, lower_patch_embed, _patch_params)
CONV_STEM = _table(ir.ConvStem, lower_conv_stem, _conv_stem_params)
RELATIVE_POSITION_BIAS = _table(ir.RelativePositionBias, lower_rel_pos_bias, _rel_pos_params)
