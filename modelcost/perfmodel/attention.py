"""Attention: SDPA (GQA/MQA, d_qk ≠ d_v, causal, sliding window) and Softmax.

FLOPs count the two matmuls (QKᵀ and PV) over the (query, key) pairs attended; the
softmax itself is not counted, as in TraceLens. An SDPA that is not a flash kernel
(`flash_impl` false: PyTorch's composite "math" SDPA, eager attention) keeps the same
FLOPs and bytes, those of the attention itself (a bound for any kernel); `math_kernels`
lists the kernels it runs instead, which the kernel-aware estimate times one by one.
"""

from __future__ import annotations

from typing import ClassVar

from modelcost.base.dtypes import DType
from modelcost.base.record import Record

from .base import Number, OpRecord, Unit, bpe, compute_precision

LSE_BYTES = 4  # the fp32 log-sum-exp a flash forward saves per query row and head


def _clip_sum(lo: int, hi: int, cap: int | None) -> int:
    """Σ_{x=lo}^{hi} min(max(x, 0), cap) for integers (cap None = no cap)."""
    if hi < lo:
        return 0
    lo = max(lo, 1)
    if hi < lo:
        return 0
    if cap is None or hi <= cap:
        return (lo + hi) * (hi - lo + 1) // 2
    if lo > cap:
        return cap * (hi - lo + 1)
    return (lo + cap) * (cap - lo + 1) // 2 + cap * (hi - cap)


def _chunked(n: int, chunk: int) -> int:
    """Σ_{p<n} (p mod chunk + 1): the pairs of n causal queries from position 0."""
    q, r = divmod(n, chunk)
    return q * chunk * (chunk + 1) // 2 + r * (r + 1) // 2


def exact_pairs(N_Q: int, N_KV: int, causal: bool, window: int = 0, chunk: int = 0) -> int:
    """(query, key) pairs attended, counted exactly.

    Queries are the last N_Q positions of the N_KV keys. Causal: query i (0-based) sees
    keys up to position N_KV − N_Q + i, so N_KV − N_Q + i + 1 of them, capped at the
    sliding window when there is one; in chunked attention (Llama 4's local layers) a
    query at position p sees only its own chunk's keys up to it, p mod chunk + 1 of
    them. Non-causal: every key (or `window` of them).
    """
    if chunk and causal:
        return _chunked(N_KV, chunk) - _chunked(N_KV - N_Q, chunk)
    cap = window or None
    if not causal:
        return N_Q * (min(N_KV, cap) if cap else N_KV)
    first = N_KV - N_Q + 1
    return _clip_sum(first, first + N_Q - 1, cap)


def trapezoid_pairs(N_Q: int, N_KV: int) -> Number:
    """TraceLens's causal count, extended: the area N_Q·N_KV − N_Q²/2 (N²/2 when square;
    the same `sq·sk − sq²/2` its InferenceAttention uses)."""
    if N_Q <= N_KV:
        return N_Q * N_KV - N_Q * N_Q / 2
    return N_KV * N_KV / 2


def keys_read(N_Q: int, N_KV: int, causal: bool, window: int = 0, chunk: int = 0) -> int:
    """How many key/value positions are read at all (a window caps it; chunked attention
    reads from the first query's chunk on)."""
    if chunk and causal:
        return N_KV - (N_KV - N_Q) // chunk * chunk
    if not window:
        return N_KV
    return min(N_KV, N_Q + window - 1) if causal else min(N_KV, window)


