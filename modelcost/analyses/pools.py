"""Disaggregated serving's pools as a user writes them (`--disagg 2xtp4:1xtp8`): each
pool's instance count and layout, read with the culprit's column on a bad one."""

from __future__ import annotations

import re

from modelcost.base.errors import SpecError
from modelcost.base.record import Record
from modelcost.ir.graph import Parallel

MAX_COUNT = 1024  # instances a pool may have
AXES = ("tp", "dp", "ep", "etp", "pp")  # what a pool's layout may set
EXAMPLE = "e.g. --disagg 2xtp4:1xtp8 (two prefill instances of tp 4, one decode of tp 8)"


class Pool(Record, frozen=True):
    """`count` instances of one layout."""

    count: int
    parallel: Parallel

    @property
    def devices(self) -> int:
        return self.count * self.parallel.devices

    @property
    def label(self) -> str:
        return f"{self.count} × ({self.parallel.label or 'one device'})"


class Pools(Record, frozen=True):
    prefill: Pool
    decode: Pool
    text: str = ""  # as the user wrote it (`parse_pools`): a refusal points into it
    where: str = "--disagg"

    @property
    def devices(self) -> int:
        return self.prefill.devices + self.decode.devices


_POOL = re.compile(r"(?:(\d+)x)?((?:[a-z]+\d+)+)")
_AXIS = re.compile(r"([a-z]+)(\d+)")


def parse_pools(text: str, where: str = "--disagg") -> Pools:
    """`PREFILL:DECODE`, each `[COUNTx]LAYOUT`, LAYOUT axes written together (`tp4`,
    `tp4ep4`, `dp8ep8`; AXES): `2xtp4:1xtp8`. SpecError at the culprit's column."""

    def bad(message: str, start: int, width: int, hint: str = EXAMPLE) -> SpecError:
        return SpecError(message, filename=where, line=1, column=start + 1, hint=hint,
                         source_line=text, width=width)  # fmt: skip

    halves = text.split(":")
    if len(halves) != 2:
        at = text.find(":", text.find(":") + 1) if len(halves) > 2 else len(text)
        raise bad("expected PREFILL:DECODE, two pools separated by one `:`", max(at, 0), 1)
    pools = []
    offset = 0
    for half, role in zip(halves, ("prefill", "decode"), strict=True):
        pools.append(_parse_pool(half, offset, role, bad))
        offset += len(half) + 1
    return Pools(prefill=pools[0], decode=pools[1], text=text, where=where)


def _parse_pool(half: str, offset: int, role: str, bad) -> Pool:
    m = _POOL.fullmatch(half)
    if m is None:
        raise bad(f"the {role} pool {half!r} is not [COUNTx]LAYOUT", offset, max(len(half), 1))
    count = 1 if m.group(1) is None else int(m.group(1))
    if not 1 <= count <= MAX_COUNT:
        raise bad(f"the {role} pool needs 1 to {MAX_COUNT:,} instances, got {count}", offset,
                  len(m.group(1)))  # fmt: skip
    axes: dict[str, int] = {}
    start = m.start(2)
    for a in _AXIS.finditer(m.group(2)):
        name, value, at = a.group(1), int(a.group(2)), offset + start + a.start()
        if name not in AXES:
            raise bad(f"{name!r} is not a layout axis", at, len(name),
                      f"the axes: {', '.join(AXES)}; {EXAMPLE}")  # fmt: skip
        if name in axes:
            raise bad(f"{name} given twice in the {role} pool", at, len(a.group()))
        if value < 1:
            raise bad(f"{name} must be at least 1, got {value}", at, len(a.group()))
        axes[name] = value
    try:
        par = Parallel(tp=axes.get("tp", 1), dp=axes.get("dp", 1), ep=axes.get("ep", 1),
                       etp=axes.get("etp"), pp=axes.get("pp", 1))  # fmt: skip
    except ValueError as err:
        raise bad(f"the {role} pool's layout cannot be: {err}", offset, len(half)) from None
    return Pool(count=count, parallel=par)
