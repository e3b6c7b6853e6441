"""Gated DeltaNet (linear attention with a gated delta rule, Qwen3-Next's): the chunked
form over a prompt and the one-token recurrent step at decode.

Notation: B sequences of T tokens; H value heads of dv channels, each with a dk × dv
state; key heads shared by groups of value heads; chunk length C. The conv1d runs over
the q, k and v channels (conv_channels = 2·dk·key heads + dv·H) with no bias.

FLOPs per value head and chunk of C tokens, the chunkwise algorithm of Yang, Kautz and
Hatamizadeh (2024, "Gated Delta Networks", section 3.3): the WY representation
(K·Kᵀ: 2C²dk; the triangular solve: C³/3; W = T·K: 2C²dk; U = T·V: 2C²dv), the output
(Q·S: 2C·dk·dv; Q·Kᵀ: 2C²dk; its product with U − W·S: 2C·dk·dv + 2C²dv) and the state
update (Kᵀ·(U − W·S): 2C·dk·dv): 6C²dk + 4C²dv + 6C·dk·dv + C³/3.
"""

from __future__ import annotations

from typing import ClassVar

from modelcost.base.dtypes import DType

from .base import Number, OpRecord, Unit, bpe


def conv_channels(H: int, KH: int, dk: int, dv: int) -> int:
    """The conv1d's channels: q and k (dk per key head) and v (dv per value head)."""
    return 2 * KH * dk + H * dv


class GatedDeltaNetOp(OpRecord, frozen=True):
    """The chunked gated delta rule (with its conv1d) over T tokens per sequence."""

    kind: ClassVar[str] = "GatedDeltaNet"
    unit: ClassVar[Unit] = Unit.matrix

    B: int
    T: int
    H: int  # value heads
    KH: int  # key heads
    dk: int
    dv: int
    chunk: int
    d_conv: int
    dtype: DType = DType.bf16
    state: DType = DType.fp32

    @property
    def conv_channels(self) -> int:
        return conv_channels(self.H, self.KH, self.dk, self.dv)

    def flops(self) -> Number:
        C, dk, dv = self.chunk, self.dk, self.dv
        chunks = -(-self.T // C)
        per_chunk = 6 * C * C * dk + 4 * C * C * dv + 6 * C * dk * dv + C**3 // 3
        conv = 2 * self.B * self.conv_channels * self.T * self.d_conv
        return conv + self.B * self.H * chunks * per_chunk

    def bytes(self) -> Number:
        e, s = bpe(self.dtype), bpe(self.state)
        tokens = self.B * self.T
        inputs = tokens * (self.conv_channels + 2 * self.H) * e  # q, k, v; β and the gate
        conv = self.conv_channels * self.d_conv * e
        out = tokens * self.H * self.dv * e
        state = self.B * self.H * self.dk * self.dv * s  # the final state, kept for decode
        return inputs + conv + out + state + 2 * self.H * 4  # + dt_bias, A_log

    def flops_bwd(self) -> Number:
        return 2 * self.flops()  # two gradient products per forward product

    def bytes_bwd(self) -> Number:
        return 2 * self.bytes()

    def describe(self) -> str:
        return (f"B={self.B} T={self.T} heads {self.H} (k {self.KH}) dk={self.dk} "
                f"dv={self.dv} chunk {self.chunk}")  # fmt: skip


class GatedDeltaStepOp(OpRecord, frozen=True):
    """One decode step per sequence: S ← α·S + β·k·(v − Sᵀk)ᵀ, o = Sᵀq, per value head,
    and the conv state's shift."""

    kind: ClassVar[str] = "GatedDeltaNet"
    unit: ClassVar[Unit] = Unit.vector

    B: int
    H: int
    KH: int
    dk: int
    dv: int
    d_conv: int
    dtype: DType = DType.bf16
    state: DType = DType.fp32

    @property
    def conv_channels(self) -> int:
        return conv_channels(self.H, self.KH, self.dk, self.dv)

    def flops(self) -> Number:
        # per state element: decay (1), Sᵀk (2), the rank-1 update (2), Sᵀq (2)
        return (
            2 * self.B * self.conv_channels * self.d_conv + 7 * self.B * self.H * self.dk * self.dv
        )

    def bytes(self) -> Number:
        e, s = bpe(self.dtype), bpe(self.state)
        states = (
            2 * self.B * (self.H * self.dk * self.dv * s + self.conv_channels * self.d_conv * e)
        )
        io = self.B * ((self.conv_channels + 2 * self.H) + self.H * self.dv) * e
        return states + io + self.conv_channels * self.d_conv * e + 2 * self.H * 4

    def flops_bwd(self) -> Number:
        raise ValueError("a decode step has no backward pass")

    bytes_bwd = flops_bwd
