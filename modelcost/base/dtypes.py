"""The one dtype table: storage size, block scales and compute precision of every dtype."""

from __future__ import annotations

from enum import StrEnum

from .record import Record


class DType(StrEnum):
    fp32 = "fp32"
    tf32 = "tf32"
    bf16 = "bf16"
    fp16 = "fp16"
    fp8_e4m3 = "fp8_e4m3"
    fp8_e5m2 = "fp8_e5m2"
    int8 = "int8"
    fp6_e2m3 = "fp6_e2m3"
    fp6_e3m2 = "fp6_e3m2"
    fp4 = "fp4"
    int4 = "int4"
    mxfp8 = "mxfp8"
    mxfp6 = "mxfp6"
    mxfp4 = "mxfp4"
    nvfp4 = "nvfp4"


class DTypeInfo(Record, frozen=True):
    """Storage bits per element; block scaling (one scale of `scale_bits` per `block`
    elements); and the precision whose peak the roofline uses for math in this dtype."""

    bits: int
    precision: str
    block: int = 0
    scale_bits: int = 0

    @property
    def bytes_per_element(self) -> float:
        scale = self.scale_bits / 8 / self.block if self.block else 0.0
        return self.bits / 8 + scale


# OCP Microscaling (MX) v1.0: one E8M0 (8-bit) scale per 32 elements.
# NVFP4: one E4M3 (8-bit) scale per 16 elements.
DTYPES: dict[DType, DTypeInfo] = {
    DType.fp32: DTypeInfo(32, "fp32"),
    DType.tf32: DTypeInfo(32, "tf32"),  # stored as fp32, multiplied at tf32 rate
    DType.bf16: DTypeInfo(16, "bf16"),
    DType.fp16: DTypeInfo(16, "fp16"),
    DType.fp8_e4m3: DTypeInfo(8, "fp8"),
    DType.fp8_e5m2: DTypeInfo(8, "fp8"),
    DType.int8: DTypeInfo(8, "int8"),
    DType.fp6_e2m3: DTypeInfo(6, "fp6"),
    DType.fp6_e3m2: DTypeInfo(6, "fp6"),
    DType.fp4: DTypeInfo(4, "fp4"),
    DType.int4: DTypeInfo(4, "int4"),
    DType.mxfp8: DTypeInfo(8, "fp8", block=32, scale_bits=8),
    DType.mxfp6: DTypeInfo(6, "fp6", block=32, scale_bits=8),
    DType.mxfp4: DTypeInfo(4, "fp4", block=32, scale_bits=8),
    DType.nvfp4: DTypeInfo(4, "fp4", block=16, scale_bits=8),
}

# Short spellings accepted in specs.
ALIASES: dict[str, DType] = {
    "fp8": DType.fp8_e4m3,
    "e4m3": DType.fp8_e4m3,
    "e5m2": DType.fp8_e5m2,
    "bf8": DType.fp8_e5m2,
    "fp6": DType.fp6_e2m3,
    "float32": DType.fp32,
    "float16": DType.fp16,
    "bfloat16": DType.bf16,
}


def lookup_dtype(name: str) -> DType | None:
    """The dtype a spec name denotes (canonical or alias), or None."""
    if name in DType.__members__:
        return DType(name)
    return ALIASES.get(name)


def dtype_names() -> list[str]:
    return [*DType.__members__, *ALIASES]
