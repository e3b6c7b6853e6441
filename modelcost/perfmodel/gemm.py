"""Matrix multiplies: GEMM (plain and batched) and GroupedGemm (MoE experts).

Y = X·Wᵀ (+ b) with X (M, K), W (N, K), Y (M, N); one multiply-add is 2 FLOPs.
"""

from __future__ import annotations

from typing import ClassVar

from modelcost.base.dtypes import DTYPES, DType

from .base import Number, OpRecord, Unit, bpe, compute_precision


def narrower(weights: DType, activations: DType) -> bool:
    """Whether weights are stored narrower than the activations they multiply."""
    return DTYPES[weights].bits < DTYPES[activations].bits


class GEMM:
    """TraceLens-compatible static functions (`GEMM.flops_func(M, N, K, bias)` ...)."""

    @staticmethod
    def flops_func(M: int, N: int, K: int, bias: bool) -> int:
        return 2 * M * N * K + (M * N if bias else 0)

    @staticmethod
    def bytes_func(
        M: int,
        N: int,
        K: int,
        bias: bool,
        bpe_mat1: Number,
        bpe_mat2: Number,
        bpe_bias: Number,
        bpe_output: Number,
    ) -> Number:
        return (
            M * K * bpe_mat1 + K * N * bpe_mat2 + M * N * bpe_output + (N if bias else 0) * bpe_bias
        )

    @staticmethod
    def flops_bwd_func(M: int, N: int, K: int, bias: bool) -> int:
        """Input gradient (M×K from M×N · N×K) plus weight gradient (N×K), plus dbias."""
        return (
            GEMM.flops_func(M, K, N, False)
            + GEMM.flops_func(N, K, M, False)
            + (M * N if bias else 0)
        )

    @staticmethod
    def bytes_bwd_func(M: int, N: int, K: int, bias: bool, bytes_per_element: Number) -> Number:
        """TraceLens's backward traffic: the bias term is an element count, not bytes."""
        grads = 2 * (M * N + N * K + M * K) * bytes_per_element
        return grads + (M * N if bias else 0)


class GemmOp(OpRecord, frozen=True):
    """A (batched) GEMM with a dtype per operand: a = X, b = W, out = Y, bias."""

    kind: ClassVar[str] = "GEMM"
    unit: ClassVar[Unit] = Unit.matrix
    optional: ClassVar[tuple[str, ...]] = ("scale_bytes",)

    M: int
    N: int
    K: int
    bias: bool = False
    B: int = 1  # batch of independent GEMMs (bmm)
    a: DType = DType.bf16
    b: DType = DType.bf16
    out: DType = DType.bf16
    bias_dtype: DType = DType.bf16
    scale_bytes: Number = 0  # the quantization scales of A and B it reads (recipes.py)

    def dtypes(self) -> tuple[DType, ...]:
        return (self.a, self.b)

    @property
    def precision(self) -> str:
        return compute_precision(self.a, self.b)

    def vector_flops(self) -> Number:
        """Weights narrower than the activations they meet (weight-only W8A16, W4A16) are
        dequantized in registers: one multiply by the scale per weight element."""
        return self.B * self.N * self.K if narrower(self.b, self.a) else 0

    def describe(self) -> str:
        batch = f" ×{self.B}" if self.B != 1 else ""
        return f"{self.M}×{self.N}×{self.K}{batch}" + (" +bias" if self.bias else "")

    def flops(self) -> Number:
        return self.B * GEMM.flops_func(self.M, self.N, self.K, self.bias)

    def bytes(self) -> Number:
        one = GEMM.bytes_func(
            self.M, self.N, self.K, self.bias,
            bpe(self.a), bpe(self.b), bpe(self.bias_dtype), bpe(self.out),
        )  # fmt: skip
        return self.B * one + self.scale_bytes

    def tracelens_bytes(self) -> Number:
        return self.bytes() - self.scale_bytes  # TraceLens counts no block scales

    def flops_bwd(self) -> Number:
        return self.B * GEMM.flops_bwd_func(self.M, self.N, self.K, self.bias)

    def bytes_bwd(self) -> Number:
        M, N, K = self.M, self.N, self.K
        x, w, dy = bpe(self.a), bpe(self.b), bpe(self.out)
        dgrad = M * N * dy + N * K * w + M * K * x  # read dY, W; write dX
        wgrad = M * N * dy + M * K * x + N * K * w  # read dY, X; write dW
        bgrad = (M * N * dy + N * bpe(self.bias_dtype)) if self.bias else 0  # read dY; write db
        return self.B * (dgrad + wgrad + bgrad)

    def tracelens_bytes_bwd(self) -> Number:
        return self.B * GEMM.bytes_bwd_func(self.M, self.N, self.K, self.bias, bpe(self.a))