class SDPA:
    """TraceLens-compatible static functions. Where TraceLens raises (causal with
    N_Q ≠ N_KV) these return the trapezoid count instead."""

    @staticmethod
    def _masked(total: Number, N_Q: int, N_KV: int, causal: bool) -> Number:
        """Scale a full-rectangle count to the causal pairs (TraceLens's /2 when square)."""
        if not causal:
            return total
        if N_Q == N_KV:
            return total / 2
        return total * trapezoid_pairs(N_Q, N_KV) / (N_Q * N_KV)

    @staticmethod
    def flops_func(B, N_Q, H_Q, N_KV, H_KV, d_h_qk, d_h_v, causal) -> Number:
        return SDPA._masked(2 * B * H_Q * N_Q * N_KV * (d_h_qk + d_h_v), N_Q, N_KV, causal)

    @staticmethod
    def _elements(B, N_Q, H_Q, N_KV, H_KV, d_h_qk, d_h_v) -> tuple[int, int, int, int]:
        """Elements of Q, K, V (K and V once per KV head) and of O (or dO)."""
        return (B * N_Q * H_Q * d_h_qk, B * N_KV * H_KV * d_h_qk, B * N_KV * H_KV * d_h_v,
                B * N_Q * H_Q * d_h_v)  # fmt: skip

    @staticmethod
    def bytes_func(B, N_Q, H_Q, N_KV, H_KV, d_h_qk, d_h_v, causal, bytes_per_element) -> Number:
        q, k, v, o = SDPA._elements(B, N_Q, H_Q, N_KV, H_KV, d_h_qk, d_h_v)
        return (q + k + v + o) * bytes_per_element

    @staticmethod
    def flops_bwd_func(B, N_Q, H_Q, N_KV, H_KV, d_h_qk, d_h_v, causal, flash_impl) -> Number:
        mm = 2 * B * H_Q * N_Q * N_KV
        recompute = mm * d_h_qk if flash_impl else 0
        group = H_Q // H_KV - 1
        dv = mm * d_h_v + B * N_KV * d_h_v * group
        dp = mm * d_h_v
        dq = mm * d_h_qk
        dk = mm * d_h_qk + B * N_KV * d_h_qk * group
        return SDPA._masked(recompute + dv + dp + dq + dk, N_Q, N_KV, causal)

    @staticmethod
    def bytes_bwd_func(B, N_Q, H_Q, N_KV, H_KV, d_h_qk, d_h_v, causal, bytes_per_element) -> Number:
        q, k, v, do = SDPA._elements(B, N_Q, H_Q, N_KV, H_KV, d_h_qk, d_h_v)
        return (q + k + v + do + q + k + v) * bytes_per_element  # reads, then dQ dK dV


class SdpaOp(OpRecord, frozen=True):
    """Fused attention over one batch: q/out in `act`, K and V in `kv` (the cache dtype)."""

    kind: ClassVar[str] = "SDPA"
    unit: ClassVar[Unit] = Unit.matrix
    optional: ClassVar[tuple[str, ...]] = ("chunk", "v_in_k")

    B: int
    N_Q: int
    H_Q: int
    N_KV: int
    H_KV: int
    d_h_qk: int
    d_h_v: int
    causal: bool
    window: int = 0  # sliding window in keys; 0 = full
    flash_impl: bool = True  # a flash kernel (backward recomputes QKᵀ); false: math
    act: DType = DType.bf16
    kv: DType = DType.bf16
    chunk: int = 0  # chunked attention: queries see their own chunk of keys; 0 = off
    # the values are the keys' first d_h_v columns (absorbed MLA: one latent cache of
    # d_h_qk a position), so the cache is read once, as FlashMLA counts its bytes
    # (total_seqlens · h_kv · d, tests/test_flash_mla.py: V not counted apart)
    v_in_k: bool = False

    @property
    def precision(self) -> str:
        return compute_precision(self.act, self.kv)

    def pairs(self) -> Number:
        """(query, key) pairs one head scores: the mask's exact count."""
        return exact_pairs(self.N_Q, self.N_KV, self.causal, self.window, self.chunk)

    def describe(self) -> str:
        window = f", window {self.window}" if self.window else ""
        window += f", chunks of {self.chunk}" if self.chunk else ""
        causal = ", causal" if self.causal else ""
        math = "" if self.flash_impl else ", math"
        shared = ", V in K" if self.v_in_k else ""
        return (
            f"B={self.B} q={self.N_Q}×{self.H_Q} kv={self.N_KV}×{self.H_KV} "
            f"d={self.d_h_qk}/{self.d_h_v}{causal}{window}{shared}{math}"
        )

    def flops(self) -> Number:
        return 2 * self.B * self.H_Q * self.pairs() * (self.d_h_qk + self.d_h_v)

    def _tl_args(self) -> tuple[int, int, int, int, int, int, int, bool]:
        return (
            self.B, self.N_Q, self.H_Q, self.N_KV, self.H_KV, self.d_h_qk, self.d_h_v, self.causal,
        )  # fmt: skip

    def _tensors(self) -> tuple[int, int, int, int]:
        """Elements of Q, K, V (the keys actually read; no V apart where it is in K) and O."""
        n_kv = keys_read(self.N_Q, self.N_KV, self.causal, self.window, self.chunk)
        shape = (self.B, self.N_Q, self.H_Q, n_kv, self.H_KV, self.d_h_qk, self.d_h_v)
        q, k, v, o = SDPA._elements(*shape)
        return q, k, 0 if self.v_in_k else v, o

    def bytes(self) -> Number:
        q, k, v, o = self._tensors()
        return (q + o) * bpe(self.act) + (k + v) * bpe(self.kv)

    def backward_reads_output(self) -> bool:
        return True  # flash attention's backward takes O (and the row statistics)

    def flops_bwd(self) -> Number:
        per_pair = (3 if self.flash_impl else 2) * self.d_h_qk + 2 * self.d_h_v
        matmuls = 2 * self.B * self.H_Q * self.pairs() * per_pair
        n_kv = keys_read(self.N_Q, self.N_KV, self.causal, self.window, self.chunk)
        group_sum = self.B * n_kv * (self.H_Q - self.H_KV) * (self.d_h_qk + self.d_h_v)
        return matmuls + group_sum  # + summing dK, dV over each KV head's query group

    def bytes_bwd(self) -> Number:
        q, k, v, o = self._tensors()
        lse = self.B * self.H_Q * self.N_Q * LSE_BYTES
        act, kv = bpe(self.act), bpe(self.kv)
        reads = (q + o + o) * act + (k + v) * kv + lse  # Q, O, dO, K, V, LSE
        writes = q * act + (k + v) * kv  # dQ, dK, dV
        return reads + writes

    # TraceLens's counts (its SDPA, tracelens_perf_model): 2-byte tensors in its reports
    def tracelens_flops(self) -> Number:
        return SDPA.flops_func(*self._tl_args())

    def tracelens_bytes(self) -> Number:
        return SDPA.bytes_func(*self._tl_args(), 2)  # TraceLens reports always use 2 B

    def tracelens_flops_bwd(self) -> Number:
        return SDPA.flops_bwd_func(*self._tl_args(), self.flash_impl)

    def tracelens_bytes_bwd(self) -> Number:
        return SDPA.bytes_bwd_func(*self._tl_args(), 2)


