"""Elementwise ops (unary, binary with broadcasting) and reductions."""

from __future__ import annotations

from typing import ClassVar

from modelcost.base.dtypes import DType

from .base import Number, OpRecord, Unit, bpe, prod


def broadcast_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """NumPy/PyTorch broadcasting of two shapes."""
    if a == b:  # the common case: same shapes
        return a
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and 1 not in (x, y):
            raise ValueError(f"shapes {a} and {b} do not broadcast")
        out.append(max(x, y))
    return tuple(reversed(out))


class UnaryElementwise:
    """TraceLens-compatible static functions (one FLOP per element)."""

    @staticmethod
    def flops_func(nelems: int) -> int:
        return nelems

    @staticmethod
    def bytes_func(nelems: int, bpe_in: Number, bpe_out: Number) -> Number:
        return nelems * (bpe_in + bpe_out)


# FLOPs per element by function (TraceLens's torch.compile table uses the same counts).
UNARY_FLOPS = {"copy": 1, "relu": 1, "silu": 4, "sigmoid": 4, "gelu": 8, "gelu_tanh": 8, "exp": 4,
               "quick_gelu": 6,  # x·sigmoid(1.702x): a multiply, a sigmoid, a multiply
               "tanh": 4, "rsqrt": 2, "scale": 1}  # fmt: skip


class UnaryOp(OpRecord, frozen=True):
    """y = f(x) over a tensor of `shape`."""

    kind: ClassVar[str] = "UnaryElementwise"
    unit: ClassVar[Unit] = Unit.vector

    tensor: tuple[int, ...]
    fn: str = "copy"
    x: DType = DType.bf16
    out: DType = DType.bf16

    @property
    def nelems(self) -> int:
        return prod(self.tensor)

    def shape(self) -> dict[str, object]:
        return {"nelems": self.nelems, "fn": self.fn}

    def describe(self) -> str:
        return f"{self.fn} ×{self.nelems:,}"

    def flops(self) -> Number:
        return UNARY_FLOPS.get(self.fn, 1) * self.nelems

    def tracelens_flops(self) -> Number:
        return UnaryElementwise.flops_func(self.nelems)  # one a element, whatever f is

    def bytes(self) -> Number:
        return UnaryElementwise.bytes_func(self.nelems, bpe(self.x), bpe(self.out))

    def flops_bwd(self) -> Number:
        # dx = dy · f'(x): the derivative, then one multiply
        return (UNARY_FLOPS.get(self.fn, 1) + 1) * self.nelems

    def bytes_bwd(self) -> Number:
        n = self.nelems
        return n * bpe(self.x) + n * bpe(self.out) + n * bpe(self.x)  # read x, dy; write dx


class BinaryElementwise:
    """TraceLens-compatible static functions (one FLOP per output element)."""

    @staticmethod
    def flops_func(nelems_out: int) -> int:
        return nelems_out

    @staticmethod
    def bytes_func(nelems_in1, nelems_in2, nelems_out, bpe_in1, bpe_in2, bpe_out) -> Number:
        return nelems_in1 * bpe_in1 + nelems_in2 * bpe_in2 + nelems_out * bpe_out


class BinaryOp(OpRecord, frozen=True):
    """out = a ∘ b with broadcasting; `fn` is add, sub, mul or div."""

    kind: ClassVar[str] = "BinaryElementwise"
    unit: ClassVar[Unit] = Unit.vector

    a_shape: tuple[int, ...]
    b_shape: tuple[int, ...]
    fn: str = "add"
    a: DType = DType.bf16
    b: DType = DType.bf16
    out: DType = DType.bf16

    @property
    def nelems_out(self) -> int:
        return prod(broadcast_shape(self.a_shape, self.b_shape))

    def shape(self) -> dict[str, object]:
        return {"nelems_in1": prod(self.a_shape), "nelems_in2": prod(self.b_shape),
                "nelems_out": self.nelems_out, "fn": self.fn}  # fmt: skip

    def describe(self) -> str:
        return f"{self.fn} {prod(self.a_shape):,} ∘ {prod(self.b_shape):,}"

    def flops(self) -> Number:
        return BinaryElementwise.flops_func(self.nelems_out)

    def bytes(self) -> Number:
        n1, n2 = prod(self.a_shape), prod(self.b_shape)
        return BinaryElementwise.bytes_func(
            n1, n2, self.nelems_out, bpe(self.a), bpe(self.b), bpe(self.out)
        )

    def backward_reads_inputs(self) -> bool:
        # da = dy·b, db = dy·a for a product or quotient; a sum passes dy through
        return self.fn in ("mul", "div")

    def _reductions(self) -> int:
        """Adds that fold a broadcast operand's gradient back to its shape."""
        n = self.nelems_out
        return (n - prod(self.a_shape)) + (n - prod(self.b_shape))

    def flops_bwd(self) -> Number:
        # add/sub: da = db = ±dy; mul/div: da = dy·b, db = dy·a (div: two more per element)
        per_element = {"add": 0, "sub": 1, "mul": 2, "div": 4}.get(self.fn, 2)
        return per_element * self.nelems_out + self._reductions()

    def bytes_bwd(self) -> Number:
        n1, n2 = prod(self.a_shape), prod(self.b_shape)
        grads = self.nelems_out * bpe(self.out) + n1 * bpe(self.a) + n2 * bpe(self.b)
        if self.fn in ("add", "sub"):
            return grads  # read dy, write da and db
        return grads + n1 * bpe(self.a) + n2 * bpe(self.b)  # and read a and b