class GroupedGemm:
    """TraceLens-compatible static functions. Note the argument order M, K, N."""

    @staticmethod
    def flops_func(M: int, K: int, N: int) -> int:
        return 2 * M * K * N

    @staticmethod
    def bytes_func(M: int, K: int, N: int, G: Number, bpe_in: Number, bpe_out: Number) -> Number:
        return (M * K + G * K * N) * bpe_in + M * N * bpe_out

    @staticmethod
    def flops_bwd_func(M: int, K: int, N: int) -> int:
        return 4 * M * K * N

    @staticmethod
    def bytes_bwd_func(
        M: int, K: int, N: int, G: Number, bpe_in: Number, bpe_out: Number
    ) -> Number:
        return 2 * M * N * bpe_out + 2 * M * K * bpe_in + 2 * G * K * N * bpe_in


class GroupedGemmOp(OpRecord, frozen=True):
    """M routed rows (tokens × top_k) through G experts' (K, N) weights, G read once each.

    G may be fractional: the expected number of distinct experts a small batch hits.
    """

    kind: ClassVar[str] = "GroupedGemm"
    unit: ClassVar[Unit] = Unit.matrix
    optional: ClassVar[tuple[str, ...]] = ("scale_bytes",)

    M: int
    K: int
    N: int
    G: Number
    x: DType = DType.bf16
    w: DType = DType.bf16
    out: DType = DType.bf16
    scale_bytes: Number = 0  # the quantization scales of X and W it reads (recipes.py)

    def dtypes(self) -> tuple[DType, ...]:
        return (self.x, self.w)

    @property
    def precision(self) -> str:
        return compute_precision(self.x, self.w)

    def vector_flops(self) -> Number:
        """Dequantizing narrow expert weights (weight-only), one multiply an element."""
        return self.G * self.K * self.N if narrower(self.w, self.x) else 0

    def describe(self) -> str:
        g = f"{self.G:g}" if isinstance(self.G, float) else str(self.G)
        return f"{self.M}×{self.N}×{self.K}, G={g}"

    def flops(self) -> Number:
        return GroupedGemm.flops_func(self.M, self.K, self.N)

    def bytes(self) -> Number:
        M, K, N = self.M, self.K, self.N
        moved = M * K * bpe(self.x) + self.G * K * N * bpe(self.w) + M * N * bpe(self.out)
        return moved + self.scale_bytes

    def flops_bwd(self) -> Number:
        return GroupedGemm.flops_bwd_func(self.M, self.K, self.N)

    def bytes_bwd(self) -> Number:
        M, K, N, G = self.M, self.K, self.N, self.G
        # dX = dY·Wᵀ reads dY, W, writes dX; dW = Xᵀ·dY reads X, dY, writes dW
        return 2 * M * N * bpe(self.out) + 2 * M * K * bpe(self.x) + 2 * G * K * N * bpe(self.w)

    def tracelens_bytes(self) -> Number:
        return GroupedGemm.bytes_func(self.M, self.K, self.N, self.G, bpe(self.x), bpe(self.out))

    def tracelens_bytes_bwd(self) -> Number:
        args = (self.M, self.K, self.N, self.G, bpe(self.x), bpe(self.out))
        return GroupedGemm.bytes_bwd_func(*args)