class MathKernel(Record, frozen=True):
    """One kernel of a composite (math) attention: what it does, the bytes it moves
    and, for a batched GEMM, its (batch, M, N, K)."""

    name: str
    bytes: Number
    gemm: tuple[int, int, int, int] | None = None

    @property
    def flops(self) -> int:
        if self.gemm is None:
            return 0
        batch, M, N, K = self.gemm
        return 2 * batch * M * N * K


def math_kernels(op: SdpaOp, backward: bool = False) -> tuple[MathKernel, ...]:
    """The kernels an SDPA runs as PyTorch's composite attention,
    `_scaled_dot_product_attention_math` (aten/src/ATen/native/transformers/attention.cpp):
    q and k each scaled by √scale; with GQA, K and V repeated to the query heads
    (`pre_process_group_query_attention_input`, repeat_interleave); under `is_causal`
    the L × S mask built (ones, tril, then `convert_boolean_attn_mask`: zeros_like,
    logical_not, masked_fill_); `attn = matmul(q, kᵀ)`, `attn.add_(mask)`,
    `softmax(attn)`, `matmul(attn, v)`. The score matrix (B · H_q · N_q · N_kv, every
    key, masked or not) is written by QKᵀ, read and written by the mask and by the
    softmax, and read by PV. Eager attention (Hugging Face's `eager_attention_forward`)
    runs the same kernels. A window or chunks is a mask the caller builds once per
    forward, added here. The backward is autograd's over them: dP = dO·Vᵀ and
    dV = Pᵀ·dO, softmax's backward (P, dP → dS), dQ = dS·K and dK = dSᵀ·Q, the scales'
    and the repeat's (a sum over each group) backward; the mask's add passes dS through."""
    B, L, S, H, G = op.B, op.N_Q, op.N_KV, op.H_Q, op.H_KV
    act, kv = bpe(op.act), bpe(op.kv)
    q, o = B * L * H * op.d_h_qk, B * L * H * op.d_h_v  # elements
    k, v = B * S * G * op.d_h_qk, B * S * G * op.d_h_v  # as cached: H_kv heads
    kh, vh = k * H // G, v * H // G  # at the query heads
    scores = B * H * L * S * act  # bytes of one pass over the score matrix
    masked = op.causal or bool(op.window) or bool(op.chunk)
    builds = op.causal and not (op.window or op.chunk)  # is_causal builds its mask
    bh = B * H
    K_ = MathKernel
    if backward:
        out = [
            K_("dP = dO·Vᵀ", o * act + vh * kv + scores, (bh, L, S, op.d_h_v)),
            K_("dV = Pᵀ·dO", scores + o * act + vh * kv, (bh, S, op.d_h_v, L)),
            K_("softmax backward", 3 * scores),
            K_("dQ = dS·K", scores + kh * kv + q * act, (bh, L, op.d_h_qk, S)),
            K_("dK = dSᵀ·Q", scores + q * act + kh * kv, (bh, S, op.d_h_qk, L)),
            K_("dQ·√scale", 2 * q * act),
            K_("dK·√scale", 2 * kh * kv),
        ]
        if H != G:
            out += [K_("dK summed over each group", (kh + k) * kv),
                    K_("dV summed over each group", (vh + v) * kv)]  # fmt: skip
        return tuple(out)
    out = [K_("q·√scale", 2 * q * act)]
    if H != G:
        out += [K_("K repeated to the query heads", (k + kh) * kv),
                K_("V repeated to the query heads", (v + vh) * kv)]  # fmt: skip
    out.append(K_("k·√scale", 2 * kh * kv))
    if builds:  # bytes a mask element: bool written, read and written, ...
        per = {"ones": 1, "tril": 2, "zeros_like": act, "logical_not": 2,
               "masked_fill_": 1 + 2 * act}  # fmt: skip
        out += [K_(f"causal mask: {name}", L * S * n) for name, n in per.items()]
    out.append(K_("QKᵀ", q * act + kh * kv + scores, (bh, L, S, op.d_h_qk)))
    if masked:
        out.append(K_("mask added", 2 * scores + L * S * act))
    out.append(K_("softmax", 2 * scores))
    out.append(K_("PV", scores + vh * kv + o * act, (bh, L, op.d_h_v, S)))
    return tuple(out)


