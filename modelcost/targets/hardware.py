"""Hardware targets: parse a hardware file into a validated `Hardware`, find shipped ones.

A hardware file gives one accelerator's dense datasheet peaks per precision for the
matrix and vector units, achievable (measured) peaks where published, HBM capacity and
bandwidth, scale-up bandwidth and the arch id, each value with its unit.

Capacity: `memory` is the datasheet figure (a vendor's HBM "GB" are GiB: an H100's 80 GB
is 80 GiB, of which nvidia-smi reports 81,559 MiB); `memory_reported` is the total
the driver reports (nvidia-smi "FB Memory Usage Total" in MiB, rocm-smi "VRAM Total
Memory" in bytes), with `memory_source` saying where it was published. Every fit check
uses `Hardware.capacity`: the driver's figure where the file gives one, else `memory`.

`in_switch_reduction` says whether the scale-up switch reduces in the fabric ("nvls":
NVLink SHARP, NVSwitch 3 and later) or not ("none", the default: a file without the
field reads as before); the collective bound (network.py) takes it.
"""

from __future__ import annotations

import math
from decimal import Decimal, InvalidOperation
from functools import cache
from pathlib import Path
from typing import Any, Literal, get_args

from lark import Lark, Token
from lark.exceptions import UnexpectedInput
from pydantic import Field

from modelcost.base.bounds import check_bounds
from modelcost.base.errors import SpecError, did_you_mean
from modelcost.base.files import read_text
from modelcost.base.frozen import Frozen
from modelcost.base.resources import specs_dir
from modelcost.base.settings import CapacityBasis, PeakMode
from modelcost.language.grammar_tables import load_parser
from modelcost.language.parse import syntax_error

PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp6", "fp4", "int4")
# When a precision has no unit of its own, math runs at the next wider one.
FALLBACK = {
    "fp4": "fp6", "fp6": "fp8", "int4": "int8", "int8": "fp8", "fp8": "bf16",
    "fp16": "bf16", "tf32": "fp32",
}  # fmt: skip

UNITS: dict[str, tuple[str, float]] = {
    "PFLOPS": ("compute", 1e15), "TFLOPS": ("compute", 1e12), "GFLOPS": ("compute", 1e9),
    "POPS": ("compute", 1e15), "TOPS": ("compute", 1e12),
    "TB/s": ("bandwidth", 1e12), "GB/s": ("bandwidth", 1e9), "MB/s": ("bandwidth", 1e6),
    "Gb/s": ("bandwidth", 1e9 / 8), "us": ("time", 1e-6), "ns": ("time", 1e-9),
    "TB": ("size", 1e12), "GB": ("size", 1e9), "MB": ("size", 1e6),
    "TiB": ("size", 2.0**40), "GiB": ("size", 2.0**30), "MiB": ("size", 2.0**20),
    "KiB": ("size", 2.0**10),
    "GHz": ("frequency", 1e9), "MHz": ("frequency", 1e6), "W": ("power", 1.0),
}  # fmt: skip
UNIT_EXAMPLES = {
    "compute": "TFLOPS", "bandwidth": "TB/s", "size": "GB", "frequency": "MHz",
    "power": "W", "count": "no unit", "text": 'a "string"', "time": "us",
}  # fmt: skip

SECTIONS = ("matrix", "vector", "achievable")
MIN_FIGURE = 1.0  # bytes, bytes/s, FLOP/s, Hz, W: anything smaller is a mistake
MAX_COUNT = 1_000_000  # compute units
ACHIEVABLE_EXTRA = {"memory_bandwidth": "bandwidth", "source": "text"}
# what the scale-up switch can do to an all-reduce: nothing, or NVLink SHARP (NVLS)
InSwitchReduction = Literal["none", "nvls"]
IN_SWITCH_REDUCTIONS: tuple[str, ...] = get_args(InSwitchReduction)

MIN_TIME = 1e-12  # seconds: a latency below a picosecond is a unit mistake


class Achievable(Frozen):
    """Measured peaks: matrix FLOP/s by precision and HBM bandwidth, with their source."""

    matrix: dict[str, float] = Field(default_factory=dict)
    memory_bandwidth: float | None = None
    source: str = ""


