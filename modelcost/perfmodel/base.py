"""The shared vocabulary of the perf model: conventions, compute units, the cost record,
and the base every op record derives from."""

from __future__ import annotations

from enum import StrEnum
from functools import cache
from typing import ClassVar, Literal

from modelcost.base.dtypes import DTYPES, DType
from modelcost.base.record import Record


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
    """Where an op's math runs: matrix cores, vector ALUs, the scale-up network, or the
    device's link to host memory (activation offloading's copies)."""

    matrix = "matrix"
    vector = "vector"
    network = "network"
    host = "host"


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
    implement the four counts under modelcost's conventions; where TraceLens's perf model
    counts differently, a `tracelens_*` count says how (by default it is the same). The
    conventions are read in one place, `cost` and `cost_bwd`.
    """

    kind: ClassVar[str] = ""
    unit: ClassVar[Unit] = Unit.vector
    optional: ClassVar[tuple[str, ...]] = ()  # shape fields shown only when nonzero

    def flops(self) -> Number:
        raise NotImplementedError

    def bytes(self) -> Number:
        raise NotImplementedError

    def flops_bwd(self) -> Number:
        raise NotImplementedError

    def bytes_bwd(self) -> Number:
        raise NotImplementedError

    def backward_reads_inputs(self) -> bool:
        """Whether the backward reads this op's activation inputs, so the forward keeps
        them: a GEMM's (its weight gradient), a norm's, an activation's, a product's
        (the default); an add's, a rotation's or a collective's backward needs only the
        gradient coming back (Korthikanti et al. 2022, section 4: what each op stores)."""
        return True

    def backward_reads_output(self) -> bool:
        """Whether the backward reads this op's own output (flash attention's O)."""
        return False

    def tracelens_flops(self) -> Number:
        return self.flops()

    def tracelens_bytes(self) -> Number:
        return self.bytes()

    def tracelens_flops_bwd(self) -> Number:
        return self.flops_bwd()

    def tracelens_bytes_bwd(self) -> Number:
        return self.bytes_bwd()

    def vector_flops(self) -> Number:
        """Work a matrix op does on the vector units beside its matrix math (the
        dequantization of narrow weights in a weight-only GEMM): a third roof."""
        return 0

    def cost(self, conventions: Conventions = MODELCOST) -> Cost:
        """The forward's FLOPs and bytes under `conventions`."""
        if conventions is Conventions.tracelens:
            return Cost(self.tracelens_flops(), self.tracelens_bytes())
        return Cost(self.flops(), self.bytes())

    def cost_bwd(self, conventions: Conventions = MODELCOST) -> Cost:
        """The backward's FLOPs and bytes under `conventions`."""
        if conventions is Conventions.tracelens:
            return Cost(self.tracelens_flops_bwd(), self.tracelens_bytes_bwd())
        return Cost(self.flops_bwd(), self.bytes_bwd())

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
