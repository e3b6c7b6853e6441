"""Convolutions (1-3 D, grouped, transposed), e.g. a vision transformer's patch embedding.

Shapes follow PyTorch: x (N, C_in, *spatial), w (C_out, C_in/groups, *kernel) — for a
transposed conv w is (C_in, C_out/groups, *kernel) — and out (N, C_out, *spatial').
FLOPs follow torch.utils.flop_counter: 2 · prod(w[1:]) per output element.
"""

from __future__ import annotations

from typing import ClassVar

from modelcost.base.dtypes import DType

from .base import Number, OpRecord, Unit, bpe, prod


class CONV:
    """TraceLens-compatible static functions."""

    @staticmethod
    def get_output_shape(
        x_shape,
        w_shape,
        stride,
        padding,
        dilation,
        transposed: bool = False,
        output_padding=None,
    ) -> tuple[int, ...]:
        spatial = []
        for i, size in enumerate(x_shape[2:]):
            k, s, p, d = w_shape[2 + i], stride[i], padding[i], dilation[i]
            if transposed:
                op = output_padding[i] if output_padding else 0
                spatial.append((size - 1) * s - 2 * p + d * (k - 1) + op + 1)
            else:
                spatial.append((size + 2 * p - d * (k - 1) - 1) // s + 1)
        channels = w_shape[1] if transposed else w_shape[0]
        return (x_shape[0], channels, *spatial)

    @staticmethod
    def flops_func(x_shape, w_shape, out_shape, bias: bool, transposed_conv: bool = False) -> int:
        per_element = 2 * prod(w_shape[1:])
        conv = prod(x_shape if transposed_conv else out_shape) * per_element
        return conv + (prod(out_shape) if bias else 0)

    @staticmethod
    def bytes_func(x_shape, w_shape, out_shape, bias: bool, bytes_per_element: Number) -> Number:
        elements = prod(x_shape) + prod(w_shape) + (out_shape[1] if bias else 0) + prod(out_shape)
        return elements * bytes_per_element

    @staticmethod
    def flops_bwd_func(out_shape, x_shape, w_shape, bias: bool, transposed_conv: bool = False):
        """Input gradient and weight gradient each cost one forward conv. Note the order
        (out, x, w, ...), as in TraceLens."""
        conv = CONV.flops_func(x_shape, w_shape, out_shape, False, transposed_conv)
        return 2 * conv + (prod(out_shape) if bias else 0)

    @staticmethod
    def bytes_bwd_func(x_shape, w_shape, out_shape, bias: bool, bytes_per_element: Number):
        """TraceLens's backward traffic: the bias term is an element count, not bytes."""
        grads = 2 * (prod(out_shape) + prod(w_shape) + prod(x_shape)) * bytes_per_element
        return grads + ((prod(out_shape) + out_shape[1]) if bias else 0)


class ConvOp(OpRecord, frozen=True):
    """A convolution: input shape, weight shape, and its geometry."""

    kind: ClassVar[str] = "CONV"
    unit: ClassVar[Unit] = Unit.matrix

    x_shape: tuple[int, ...]
    w_shape: tuple[int, ...]
    stride: tuple[int, ...] = (1,)
    padding: tuple[int, ...] = (0,)
    dilation: tuple[int, ...] = (1,)
    transposed: bool = False
    output_padding: tuple[int, ...] = (0,)
    bias: bool = False
    dtype: DType = DType.bf16

    def _per_dim(self, values: tuple[int, ...]) -> tuple[int, ...]:
        """A 1-element setting applies to every spatial dimension, as in PyTorch."""
        n = len(self.x_shape) - 2
        return values * n if len(values) == 1 else values

    @property
    def out_shape(self) -> tuple[int, ...]:
        return CONV.get_output_shape(
            self.x_shape,
            self.w_shape,
            self._per_dim(self.stride),
            self._per_dim(self.padding),
            self._per_dim(self.dilation),
            self.transposed,
            self._per_dim(self.output_padding),
        )

    def shape(self) -> dict[str, object]:
        return {"x": self.x_shape, "w": self.w_shape, "out": self.out_shape, "bias": self.bias}

    def flops(self) -> Number:
        return CONV.flops_func(
            self.x_shape, self.w_shape, self.out_shape, self.bias, self.transposed
        )

    def bytes(self) -> Number:
        return CONV.bytes_func(
            self.x_shape, self.w_shape, self.out_shape, self.bias, bpe(self.dtype)
        )

    def flops_bwd(self) -> Number:
        return CONV.flops_bwd_func(
            self.out_shape, self.x_shape, self.w_shape, self.bias, self.transposed
        )

    def bytes_bwd(self) -> Number:
        e = bpe(self.dtype)
        out = self.out_shape
        grads = 2 * (prod(out) + prod(self.w_shape) + prod(self.x_shape)) * e
        return grads + ((prod(out) + out[1]) * e if self.bias else 0)  # read dY, write db

    def tracelens_bytes_bwd(self) -> Number:
        e = bpe(self.dtype)
        return CONV.bytes_bwd_func(self.x_shape, self.w_shape, self.out_shape, self.bias, e)