def _holds(kind: str, *default: Any) -> Any:
    """A top-level field of a hardware file, and what it holds (a unit kind of `UNITS`,
    or text); a field with no default is required in the file."""
    return Field(*default, json_schema_extra={"holds": kind})


class Hardware(Frozen):
    """One accelerator. FLOP/s, bytes and bytes/s in plain SI units. Every field declared
    with `_holds` is a field of the hardware file, read as that kind (`TOP_FIELDS`)."""

    name: str
    title: str = _holds("text")
    vendor: str = _holds("text")
    arch: str = _holds("text")
    memory: float = _holds("size")  # the datasheet figure, bytes
    # bytes, as the driver reports the total; `memory_source`: where it was published
    memory_reported: float | None = _holds("size", None)
    memory_source: str = _holds("text", "")
    memory_bandwidth: float = _holds("bandwidth")
    # bidirectional aggregate per device, as vendors quote it
    scaleup_bandwidth: float = _holds("bandwidth")
    # the links beyond one device have defaults (docs/conventions.md): an 8-device
    # scale-up domain (HGX, MI300X-class platforms; 72 on GB200 NVL72), one 400 Gb/s NIC
    # per device and direction for scale-out, and round per-step latencies of NCCL/RCCL's
    # order (assumptions, not measurements)
    scaleup_domain: int = _holds("count", 8)
    scaleout_bandwidth: float = _holds("bandwidth", 50e9)
    scaleup_latency: float = _holds("time", 1e-6)  # seconds per collective step
    scaleout_latency: float = _holds("time", 2e-6)
    in_switch_reduction: InSwitchReduction = _holds("text", "none")  # "nvls": the switch reduces
    # per direction per device: the link to host memory (PCIe, NVLink-C2C) that activation
    # offloading copies over; None where the file does not say (offloading is refused)
    host_bandwidth: float | None = _holds("bandwidth", None)
    compute_units: int = _holds("count")
    clock: float = _holds("frequency")
    tdp: float | None = _holds("power", None)
    source: str = _holds("text", "")
    matrix: dict[str, float]
    vector: dict[str, float]
    achievable: Achievable = Field(default_factory=lambda: Achievable())

    def peak(
        self,
        unit: Literal["matrix", "vector"],
        precision: str,
        which: PeakMode = "datasheet",
    ) -> tuple[float, str, PeakMode]:
        """(FLOP/s, precision used, source used) for math at `precision` on `unit`.

        An unsupported precision falls back to the next wider one; `achievable` falls
        back to the datasheet where nothing was measured.
        """
        table = self.matrix if unit == "matrix" else self.vector
        used = precision
        while used not in table and used in FALLBACK:
            used = FALLBACK[used]
        if used not in table:  # e.g. fp32 GEMMs on a GPU without an fp32 matrix path
            table, used = self.vector, "fp32"
        if which == "achievable" and table is self.matrix and used in self.achievable.matrix:
            return self.achievable.matrix[used], used, "achievable"
        return table[used], used, "datasheet"

    def bandwidth(self, which: PeakMode = "datasheet") -> float:
        if which == "achievable" and self.achievable.memory_bandwidth:
            return self.achievable.memory_bandwidth
        return self.memory_bandwidth

    @property
    def capacity(self) -> float:
        """Bytes one device holds for a fit check: the driver's total where known (what
        an engine sizes its KV cache from), else the datasheet figure."""
        return self.memory if self.memory_reported is None else self.memory_reported

    @property
    def capacity_basis(self) -> CapacityBasis:
        return "datasheet" if self.memory_reported is None else "driver-reported"

    @property
    def scaleup_per_direction(self) -> float:
        return self.scaleup_bandwidth / 2


# a hardware file's top-level field -> what it holds, and those it may leave out: read
# from `Hardware`'s declaration, the one place a field is named
TOP_FIELDS: dict[str, str] = {
    name: str(f.json_schema_extra["holds"])
    for name, f in Hardware.model_fields.items()
    if isinstance(f.json_schema_extra, dict) and "holds" in f.json_schema_extra
}
OPTIONAL = tuple(name for name in TOP_FIELDS if not Hardware.model_fields[name].is_required())


@cache
def _parser() -> Lark:
    return load_parser("hardware.lark")


def hardware_dir() -> Path:
    return specs_dir() / "hardware"


