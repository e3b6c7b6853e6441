"""State-space pieces: the Mamba-2 SSD mixer (chunked scan, and the one-token recurrent
update used at decode) and the causal depthwise conv1d in front of it.

SSD notation: B batch, T tokens, H heads of P channels (d_inner = H·P), G groups sharing
B and C, N state size, chunk length L; conv_channels = d_inner + 2·G·N.
"""

from __future__ import annotations

from typing import ClassVar

from modelcost.base.dtypes import DType

from .base import Number, OpRecord, Unit, bpe


class MambaSSD:
    """TraceLens's MambaSSD formulas as static functions."""

    @staticmethod
    def flops_terms(B, T, H, P, G, N, chunk, d_conv, conv_channels) -> dict[str, int]:
        return {
            "conv1d": 2 * B * conv_channels * T * d_conv,
            "cb": 2 * B * G * T * chunk * N,  # C·Bᵀ within each chunk
            "intra": 2 * B * H * T * chunk * P,  # (C·Bᵀ ∘ decay)·X within each chunk
            "states": 2 * B * H * T * N * P,  # chunk states Bᵀ·X
            "output": 2 * B * H * T * N * P,  # states → outputs C·h
        }

    @staticmethod
    def flops_func(B, T, H, P, G, N, chunk, d_conv, conv_channels) -> int:
        return sum(MambaSSD.flops_terms(B, T, H, P, G, N, chunk, d_conv, conv_channels).values())

    @staticmethod
    def bytes_func(B, T, H, P, G, N, d_conv, conv_channels, combined_dim, bytes_per_element,
                   bpe_dt_bias=4, bpe_A=4, bpe_D=None) -> Number:  # fmt: skip
        e = bytes_per_element
        d = e if bpe_D is None else bpe_D
        return (
            B * T * combined_dim * e  # zxbcdt in
            + conv_channels * d_conv * e  # conv weight
            + conv_channels * e  # conv bias
            + H * (bpe_dt_bias + bpe_A + d)  # dt_bias, A, D
            + B * T * H * P * e  # y out
        )

    flops_bwd_func = flops_func  # TraceLens: backward = forward
    bytes_bwd_func = bytes_func


class MambaSsdOp(OpRecord, frozen=True):
    """The fused Mamba-2 chunked scan (conv1d + SSD) over T tokens."""

    kind: ClassVar[str] = "MambaSSD"
    unit: ClassVar[Unit] = Unit.matrix

    B: int
    T: int
    H: int
    P: int
    G: int
    N: int
    chunk: int
    d_conv: int
    dtype: DType = DType.bf16
    params: DType = DType.fp32  # dt_bias, A_log, D

    @property
    def conv_channels(self) -> int:
        return self.H * self.P + 2 * self.G * self.N

    @property
    def combined_dim(self) -> int:
        return 2 * self.H * self.P + 2 * self.G * self.N + self.H

    def _geometry(self) -> tuple:
        return (self.B, self.T, self.H, self.P, self.G, self.N, self.chunk, self.d_conv,
                self.conv_channels)  # fmt: skip

    def flops(self) -> Number:
        return MambaSSD.flops_func(*self._geometry())

    def bytes(self) -> Number:
        p = bpe(self.params)
        return MambaSSD.bytes_func(
            self.B, self.T, self.H, self.P, self.G, self.N, self.d_conv, self.conv_channels,
            self.combined_dim, bpe(self.dtype), p, p, p,
        )  # fmt: skip

    def flops_bwd(self) -> Number:
        t = MambaSSD.flops_terms(*self._geometry())
        # each forward matmul has two gradient matmuls; the chunked backward recomputes
        # C·Bᵀ and the chunk states instead of saving them; the conv has dx and dw
        matmuls = t["cb"] + t["intra"] + t["states"] + t["output"]
        return 2 * t["conv1d"] + 2 * matmuls + t["cb"] + t["states"]

    def bytes_bwd(self) -> Number:
        fwd = self.bytes()
        e, p = bpe(self.dtype), bpe(self.params)
        # reads as the forward did (with dy in place of y), plus the gradients written
        grads = (
            self.B * self.T * self.combined_dim * e
            + self.conv_channels * (self.d_conv + 1) * e
            + 3 * self.H * p
        )
        return fwd + grads

    # TraceLens's MambaSSD counts the backward as the forward again
    def tracelens_flops_bwd(self) -> Number:
        return self.tracelens_flops()

    def tracelens_bytes_bwd(self) -> Number:
        return self.tracelens_bytes()


