"""Token-level ops around the layers: embedding lookup, rotary embedding, cross-entropy."""

from __future__ import annotations

from typing import ClassVar

from modelcost.base.dtypes import DType

from .base import Number, OpRecord, Unit, bpe

TOKEN_ID_BYTES = 8  # int64 token ids / targets
LOSS_BYTES = 4  # fp32 per-token loss (or log-sum-exp)


class EmbeddingOp(OpRecord, frozen=True):
    """Gather `tokens` rows of a vocab × dim table (no FLOPs)."""

    kind: ClassVar[str] = "Embedding"
    unit: ClassVar[Unit] = Unit.vector

    tokens: int
    vocab: int
    dim: int
    weight: DType = DType.bf16
    out: DType = DType.bf16

    def describe(self) -> str:
        return f"{self.tokens:,} rows of {self.vocab:,}×{self.dim}"

    def flops(self) -> Number:
        return 0

    def bytes(self) -> Number:
        rows = self.tokens * self.dim
        return rows * bpe(self.weight) + self.tokens * TOKEN_ID_BYTES + rows * bpe(self.out)

    def flops_bwd(self) -> Number:
        return self.tokens * self.dim  # scatter-add of dY into the table's gradient

    def bytes_bwd(self) -> Number:
        rows = self.tokens * self.dim
        # read dY and ids; read-modify-write the touched gradient rows
        return rows * bpe(self.out) + self.tokens * TOKEN_ID_BYTES + 2 * rows * bpe(self.weight)


class FusedRoPE:
    """Rotary embedding: 3 FLOPs per element (6 per rotated pair); cos/sin not counted."""

    @staticmethod
    def flops_func(num_elems: int) -> int:
        return 3 * num_elems

    @staticmethod
    def bytes_func(num_elems: int, bytes_per_element: Number) -> Number:
        return 2 * num_elems * bytes_per_element


class RopeOp(OpRecord, frozen=True):
    """RoPE on a (tokens, heads, rotary_dim) slice of queries or keys."""

    kind: ClassVar[str] = "FusedRoPE"
    unit: ClassVar[Unit] = Unit.vector

    tokens: int
    heads: int
    rotary_dim: int
    dtype: DType = DType.bf16

    @property
    def num_elems(self) -> int:
        return self.tokens * self.heads * self.rotary_dim

    def describe(self) -> str:
        return f"{self.tokens:,}×{self.heads}×{self.rotary_dim}"

    def flops(self) -> Number:
        return FusedRoPE.flops_func(self.num_elems)

    def bytes(self) -> Number:
        return FusedRoPE.bytes_func(self.num_elems, bpe(self.dtype))

    # the gradient is the inverse rotation: the same work
    flops_bwd = flops
    bytes_bwd = bytes

    def backward_reads_inputs(self) -> bool:
        return False  # the inverse rotation needs only the angles (Megatron's fused RoPE)


class CrossEntropy:
    """Cross-entropy over logits (batch, vocab): 5 FLOPs per logit; int64 targets in,
    fp32 loss out."""

    @staticmethod
    def flops_func(batch: int, vocab: int) -> int:
        return 5 * batch * vocab

    @staticmethod
    def bytes_func(batch: int, vocab: int, bytes_per_element: Number) -> Number:
        return batch * vocab * bytes_per_element + TOKEN_ID_BYTES * batch + LOSS_BYTES * batch


class CrossEntropyOp(OpRecord, frozen=True):
    kind: ClassVar[str] = "CrossEntropy"
    unit: ClassVar[Unit] = Unit.vector

    tokens: int
    vocab: int
    dtype: DType = DType.bf16

    def flops(self) -> Number:
        return CrossEntropy.flops_func(self.tokens, self.vocab)

    def bytes(self) -> Number:
        return CrossEntropy.bytes_func(self.tokens, self.vocab, bpe(self.dtype))

    def flops_bwd(self) -> Number:
        # p = exp(x − lse) (2), minus the one-hot and times the loss gradient (2)
        return 4 * self.tokens * self.vocab

    def bytes_bwd(self) -> Number:
        # read logits, targets and the saved lse; write dlogits
        logits = self.tokens * self.vocab * bpe(self.dtype)
        return 2 * logits + self.tokens * (TOKEN_ID_BYTES + LOSS_BYTES)