class Softmax:
    """TraceLens-compatible static functions (3 FLOPs per element: exp, add, divide)."""

    @staticmethod
    def flops_func(M: int, N: int, B: int = 1) -> int:
        return 3 * B * M * N

    @staticmethod
    def bytes_func(M: int, N: int, bytes_per_element: Number, B: int = 1) -> Number:
        return 2 * B * M * N * bytes_per_element

    @staticmethod
    def flops_bwd(M: int, N: int, B: int = 1) -> int:
        return 2 * Softmax.flops_func(M, N, B)

    @staticmethod
    def bytes_bwd(M: int, N: int, bytes_per_element: Number, B: int = 1) -> Number:
        return 2 * Softmax.bytes_func(M, N, bytes_per_element, B)


class SoftmaxOp(OpRecord, frozen=True):
    """Softmax over the last dimension (N) of a (B, M, N) tensor."""

    kind: ClassVar[str] = "Softmax"
    unit: ClassVar[Unit] = Unit.vector

    M: int
    N: int
    B: int = 1
    dtype: DType = DType.bf16

    def flops(self) -> Number:
        return Softmax.flops_func(self.M, self.N, self.B)

    def bytes(self) -> Number:
        return Softmax.bytes_func(self.M, self.N, bpe(self.dtype), self.B)

    def flops_bwd(self) -> Number:
        return Softmax.flops_bwd(self.M, self.N, self.B)

    def bytes_bwd(self) -> Number:
        return Softmax.bytes_bwd(self.M, self.N, bpe(self.dtype), self.B)


class InferenceAttention:
    """TraceLens's serving-attention formulas, from per-batch sums over requests:
    c_* for prefill (context) chunks, g_* for decode (generation) requests; sq, sk are
    query and key lengths, sqsk and sqsq sums of sq·sk and sq²."""

    @staticmethod
    def flops_func(H_Q, d_h_qk, d_h_v, c_sqsk, c_sqsq, g_sqsk) -> Number:
        return H_Q * (d_h_qk + d_h_v) * (2 * c_sqsk - c_sqsq + 2 * g_sqsk)

    @staticmethod
    def bytes_func(B, H_Q, H_KV, d_h_qk, d_h_v, c_sq, c_sk, g_sq, g_sk, bytes_per_element,
                   bytes_per_element_KV=None) -> Number:  # fmt: skip
        kv_bpe = bytes_per_element if bytes_per_element_KV is None else bytes_per_element_KV
        per_new = H_Q * d_h_qk + H_Q * d_h_v + H_KV * d_h_qk + H_KV * d_h_v
        new = B * (c_sq + g_sq) * per_new * bytes_per_element
        cached = B * ((c_sk - c_sq) + (g_sk - g_sq)) * H_KV * (d_h_qk + d_h_v) * kv_bpe
        return new + cached
