"""How domain objects show themselves in a notebook: a report, a sweep, a serving
answer (aggregated, disaggregated or the two compared), an arrival run or a curve as its HTML
(or Markdown) page. The domain never imports render: its `_repr_html_` asks
hooks.shown, which the package's top points here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from modelcost.analyses.arrivals import Arrivals
from modelcost.analyses.curve import Curves
from modelcost.analyses.deployment import Deployment
from modelcost.analyses.disagg import Disaggregated, DisaggSearch
from modelcost.analyses.serving_mix import MixServing
from modelcost.analyses.serving_records import Serving
from modelcost.analyses.serving_search import Search
from modelcost.analyses.sweeps import Sweep
from modelcost.ir.report import Report


def _renderers() -> tuple[tuple[type, Callable[[Any, str], str]], ...]:
    from . import render
    from .curve_format import render_curves
    from .disagg_format import render_deployment, render_disagg, render_disagg_search
    from .serving_format import render_arrivals, render_mix, render_search, render_serving
    from .sweep_format import render_sweep

    return ((Report, render), (Sweep, render_sweep), (Serving, render_serving),
            (Search, render_search), (MixServing, render_mix), (Arrivals, render_arrivals),
            (Disaggregated, render_disagg), (DisaggSearch, render_disagg_search),
            (Deployment, render_deployment), (Curves, render_curves))  # fmt: skip


def show(obj: object, fmt: str) -> str:
    """`obj` as `fmt` (`html` or `md`), by the renderer of its kind."""
    for kind, draw in _renderers():
        if isinstance(obj, kind):
            return draw(obj, fmt)
    raise TypeError(f"no notebook display for {type(obj).__name__}")