class MambaStepOp(OpRecord, frozen=True):
    """One decode step of Mamba-2 per sequence: update the conv state and the SSM state
    h ← exp(dt·A)·h + dt·B·x, then y = C·h + D·x. B sequences, one token each."""

    kind: ClassVar[str] = "MambaSSD"
    unit: ClassVar[Unit] = Unit.vector

    B: int
    H: int
    P: int
    G: int
    N: int
    d_conv: int
    dtype: DType = DType.bf16
    state: DType = DType.fp32

    def flops(self) -> Number:
        conv_channels = self.H * self.P + 2 * self.G * self.N
        conv = 2 * self.B * conv_channels * self.d_conv
        # per state element: decay multiply, dt·B·x (2), add, and C·h multiply-add (2)
        ssm = 6 * self.B * self.H * self.P * self.N
        return conv + ssm + 2 * self.B * self.H * self.P  # + D·x

    def bytes(self) -> Number:
        conv_channels = self.H * self.P + 2 * self.G * self.N
        combined = 2 * self.H * self.P + 2 * self.G * self.N + self.H
        e, s = bpe(self.dtype), bpe(self.state)
        states = 2 * self.B * (self.H * self.P * self.N * s + conv_channels * self.d_conv * e)
        weights = conv_channels * (self.d_conv + 1) * e + 3 * self.H * 4
        return states + weights + self.B * combined * e + self.B * self.H * self.P * e

    def flops_bwd(self) -> Number:
        raise ValueError("a decode step has no backward pass")

    bytes_bwd = flops_bwd


class CausalConv1d:
    """The depthwise causal conv1d (x: batch × channels × seq, w: channels × kernel)."""

    @staticmethod
    def flops_func(batch: int, channels: int, seq: int, kernel: int) -> int:
        return 2 * batch * channels * seq * kernel

    @staticmethod
    def bytes_func(batch, channels, seq, kernel, bias: bool, bytes_per_element) -> Number:
        elements = 2 * batch * channels * seq + channels * kernel + (channels if bias else 0)
        return elements * bytes_per_element


class CausalConv1dOp(OpRecord, frozen=True):
    kind: ClassVar[str] = "CausalConv1d"
    unit: ClassVar[Unit] = Unit.vector  # a depthwise k=4 filter: no matrix-core work

    batch: int
    channels: int
    seq: int
    kernel: int
    bias: bool = True
    dtype: DType = DType.bf16

    def flops(self) -> Number:
        return CausalConv1d.flops_func(self.batch, self.channels, self.seq, self.kernel)

    def bytes(self) -> Number:
        return CausalConv1d.bytes_func(
            self.batch, self.channels, self.seq, self.kernel, self.bias, bpe(self.dtype)
        )

    def flops_bwd(self) -> Number:
        # dx and dw each cost the forward; db sums dy
        bcs = self.batch * self.channels * self.seq
        return 2 * self.flops() + (bcs if self.bias else 0)

    def bytes_bwd(self) -> Number:
        bcs = self.batch * self.channels * self.seq
        ck = self.channels * self.kernel
        # read x, dy, w; write dx, dw (and db)
        return (3 * bcs + 2 * ck + (self.channels if self.bias else 0)) * bpe(self.dtype)
