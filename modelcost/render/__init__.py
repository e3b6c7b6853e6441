"""Stage 6, render: report models → text. One small module per format; they format,
they never compute. `FORMATS` is the one registry of output formats (the CLI's
`--format` choices come from it); `render` is the public entry point."""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Sequence
from typing import TYPE_CHECKING

from modelcost.base.bulk import in_bulk

if TYPE_CHECKING:
    from modelcost.analyses.diff import DiffReport, Verdict
    from modelcost.ir.report import Report

# format name → (module, report renderer), imported on first use so the CLI loads one
FORMATS: dict[str, tuple[str, str]] = {
    "text": ("text", "render_text"),
    "md": ("formats", "render_markdown"),
    "html": ("formats", "render_html"),
    "json": ("json_format", "render_json"),
}
# a diff's formats: a report's, and `gfm`, a short pull-request summary with the verdict
DIFF_FORMATS = ("text", "md", "gfm", "html", "json")
SWEEP_FORMATS = ("csv", "jsonl", "parquet", "json", "md", "html")  # render/sweep_format.py
STREAMED_FORMATS = ("csv", "jsonl", "parquet")  # written row by row (render/sweep_stream.py)


@in_bulk
def render(reports: Report | Sequence[Report], fmt: str = "md") -> str:
    """One report, or several (one per phase of one model on one target, side by side),
    as `text`, `md`, `html` or `json`."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")
    from modelcost.ir.report import Report

    items = [reports] if not isinstance(reports, Sequence) else list(reports)
    if not items:
        raise ValueError("render needs at least one report (compile_report's)")
    odd = next((x for x in items if not isinstance(x, Report)), None)
    if odd is not None:
        raise TypeError(f"render takes reports (compile_report's), got {type(odd).__name__}")
    module, name = FORMATS[fmt]
    fn = getattr(importlib.import_module(f".{module}", __name__), name)
    return fn(items)


class _CallableModule(types.ModuleType):
    """`modelcost.render` is this package and the function at once: importing any
    renderer binds the package to the name, so the package itself is made callable."""

    def __call__(self, reports: Report | Sequence[Report], fmt: str = "md") -> str:
        return render(reports, fmt)


def render_diff(
    d: DiffReport,
    fmt: str = "md",
    verdict: Verdict | None = None,
    sides: tuple[list[Report], list[Report]] | None = None,
) -> str:
    """A diff in any of DIFF_FORMATS; `verdict` (diff.gate) is the one `gfm` and `text`
    state (none: no gate); with the `sides`' reports, HTML shows their rooflines."""
    if fmt not in DIFF_FORMATS:
        raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(DIFF_FORMATS)}")
    from .formats import render_diff as render_one

    return render_one(d, fmt, verdict, sides=sides)


sys.modules[__name__].__class__ = _CallableModule