class Reduce:
    """TraceLens-compatible static functions (one FLOP per input element)."""

    @staticmethod
    def flops_func(num_input_elems: int, num_output_elems: int, reduce_type: str = "sum") -> int:
        return num_input_elems

    @staticmethod
    def bytes_func(num_input_elems, num_output_elems, bpe_in, bpe_out) -> Number:
        return num_input_elems * bpe_in + num_output_elems * bpe_out

    @staticmethod
    def flops_bwd_func(num_input_elems: int, num_output_elems: int, reduce_type: str = "sum"):
        return num_input_elems

    @staticmethod
    def bytes_bwd_func(num_input_elems, num_output_elems, bpe_in, bpe_out) -> Number:
        return num_output_elems * bpe_out + num_input_elems * bpe_in


class ReduceOp(OpRecord, frozen=True):
    """A reduction (sum, mean, max, ...) of a tensor over `dims`; cumsum keeps the shape."""

    kind: ClassVar[str] = "Reduce"
    unit: ClassVar[Unit] = Unit.vector

    tensor: tuple[int, ...]
    dims: tuple[int, ...]
    fn: str = "sum"
    x: DType = DType.bf16
    out: DType = DType.bf16

    def num_output_elems(self) -> int:
        if self.fn in ("cumsum", "cumprod"):
            return prod(self.tensor)
        kept = [s for i, s in enumerate(self.tensor) if i not in _normalize(self.dims, self.tensor)]
        return prod(kept)

    def shape(self) -> dict[str, object]:
        return {"num_input_elems": prod(self.tensor), "num_output_elems": self.num_output_elems(),
                "fn": self.fn}  # fmt: skip

    def _tracelens_output_elems(self) -> int:
        if self.fn in ("cumsum", "cumprod"):
            return prod(self.tensor)
        return 1  # TraceLens never parses the trace's dims: a full reduction

    def _flops(self, n_out: int) -> Number:
        return Reduce.flops_func(prod(self.tensor), n_out, self.fn)

    def _bytes(self, n_out: int) -> Number:
        return Reduce.bytes_func(prod(self.tensor), n_out, bpe(self.x), bpe(self.out))

    def _flops_bwd(self, n_out: int) -> Number:
        return Reduce.flops_bwd_func(prod(self.tensor), n_out)

    def _bytes_bwd(self, n_out: int) -> Number:
        return Reduce.bytes_bwd_func(prod(self.tensor), n_out, bpe(self.x), bpe(self.out))

    def flops(self) -> Number:
        return self._flops(self.num_output_elems())

    def bytes(self) -> Number:
        return self._bytes(self.num_output_elems())

    def flops_bwd(self) -> Number:
        return self._flops_bwd(self.num_output_elems())

    def bytes_bwd(self) -> Number:
        return self._bytes_bwd(self.num_output_elems())

    def tracelens_flops(self) -> Number:
        return self._flops(self._tracelens_output_elems())

    def tracelens_bytes(self) -> Number:
        return self._bytes(self._tracelens_output_elems())

    def tracelens_flops_bwd(self) -> Number:
        return self._flops_bwd(self._tracelens_output_elems())

    def tracelens_bytes_bwd(self) -> Number:
        return self._bytes_bwd(self._tracelens_output_elems())


def _normalize(dims: tuple[int, ...], shape: tuple[int, ...]) -> set[int]:
    return {d % len(shape) for d in dims}
