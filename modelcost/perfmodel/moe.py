"""Mixture-of-experts pieces: routing, token dispatch/combine, and how many experts a
batch touches. (The expert matmuls themselves are GroupedGemm.)"""

from __future__ import annotations

from typing import ClassVar, Literal

from modelcost.base.dtypes import DType

from .base import Number, OpRecord, Unit, bpe


def expected_experts_hit(experts: int, top_k: int, tokens: int) -> float:
    """Expected distinct experts that `tokens` tokens route to, each picking `top_k` of
    `experts` uniformly: E·(1 − ((E − k)/E)^T). Weight bytes scale with this at decode."""
    return experts * (1 - ((experts - top_k) / experts) ** tokens)


class MoEComm:
    """Token dispatch / combine: moves each token's hidden vector once (no FLOPs)."""

    @staticmethod
    def flops_func(num_tokens: int, hidden_dim: int) -> int:
        return 0

    @staticmethod
    def bytes_func(num_tokens: int, hidden_dim: int, bytes_per_element: Number) -> Number:
        return num_tokens * hidden_dim * bytes_per_element


class MoECommOp(OpRecord, frozen=True):
    kind: ClassVar[str] = "MoEComm"
    unit: ClassVar[Unit] = Unit.vector

    num_tokens: int
    hidden_dim: int
    direction: Literal["dispatch", "combine"] = "dispatch"
    dtype: DType = DType.bf16

    def describe(self) -> str:
        return f"{self.direction} {self.num_tokens:,}×{self.hidden_dim}"

    def flops(self) -> Number:
        return MoEComm.flops_func(self.num_tokens, self.hidden_dim)

    def bytes(self) -> Number:
        return MoEComm.bytes_func(self.num_tokens, self.hidden_dim, bpe(self.dtype))

    flops_bwd = flops
    bytes_bwd = bytes  # the gradient travels the reverse route, same volume

    def backward_reads_inputs(self) -> bool:
        """Neither direction's backward reads its inputs, so training keeps none for it:
        a permutation's gradient is the gradient permuted back, and since Megatron-Core
        0.13 the routing weights are applied in the experts' activation, not in the
        combine ("Memory efficient token permutation", commit 2659630, 2025-04-09):
        TEGroupedMLP calls weighted_bias_swiglu_impl(fc1_output, bias, permuted_probs),
        which saves its input (the gate/up GEMM's output, kept here as the activation's
        input) and the weights (k · 4 bytes a token, not counted), and the dispatcher's
        combine calls
        unpermute without probs, whose fused kernel (Transformer Engine
        _moe_unpermute_mask_map) then saves only its row map
        (`ctx.save_for_backward(row_id_map)`)."""
        return False


ROUTER_PROB_BYTES = 4  # fp32 routing weights
ROUTER_INDEX_BYTES = 4  # int32 expert ids
CORRECTION_BIAS_BYTES = 4  # DeepSeek-V3 keeps e_score_correction_bias in fp32


