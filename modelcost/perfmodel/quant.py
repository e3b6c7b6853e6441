"""Quantize and dequantize between dtypes (block-scaled formats compute a scale per block)."""

from __future__ import annotations

from typing import ClassVar

from modelcost.base.dtypes import DTYPES, DType

from .base import Number, OpRecord, Unit, bpe


class QuantizeOp(OpRecord, frozen=True):
    """Convert `elements` values from `src` to the narrower `dst` (an activation at a
    GEMM's input, under a precision recipe).

    FLOPs per element: scale and convert (2), plus the block's absolute maximum (1) when
    each block computes its own scale. Bytes: src read, dst (with its scales) written.
    Training's casts (recipes.Recipe): `amax_read`, a first pass over src for the
    tensor's amax (1 FLOP and src's bytes an element: current scaling); `copies` 2, a
    column-wise quantized copy written beside the row-wise one (MXFP8).
    The backward casts `grads` elements the same way where it is set: the output
    gradients of the GEMMs that read this tensor, which Transformer Engine quantizes for
    their dgrad and wgrad (its grad_output quantizer; the input gradient leaves the dgrad
    GEMM in high precision and is cast by no one). Unset (0), the backward casts as
    many elements as the forward.
    """

    kind: ClassVar[str] = "Quantize"
    unit: ClassVar[Unit] = Unit.vector

    elements: int
    src: DType = DType.bf16
    dst: DType = DType.fp8_e4m3
    scale_bytes: Number = 0  # the scales it writes, when `dst` does not carry them
    block: int = 0  # elements a scale covers (0: one scale for the tensor, kept static)
    amax_read: bool = False
    copies: int = 1
    grads: int = 0

    optional: ClassVar[tuple[str, ...]] = ("grads",)

    def _flops(self, elements: int) -> Number:
        per = (3 if DTYPES[self.dst].block or self.block else 2) * self.copies
        return (per + (1 if self.amax_read else 0)) * elements

    def _bytes(self, elements: int) -> Number:
        reads = bpe(self.src) * (2 if self.amax_read else 1)
        scales = self.scale_bytes  # the forward's; a gradient's as many a value
        if elements != self.elements:
            scales = self.scale_bytes * elements / self.elements if self.elements else 0
        return elements * reads + self.copies * (elements * bpe(self.dst) + scales)

    def flops(self) -> Number:
        return self._flops(self.elements)

    def bytes(self) -> Number:
        return self._bytes(self.elements)

    def flops_bwd(self) -> Number:
        return self._flops(self.grads or self.elements)

    def bytes_bwd(self) -> Number:
        return self._bytes(self.grads or self.elements)

    def describe(self) -> str:
        scales = f", a scale per {self.block}" if self.block else ""
        return f"{self.elements:,} {self.src} → {self.dst}{scales}"

    def backward_reads_inputs(self) -> bool:
        # the cast's gradient passes straight through; the GEMM that reads the narrow
        # copy keeps it (Transformer Engine saves the FP8 input for the weight gradient)
        return False


class DequantizeOp(OpRecord, frozen=True):
    """Expand `elements` values from `src` (e.g. mxfp4 weights) to `dst`: one multiply
    by the scale per element."""

    kind: ClassVar[str] = "Dequantize"
    unit: ClassVar[Unit] = Unit.vector

    elements: int
    src: DType = DType.mxfp4
    dst: DType = DType.bf16

    def flops(self) -> Number:
        return self.elements

    def bytes(self) -> Number:
        return self.elements * (bpe(self.src) + bpe(self.dst))

    flops_bwd = flops
    bytes_bwd = bytes
