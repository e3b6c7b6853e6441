"""Projections and heads: the LM head (vocabulary-parallel, with the training loss), a
replicated linear projection (a multimodal projector), DeepSeek-V3's multi-token
prediction input, and a classifier on the class token. None keeps anything across
decode steps."""

from __future__ import annotations

import modelcost.language.spec as ir
from modelcost.base.dtypes import DType
from modelcost.ir.parallel import vocab_shard
from modelcost.perfmodel import CrossEntropyOp, UnaryOp, bpe
from modelcost.perfmodel.misc import LOSS_BYTES

from .emit import ACT_FN, Emit, Lowerer, gemm
from .room import (
    Component,
    linear,
    plain_room,
)


def lower_lm_head(lw: Lowerer, e: Emit, op: ir.LMHead, name: str) -> None:
    s, d = lw.s, op.dtypes
    a = d.activations
    # logits for every position, or each sequence's last; a decode step's every new
    # token (S: one, or a speculative verify's k + 1, each checked against the draft)
    rows = s.T if (s.train or s.logits_all) else s.B * (s.S if s.decode else 1)
    vocab = vocab_shard(op.vocab, lw.tp)  # vocabulary-parallel
    # Megatron's output layer is no Transformer Engine module: TP communication
    # overlap (userbuffers) does not hide its gather
    x = lw.enter(e, name, op.dim, a, beside=False)
    rec = gemm(rows, vocab, op.dim, op.bias, d)
    logits = lw.gemm_node(e, name, rec, (x,))
    if op.softcap:
        logits = e.add(
            f"{name}.softcap",
            UnaryOp((rows, vocab), "tanh", a, a),
            (logits,),
            out=rows * vocab * bpe(a),
        )
    if s.train:
        logits = e.add("loss", CrossEntropyOp(rows, vocab, a), (logits,), out=rows * LOSS_BYTES)
        if lw.tp > 1:  # vocabulary-parallel cross-entropy: max, sum of exp, target
            logits = lw.collective(e, "loss.all_reduce", "all_reduce", 3 * rows, DType.fp32, logits)
    elif lw.tp > 1:  # every rank's slice of the logits, gathered
        logits = lw.collective(e, f"{name}.all_gather", "all_gather", rows * op.vocab, a, logits)
    e.stream = logits


def lower_linear(lw: Lowerer, e: Emit, op: ir.Linear, name: str) -> None:
    """A projection to `out` features: the stream and the residual are that wide
    after it."""
    s, d = lw.s, op.dtypes
    rec = gemm(s.T, op.out, op.dim, op.bias, d)
    y = lw.gemm_node(e, name, rec, (e.stream,))
    if op.act is not None:
        a = d.activations
        act = UnaryOp((s.T, op.out), ACT_FN[op.act], a, a)
        y = e.add(f"{name}.act", act, (y,), out=s.T * op.out * bpe(a))
    e.stream = e.residual_from = y


def lower_mtp_proj(lw: Lowerer, e: Emit, op: ir.MTPProjection, name: str) -> None:
    """The next token's embedding and the main model's last hidden state, each
    RMS-normalized, concatenated, and projected from 2·dim to dim."""
    s, d = lw.s, op.dtypes
    a, T = d.activations, s.T
    en = lw.rmsnorm_node(e, f"{name}.enorm", 1, op.dim, a, e.stream)
    hn = lw.rmsnorm_node(e, f"{name}.hnorm", 1, op.dim, a, lw.hidden)
    cat = e.add(f"{name}.concat", UnaryOp((T, 2 * op.dim), "copy", a, a), (en, hn),
                out=T * 2 * op.dim * bpe(a))  # fmt: skip
    rec = gemm(T, op.dim, 2 * op.dim, False, d)
    e.stream = e.residual_from = lw.gemm_node(e, f"{name}.eh_proj", rec, (cat,))


def lower_classifier(lw: Lowerer, e: Emit, op: ir.Classifier, name: str) -> None:
    s, d = lw.s, op.dtypes
    rec = gemm(s.B, op.classes, op.dim, op.bias, d)  # on each image's class token
    out = lw.gemm_node(e, name, rec, (e.stream,))
    if s.train:
        loss = CrossEntropyOp(s.B, op.classes, d.activations)
        out = e.add("loss", loss, (out,), out=s.B * LOSS_BYTES)
    e.stream = out


def _lm_head_params(op: ir.LMHead, tp: int, ep: int) -> tuple[int, int]:
    """Vocabulary-parallel; a tied head is the embedding's table."""
    return (0 if op.tied else linear(op.dim, vocab_shard(op.vocab, tp), op.bias)), 0


def _linear_params(op: ir.Linear, tp: int, ep: int) -> tuple[int, int]:
    """Replicated on every tensor-parallel rank."""
    return linear(op.dim, op.out, op.bias), 0


def _mtp_params(op: ir.MTPProjection, tp: int, ep: int) -> tuple[int, int]:
    """enorm, hnorm and eh_proj (2·dim → dim, no bias)."""
    return 2 * op.dim + linear(2 * op.dim, op.dim, False), 0


def _classifier_params(op: ir.Classifier, tp: int, ep: int) -> tuple[int, int]:
    return linear(op.dim, op.classes, op.bias), 0


LM_HEAD = plain_room(ir.LMHead, lower_lm_head, _lm_head_params, Component.head)
LINEAR = plain_room(ir.Linear, lower_linear, _linear_params, Component.mlp)
MTP_PROJECTION = plain_room(ir.MTPProjection, lower_mtp_proj, _mtp_params, Component.mlp)
CLASSIFIER = plain_room(ir.Classifier, lower_classifier, _classifier_params, Component.head)