class MoERoutingOp(OpRecord, frozen=True):
    """Scores over experts (softmax or sigmoid of the router logits), top-k selection,
    and renormalization of the k weights. The router GEMM is a separate GEMM.

    Group-limited routing (DeepSeek-V3, `groups` > 1): each group of E/G experts is
    scored by the sum of its two best scores, the `groups_kept` best groups are kept,
    the rest masked, then top-k runs over the masked scores. A `correction_bias` is
    added to the scores for selection only (the weights use the raw scores).

    FLOPs per token, with E experts, G groups, g kept, k chosen:
      scores      softmax 3E (exp, sum, divide) | sigmoid 4E (neg, exp, add, divide)
      bias        E            (correction bias, when present)
      groups      2E + G + gG + E  (top-2 per group, their sum, g passes of max over G,
                                   the mask), only when G > 1
      top-k       kE           (k passes of max)
      renormalize 2k           (sum and divide)
    """

    kind: ClassVar[str] = "MoERouting"
    unit: ClassVar[Unit] = Unit.vector

    tokens: int
    experts: int
    top_k: int
    scoring: Literal["softmax", "sigmoid"] = "softmax"
    logits: DType = DType.bf16
    groups: int = 1
    groups_kept: int = 1
    correction_bias: bool = False

    def describe(self) -> str:
        return f"{self.tokens:,} tokens, top-{self.top_k} of {self.experts}"

    def flops(self) -> Number:
        T, E, k = self.tokens, self.experts, self.top_k
        G, g = self.groups, self.groups_kept
        per_token = (3 if self.scoring == "softmax" else 4) * E
        if self.correction_bias:
            per_token += E
        if G > 1:
            per_token += 2 * E + G + g * G + E
        return T * (per_token + E * k + 2 * k)

    def bytes(self) -> Number:
        T, E, k = self.tokens, self.experts, self.top_k
        bias = E * CORRECTION_BIAS_BYTES if self.correction_bias else 0
        return T * E * bpe(self.logits) + bias + T * k * (ROUTER_PROB_BYTES + ROUTER_INDEX_BYTES)

    def flops_bwd(self) -> Number:
        # gradient of the k renormalized weights back through the scores: 3 per score
        return 3 * self.tokens * self.experts + 2 * self.tokens * self.top_k

    def bytes_bwd(self) -> Number:
        T, E, k = self.tokens, self.experts, self.top_k
        # read dweights, ids and saved scores; write dlogits
        return T * k * (ROUTER_PROB_BYTES + ROUTER_INDEX_BYTES) + 2 * T * E * bpe(self.logits)


class FusedMoE:
    """TraceLens's fused-MoE formulas (extension classes), with its E_active estimate."""

    @staticmethod
    def flops_func(num_tokens, hidden_dim, inter_dim, topk, gated) -> int:
        M, K, N = num_tokens, hidden_dim, inter_dim
        up = 2 * M * K * N * topk * (2 if gated else 1)
        return up + 2 * M * K * N * topk + M * K * (2 * topk - 1)

    @staticmethod
    def bytes_func(num_tokens, hidden_dim, inter_dim, num_experts, topk, gated,
                   input_bpe, weight_bpe, output_bpe) -> float:  # fmt: skip
        M, K, N = num_tokens, hidden_dim, inter_dim
        active = expected_experts_hit(num_experts, topk, M)
        weights = active * N * K * weight_bpe * (2 if gated else 1) + active * N * K * weight_bpe
        return M * K * input_bpe + weights + M * K * output_bpe


class UnfusedMoE_Up:
    @staticmethod
    def flops_func(num_tokens, hidden_dim, inter_dim, topk, gated) -> int:
        return 2 * num_tokens * hidden_dim * inter_dim * topk * (2 if gated else 1)

    @staticmethod
    def bytes_func(num_tokens, hidden_dim, inter_dim, num_experts, topk, gated,
                   input_bpe, weight_bpe, output_bpe) -> float:  # fmt: skip
        M, K, N = num_tokens, hidden_dim, inter_dim
        active = expected_experts_hit(num_experts, topk, M)
        return (
            M * K * input_bpe
            + active * (2 if gated else 1) * K * N * weight_bpe
            + (M * N * topk * output_bpe)
        )


class UnfusedMoE_Down:
    @staticmethod
    def flops_func(num_tokens, hidden_dim, inter_dim, topk) -> int:
        return 2 * num_tokens * inter_dim * hidden_dim * topk

    @staticmethod
    def bytes_func(num_tokens, hidden_dim, inter_dim, num_experts, topk,
                   input_bpe, weight_bpe, output_bpe) -> float:  # fmt: skip
        M, K, N = num_tokens, hidden_dim, inter_dim
        active = expected_experts_hit(num_experts, topk, M)
        return M * N * topk * input_bpe + active * N * K * weight_bpe + M * K * output_bpe
