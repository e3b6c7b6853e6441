"""Serving a mix of request classes (`serve_mix`): each class's figures at a shared
concurrency, and a mix read from a file."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import TYPE_CHECKING

import modelcost.language.spec as ir
from modelcost.base.errors import SpecError
from modelcost.base.files import read_text
from modelcost.base.frozen import Frozen
from modelcost.base.hooks import shown
from modelcost.base.record import Record
from modelcost.base.settings import (
    DEFAULT_SERVE_ESTIMATE,
    MAX_MIX_CLASSES,
    SHARES,
    EstimateMode,
    count,
)
from modelcost.base.tabular import Tabular
from modelcost.ir.graph import ONE_DEVICE, Parallel
from modelcost.roofline.compile import as_hardware, as_spec
from modelcost.targets.hardware import Hardware

from .serving import serve
from .serving_records import STATIC, Engine, Serving
from .speculative import Speculation

if TYPE_CHECKING:
    from modelcost.estimate.calibration import Calibration


class RequestClass(Record, frozen=True):
    isl: int
    osl: int
    share: float  # of the requests


class MixServing(Tabular, Frozen):
    """Each request class served on its own, and the mix: the classes taking turns on
    the devices in proportion to their share of requests, so output tokens/s of the mix
    = Σ shareᵢ·oslᵢ / Σ shareᵢ·oslᵢ/rateᵢ."""

    classes: tuple[Serving, ...]
    shares: tuple[float, ...]
    output_tokens_per_s: float
    output_tokens_per_s_device: float
    estimate: EstimateMode  # how the classes' headline figures read step times
    bound_output_tokens_per_s: float  # the mix at the classes' roofline rates
    bound_output_tokens_per_s_device: float
    meets_targets: bool

    def records(self) -> list[dict]:
        return [{"share": w} | s.row() for w, s in zip(self.shares, self.classes, strict=True)]

    def _repr_html_(self) -> str:
        return shown(self, "html")


def serve_mix(
    spec: ir.Spec | str | Path,
    hw: Hardware | str | Path,
    mix: list[RequestClass],
    parallel: Parallel = ONE_DEVICE,
    tpot: float | None = None,
    ttft: float | None = None,
    engine: Engine = STATIC,
    estimate: EstimateMode = DEFAULT_SERVE_ESTIMATE,
    calibration: Calibration | None = None,
    speculation: Speculation | None = None,
    moe_imbalance: float | None = None,
) -> MixServing:
    """Each class of `mix` served on its own, and the mix (MixServing): at most
    MAX_MIX_CLASSES classes, each share from SHARES[0] to SHARES[1] (SpecError)."""
    _check_mix(mix)
    spec, hw = as_spec(spec), as_hardware(hw)
    total = sum(c.share for c in mix)  # at most MAX_MIX_CLASSES × SHARES[1]: finite
    shares = tuple(c.share / total for c in mix)  # each ≥ SHARES[0] / that: above zero
    classes = tuple(serve(spec, hw, c.isl, c.osl, parallel, None, tpot, ttft, engine,
                          estimate, calibration, speculation, moe_imbalance)
                    for c in mix)  # fmt: skip
    rate = _mix_rate(shares, [s.output_tokens_per_s for s in classes], classes)
    bound = _mix_rate(shares, [s.bound.output_tokens_per_s for s in classes], classes)
    return MixServing.trusted(
        classes=classes,
        shares=shares,
        output_tokens_per_s=rate,
        output_tokens_per_s_device=rate / parallel.devices,
        estimate=classes[0].estimate,
        bound_output_tokens_per_s=bound,
        bound_output_tokens_per_s_device=bound / parallel.devices,
        meets_targets=all(s.meets_targets for s in classes),
    )


def _mix_rate(shares: tuple[float, ...], rates: list[float], classes) -> float:
    """Output tokens/s of classes taking turns by share: Σ wᵢ·oslᵢ / Σ wᵢ·oslᵢ/rateᵢ."""
    tokens = sum(w * s.osl for w, s in zip(shares, classes, strict=True))
    return tokens / sum(w * s.osl / r for w, s, r in zip(shares, classes, rates, strict=True))


def _check_mix(mix: list[RequestClass]) -> None:
    """The limits a mix file is held to, for a mix built in Python."""
    where = "the request mix"
    if not mix:
        raise SpecError("a request mix needs at least one request class", filename=where)
    if len(mix) > MAX_MIX_CLASSES:
        raise SpecError(f"{len(mix):,} request classes: {_too_many()}", filename=where,
                        hint=MERGE_CLASSES)  # fmt: skip
    for i, c in enumerate(mix):
        if not SHARES[0] <= c.share <= SHARES[1]:
            raise SpecError(f"class {i} (ISL {c.isl}, OSL {c.osl}): {_share_message(c.share)}",
                            filename=where)  # fmt: skip


def _share_message(got: object) -> str:
    return f"SHARE must be a positive number from {SHARES[0]:g} to {SHARES[1]:g}, got {got!r}"


def _too_many() -> str:
    return f"a mix takes at most {MAX_MIX_CLASSES:,} (each is a serving search of its own)"


MERGE_CLASSES = "merge classes of similar lengths, adding their shares"


def load_mix(path: str | Path) -> list[RequestClass]:
    """A mix file: one request class a line, `ISL OSL [SHARE]` (counts take K/M; the
    share defaults to 1 and is normalized over the file); `#` starts a comment. At most
    MAX_MIX_CLASSES classes, each share from SHARES[0] to SHARES[1]."""
    name = str(path)
    out: list[RequestClass] = []
    for number, raw in enumerate(read_text(path).splitlines(), 1):
        c = _mix_line(name, number, raw)
        if c is None:
            continue
        if len(out) == MAX_MIX_CLASSES:  # refused where the limit is passed, unread beyond
            raise SpecError(f"request class {len(out) + 1:,}: {_too_many()}", filename=name,
                            line=number, column=1, source_line=raw, width=len(raw.rstrip()),
                            hint=MERGE_CLASSES)  # fmt: skip
        out.append(c)
    if not out:
        raise SpecError(f"{name} names no request class", filename=name,
                        hint="one `ISL OSL [SHARE]` a line")  # fmt: skip
    return out


def _mix_line(name: str, number: int, raw: str) -> RequestClass | None:
    line = raw.split("#", 1)[0]
    found = list(re.finditer(r"\S+", line))
    fields = [m.group() for m in found]
    if not fields:
        return None

    def bad(message: str, index: int, hint: str) -> SpecError:
        column = found[index].start() + 1 if index < len(found) else len(line) + 1
        width = len(fields[index]) if index < len(fields) else 1
        return SpecError(message, filename=name, line=number, column=column, hint=hint,
                         source_line=raw, width=width)  # fmt: skip

    if len(fields) not in (2, 3):
        raise bad(f"expected ISL OSL [SHARE], got {len(fields)} fields",
                  min(len(fields) - 1, 3), "e.g. `2048 128 0.5`")  # fmt: skip
    values = []
    for i, what in enumerate(("ISL", "OSL")):
        try:
            values.append(count(fields[i]))
        except ValueError:
            hint = "a whole number of tokens, K/M suffixes allowed"
            raise bad(f"{what} must be a positive count, got {fields[i]!r}", i, hint) from None
    share = 1.0
    if len(fields) == 3:
        try:
            share = float(fields[2])
        except ValueError:
            share = math.nan
        if not SHARES[0] <= share <= SHARES[1]:  # NaN, inf, 1e308 and 0 too
            raise bad(_share_message(fields[2]), 2, "a weight such as 0.25 or 3")
    return RequestClass(values[0], values[1], share)