def shipped_hardware() -> list[str]:
    return sorted(p.stem for p in hardware_dir().glob("*.hw"))


def load_hardware(name_or_path: str | Path) -> Hardware:
    """A shipped target by name (`mi300x`) or a hardware file by path."""
    path = Path(name_or_path)
    if "\0" in str(name_or_path):
        raise SpecError("a path cannot contain a NUL byte", filename=repr(str(name_or_path)))
    if path.suffix != ".hw" and not path.exists():
        shipped = hardware_dir() / f"{name_or_path}.hw"
        if not shipped.exists():
            names = shipped_hardware()
            hint = did_you_mean(str(name_or_path), names) or f"shipped: {', '.join(names)}"
            raise SpecError(f"unknown hardware `{name_or_path}`", filename="--hw", hint=hint)
        path = shipped
    return parse_hardware(read_text(path), str(path))


def _quoted(text: str) -> str:
    return f'"{text}"'


class _Reader:
    def __init__(self, text: str, filename: str) -> None:
        self.lines = text.splitlines()
        self.filename = filename

    def error(self, message: str, node, hint: str | None = None) -> SpecError:
        line, col = node.line, node.column
        width = (node.end_column - col) if getattr(node, "end_line", line) == line else 1
        return SpecError(
            message,
            filename=self.filename,
            line=line,
            column=col,
            hint=hint,
            source_line=self.lines[line - 1] if 0 < line <= len(self.lines) else None,
            width=width,
        )

    def value(self, field: Any, kind: str, where: str) -> object:
        """One field's value (lark trees are untyped here: the grammar fixes their shape)."""
        name_tok: Token = field.children[0]
        value = field.children[1]
        if value.data == "string":
            if kind != "text":
                raise self.error(
                    f"`{where}` needs {kind} (e.g. {UNIT_EXAMPLES[kind]}), got a string", value.meta
                )
            return value.children[0][1:-1]
        number_tok, unit_tok = value.children
        if kind == "text":
            raise self.error(f'`{where}` needs a "string"', value.meta)
        try:
            number = Decimal(str(number_tok).replace("_", ""))
        except InvalidOperation:  # an exponent beyond what Decimal can hold
            raise self.error(f"`{where}` = {number_tok} is out of range", number_tok) from None
        if kind == "count":
            if (
                unit_tok is not None
                or not number.is_finite()
                or number != number.to_integral_value()
            ):
                raise self.error(f"`{where}` needs a whole number with no unit", value.meta)
            if number < 1 or number > MAX_COUNT:
                raise self.error(
                    f"`{where}` must be between 1 and {MAX_COUNT:,}, got {number}", number_tok
                )
            return int(number)
        if unit_tok is None:
            raise self.error(
                f"`{where}` needs a unit", number_tok, f"for example {UNIT_EXAMPLES[kind]}"
            )
        unit_kind, scale = UNITS[str(unit_tok)]
        if unit_kind != kind:
            raise self.error(
                f"`{where}` needs {kind} (e.g. {UNIT_EXAMPLES[kind]}), not `{unit_tok}`",
                unit_tok,
            )
        if number <= 0:
            raise self.error(f"`{where}` must be positive", number_tok)
        del name_tok
        converted = float(number * Decimal(scale))
        if not math.isfinite(converted) or converted < (MIN_TIME if kind == "time" else MIN_FIGURE):
            raise self.error(
                f"`{where}` = {number_tok} {unit_tok} is out of range once converted to "
                f"base units ({converted:g})",
                number_tok,
                f"figures must be finite and at least {MIN_FIGURE:g} in base units",
            )
        return converted

    def fields(self, entries: list[Any], allowed: dict[str, str], where: str) -> dict:
        out: dict[str, object] = {}
        for f in entries:
            name_tok: Token = f.children[0]
            name = str(name_tok)
            if f.data == "section":
                raise self.error(f"sections cannot nest: `{name}` inside `{where}`", name_tok)
            if name not in allowed:
                hint = did_you_mean(name, allowed) or f"allowed here: {', '.join(allowed)}"
                raise self.error(f"unknown field `{name}` in `{where}`", name_tok, hint)
            if name in out:
                raise self.error(f"`{name}` is set twice in `{where}`", name_tok)
            label = name if where == "hardware" else f"{where}.{name}"
            out[name] = self.value(f, allowed[name], label)
        return out


