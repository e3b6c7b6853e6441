"""The shared vocabulary of the perf model: conventions, compute units, the cost record,
and the base every op record derives from."""

from __future__ import annotations

from enum import StrEnum
from functools import cache
from typing import ClassVar, Literal

from ..dtypes import DTYPES, DType
from ..record import Record


class Conventions(StrEnum):
    """Counting conventions. `tracelens` reproduces TraceLens's perf model exactly;
    `modelcost` (the default) fixes its defects (docs/conventions.md)."""

    modelcost = "modelcost"
    tracelens = "tracelens"

    @property
    def logits(self) -> Literal["all", "last"]:
        """Prefill's logits where a workload leaves them out: serving engines (vLLM,
        SGLang, TensorRT-LLM) compute each sequence's last position only, so modelcost
        does; TraceLens's conventions count every position's."""
        return "all" if self is Conventions.tracelens else "last"


MODELCOST = Conventions.modelcost
TRACELENS = Conventions.tracelens


class Unit(StrEnum):
    """Where an op's math runs: matrix cores, vector ALUs, or the scale-up network."""

    matrix = "matrix"
    vector = "vector"
    network = "network"


Number = int | float


class Cost(Record, frozen=True):
    """FLOPs and bytes moved, addable and scalable (a repeated op is `count * cost`)."""

    flops: Number = 0
    bytes: Number = 0

    def __add__(self, other: Cost) -> Cost:
        return Cost(self.flops + other.flops, self.bytes + other.bytes)

    def __mul__(self, k: Number) -> Cost:
        return Cost(self.flops * k, self.bytes * k)

    __rmul__ = __mul__

    @property
    def intensity(self) -> float:
        """Arithmetic intensity, FLOPs per byte (inf for a byte-free op)."""
        return self.flops / self.bytes if self.bytes else float("inf")


def _bytes(dtype: DType) -> Number:
    value = DTYPES[dtype].bytes_per_element
    return int(value) if value.is_integer() else value


_BPE: dict[DType, Number] = {d: _bytes(d) for d in DType}


def bpe(dtype: DType) -> Number:
    """Bytes per element, block scales included (mxfp4: 0.5 + 1/32)."""
    return _BPE[dtype]


_PRECISION_RANK = {"fp32": 6, "tf32": 5, "bf16": 4, "fp16": 4, "fp8": 3, "int8": 3, "fp6": 2}


@cache
def compute_precision(*dtypes: DType) -> str:
    """The precision math on these operands runs at: that of the widest operand
    (bf16 activations × int4 weights run at bf16; fp8 × fp8 at fp8)."""
    precisions = [DTYPES[d].precision for d in dtypes]
    return max(precisions, key=lambda p: _PRECISION_RANK.get(p, 1))


def prod(values) -> int:
    out = 1
    for v in values:
        out *= v
    return out


class OpRecord(Record, frozen=True):
    """One op instance: its shape parameters and the dtype of each operand.

    Subclasses set `kind` (the perf-model class name: GEMM, SDPA, ...) and `unit`, and
    implement the four counts. Every count takes the conventions to use.
    """

    kind: ClassVar[str] = ""
    unit: ClassVar[Unit] = Unit.vector
    optional: ClassVar[tuple[str, ...]] = ()  # shape fields shown only when nonzero

    def flops(self, conventions: Conventions = MODELCOST) -> Number:
        raise NotImplementedError

    def bytes(self, conventions: Conventions = MODELCOST) -> Number:
        raise NotImplementedError

    def flops_bwd(self, conventions: Conventions = MODELCOST) -> Number:
        raise NotImplementedError

    def bytes_bwd(self, conventions: Conventions = MODELCOST) -> Number:
        raise NotImplementedError

    def vector_flops(self) -> Number:
        """Work a matrix op does on the vector units beside its matrix math (the
        dequantization of narrow weights in a weight-only GEMM): a third roof."""
        return 0

    def cost(self, conventions: Conventions = MODELCOST) -> Cost:
        return Cost(self.flops(conventions), self.bytes(conventions))

    def cost_bwd(self, conventions: Conventions = MODELCOST) -> Cost:
        return Cost(self.flops_bwd(conventions), self.bytes_bwd(conventions))

    @property
    def precision(self) -> str:
        """The precision whose peak bounds this op's compute time."""
        return compute_precision(*self.dtypes())

    def dtypes(self) -> tuple[DType, ...]:
        """The dtypes of the operands the math runs on."""
        return tuple([getattr(self, name) for name in _fields(type(self))[1]])

    def operand_dtypes(self) -> dict[str, DType]:
        """Every operand's dtype by field name."""
        return {name: getattr(self, name) for name in _fields(type(self))[1]}

    def describe(self) -> str:
        """The shape as a reader wants it in a table (`8192×8192×1024 +bias`); records
        override this, the default lists the shape parameters."""
        return ", ".join(f"{k}={v}" for k, v in self.shape().items())

    def shape(self) -> dict[str, object]:
        """Shape parameters by their TraceLens names (dtypes left out, and the `optional`
        ones while they are zero)."""
        return {
            name: value
            for name in _fields(type(self))[0]
            if (value := getattr(self, name)) or name not in self.optional
        }


@cache
def _fields(cls: type) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(shape field names, dtype field names) of a record class, in declaration order."""
    annotations: dict[str, object] = {}
    for klass in reversed(cls.__mro__):  # as written (strings here), nothing evaluated
        annotations |= getattr(klass, "__annotations__", {})
    shape: list[str] = []
    dtypes: list[str] = []
    for name in cls.__struct_fields__:  # type: ignore[attr-defined]
        (dtypes if annotations[name] in ("DType", DType) else shape).append(name)
    return tuple(shape), tuple(dtypes)
