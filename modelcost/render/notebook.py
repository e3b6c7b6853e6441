"""How domain objects show themselves in a notebook: a report, a sweep, a serving
answer or an arrival run as its HTML (or Markdown) page. The domain never imports
render: its `_repr_html_` asks hooks.shown, which the package's top points here."""

from __future__ import annotations

from ..arrivals import Arrivals
from ..report import Report
from ..serving import MixServing, Search, Serving
from ..sweeps import Sweep


def show(obj: object, fmt: str) -> str:
    """`obj` as `fmt` (`html` or `md`), by the renderer of its kind."""
    if isinstance(obj, Report):
        from . import render

        return render(obj, fmt)
    if isinstance(obj, Sweep):
        from .sweep_format import render_sweep

        return render_sweep(obj, fmt)
    from .serving_format import render_arrivals, render_mix, render_search, render_serving

    if isinstance(obj, Serving):
        return render_serving(obj, fmt)
    if isinstance(obj, Search):
        return render_search(obj, fmt)
    if isinstance(obj, MixServing):
        return render_mix(obj, fmt)
    if isinstance(obj, Arrivals):
        return render_arrivals(obj, fmt)
    raise TypeError(f"no notebook display for {type(obj).__name__}")
