"""Normalization: the generic TraceLens family (LayerNorm, BatchNorm, ...) and RMSNorm.

E = elements normalized, C = the normalized (channel) size, rows = E / C.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from modelcost.base.dtypes import DType

from .base import Number, OpRecord, Unit, bpe


class Normalization:
    """TraceLens-compatible static functions of the generic normalization model."""

    @staticmethod
    def flops_func(has_bias, is_affine, is_training, num_elems, num_channels) -> int:
        C, E = num_channels, num_elems
        return 3 * C + (3 * E if is_training else 0) + 3 * C + 2 * E

    @staticmethod
    def bytes_func(has_bias, is_affine, is_training, num_elems, num_channels, bpe_in, bpe_out):
        tensors = 2 + (1 if is_affine else 0) + (1 if is_affine and has_bias else 0)
        tensors += 2 if is_training else 0
        return num_elems * bpe_in + num_elems * bpe_out + tensors * num_channels * bpe_in

    @staticmethod
    def flops_func_bwd(has_bias, is_affine, is_training, num_elems, num_channels, output_mask):
        epc = num_elems / num_channels
        per_channel = (0 if is_training else 3) + 4 * epc
        if output_mask[0]:
            per_channel += 5 * epc if is_training else 0
        else:
            per_channel += 2 * epc
        return num_channels * per_channel

    @staticmethod
    def bytes_func_bwd(
        has_bias, is_affine, is_training, num_elems, num_channels, bpe_in, bpe_out, output_mask
    ):
        E, C = num_elems, num_channels
        total = E * bpe_out + E * bpe_in * (2 if output_mask[0] and is_training else 1)
        total += C * bpe_in if is_training else 0
        if is_affine:
            total += C * bpe_in + (C * bpe_in * (2 if has_bias else 1) if is_training else 0)
        return total


class RMSNorm:
    """RMSNorm (TraceLens's `RMSNorm` / `RMSNormBwd` formulas, as static functions)."""

    @staticmethod
    def flops_func(num_elems: int, num_channels: int, is_affine: bool = True) -> int:
        rows = num_elems // num_channels
        return rows * (2 * num_channels + 2) + num_elems * (2 if is_affine else 1)

    @staticmethod
    def bytes_func(num_elems, num_channels, is_affine, bpe_in, bpe_out) -> Number:
        return (
            num_elems * bpe_in + num_elems * bpe_out + (num_channels * bpe_in if is_affine else 0)
        )

    @staticmethod
    def flops_bwd_func(num_elems, num_channels, is_affine=True, output_mask=(True, True)) -> int:
        E, rows = num_elems, num_elems // num_channels
        total = (E if is_affine else 0) + E + (6 * E if output_mask[0] else 0)
        total += E if output_mask[1] and is_affine else 0
        total += E if output_mask[1] and is_affine and rows > 1 else 0
        return total

    @staticmethod
    def bytes_bwd_func(num_elems, num_channels, is_affine, bpe_in, bpe_out) -> Number:
        return (
            num_elems * bpe_out
            + 2 * num_elems * bpe_in
            + (2 * num_channels * bpe_in if is_affine else 0)
        )


class NormOp(OpRecord, frozen=True):
    """LayerNorm or RMSNorm of `num_elems` elements over rows of `num_channels`."""

    kind: ClassVar[str] = "Normalization"
    unit: ClassVar[Unit] = Unit.vector

    norm: Literal["layernorm", "rmsnorm"]
    num_elems: int
    num_channels: int
    is_affine: bool = True
    has_bias: bool = False
    is_training: bool = False
    dtype: DType = DType.bf16

    def _args(self, training: bool) -> tuple[bool, bool, bool, int, int]:
        return (self.has_bias, self.is_affine, training, self.num_elems, self.num_channels)

    def describe(self) -> str:
        return f"{self.norm} {self.num_elems:,} over {self.num_channels}"

    def flops(self) -> Number:
        if self.norm == "rmsnorm":
            return RMSNorm.flops_func(self.num_elems, self.num_channels, self.is_affine)
        return Normalization.flops_func(*self._args(self.is_training))

    def bytes(self) -> Number:
        e = bpe(self.dtype)
        if self.norm == "rmsnorm":
            return RMSNorm.bytes_func(self.num_elems, self.num_channels, self.is_affine, e, e)
        return Normalization.bytes_func(*self._args(self.is_training), e, e)

    def flops_bwd(self) -> Number:
        if self.norm == "rmsnorm":
            return RMSNorm.flops_bwd_func(self.num_elems, self.num_channels, self.is_affine)
        args = (self.has_bias, self.is_affine, True, self.num_elems, self.num_channels)
        return Normalization.flops_func_bwd(*args, (True, True, True))

    def bytes_bwd(self) -> Number:
        e = bpe(self.dtype)
        if self.norm == "rmsnorm":
            return RMSNorm.bytes_bwd_func(self.num_elems, self.num_channels, self.is_affine, e, e)
        args = (self.has_bias, self.is_affine, True, self.num_elems, self.num_channels)
        return Normalization.bytes_func_bwd(*args, e, e, (True, True, True))

    # TraceLens always counts LayerNorm as training (running statistics included)
    def tracelens_flops(self) -> Number:
        if self.norm == "rmsnorm":
            return self.flops()
        return Normalization.flops_func(*self._args(True))

    def tracelens_bytes(self) -> Number:
        if self.norm == "rmsnorm":
            return self.bytes()
        e = bpe(self.dtype)
        return Normalization.bytes_func(*self._args(True), e, e)