def parse_hardware(text: str, filename: str = "<string>") -> Hardware:
    """Parse and validate a hardware file."""
    check_bounds(text, filename)
    try:
        tree = _parser().parse(text)
    except UnexpectedInput as err:
        raise syntax_error(err, text, filename, _parser()) from None
    reader = _Reader(text, filename)
    hw: Any
    (hw,) = tree.children
    name_tok, *entries = hw.children
    top = [e for e in entries if e.data == "field"]
    sections = _sections(reader, entries)
    values = reader.fields(top, TOP_FIELDS, "hardware")
    _check_top(reader, top, values)
    tables = {}
    for sname in SECTIONS:
        allowed = dict.fromkeys(PRECISIONS, "compute")
        if sname == "achievable":
            allowed |= ACHIEVABLE_EXTRA
        body = sections[sname].children[1:] if sname in sections else []
        tables[sname] = reader.fields(body, allowed, sname)
    _check_complete(reader, name_tok, values, tables, sections)
    ach = tables["achievable"]
    # every value typed and range-checked by the reader above: no second validation
    achievable = Achievable.trusted(
        matrix={k: v for k, v in ach.items() if k in PRECISIONS},
        memory_bandwidth=ach.get("memory_bandwidth"),
        source=ach.get("source", ""),
    )
    return Hardware.trusted(
        name=str(name_tok),
        matrix=tables["matrix"],
        vector=tables["vector"],
        achievable=achievable,
        **values,
    )


def _sections(reader: _Reader, entries: list[Any]) -> dict[str, Any]:
    """The file's sections by name, each known and given once."""
    sections: dict[str, Any] = {}
    for e in entries:
        if e.data == "section":
            sname = str(e.children[0])
            if sname not in SECTIONS:
                hint = did_you_mean(sname, SECTIONS) or f"sections: {', '.join(SECTIONS)}"
                raise reader.error(f"unknown section `{sname}`", e.children[0], hint)
            if sname in sections:
                raise reader.error(f"section `{sname}` appears twice", e.children[0])
            sections[sname] = e
    return sections


def _check_top(reader: _Reader, top: list[Any], values: dict[str, Any]) -> None:
    """The top-level fields that depend on each other: a memory source says where a
    reported memory comes from; the in-switch reduction is one the file can name."""
    if "memory_source" in values and "memory_reported" not in values:
        node = next(f for f in top if str(f.children[0]) == "memory_source")
        raise reader.error(
            "`memory_source` says where `memory_reported` comes from, but there is no "
            "`memory_reported`",
            node.children[0],
            "add `memory_reported = <total the driver reports>` (e.g. 143771 MiB)",
        )
    reduction = values.get("in_switch_reduction", "none")
    if reduction not in IN_SWITCH_REDUCTIONS:
        node = next(f for f in top if str(f.children[0]) == "in_switch_reduction")
        raise reader.error(
            f"`in_switch_reduction` must be {' or '.join(map(_quoted, IN_SWITCH_REDUCTIONS))}, "
            f"got {_quoted(str(reduction))}",
            node.children[1].meta,
            did_you_mean(str(reduction), IN_SWITCH_REDUCTIONS)
            or '"nvls" where the scale-up switch reduces (NVLink SHARP), else "none"',
        )


def _check_complete(
    reader: _Reader,
    name_tok: Any,
    values: dict[str, Any],
    tables: dict[str, dict[str, Any]],
    sections: dict[str, Any],
) -> None:
    """Every required field and the matrix and vector sections given; fp32 among the
    vector rates."""
    required = [f for f in TOP_FIELDS if f not in OPTIONAL]
    missing = [f for f in required if f not in values]
    for sname in ("matrix", "vector"):
        if not tables[sname]:
            missing.append(f"{sname} {{ ... }}")
    if missing:
        raise reader.error(
            f"hardware `{name_tok}` is missing {', '.join(f'`{m}`' for m in missing)}",
            name_tok,
        )
    if "fp32" not in tables["vector"]:
        node = sections["vector"].children[0] if "vector" in sections else name_tok
        raise reader.error("the `vector` section needs `fp32`", node)
