"""modelcost: compile declarative model-architecture specs into analytical cost reports.

Public API: `load_spec`, `load_specs`, `parse_spec`, `SpecError`, the `Spec` IR,
`count_params`; and for reports `load_hardware`, `Workload`, `Phase`, `Parallel` (a
device layout), `compile_report`, `render` (a report as text, md, html or json), `sweep`
(rows over lists of values), `serve`, `search` and `serve_mix` (serving figures, with
an `Engine`'s scheduling and a `Speculation`: speculative decoding), `simulate`
(requests arriving over time), `search_training` (the training layouts of N devices).
"""

from .base import hooks
from .base.errors import SpecError
from .base.version import __version__ as __version__

# Everything else is imported on first use (`modelcost --help` needs neither pydantic nor
# lark).
_LAZY = {
    "ParamCount": ("lowering.params", "ParamCount"),
    "count_params": ("roofline.compile", "count_params"),
    "load_spec": ("language.resolve", "load_spec"),
    "load_specs": ("language.resolve", "load_specs"),
    "parse_spec": ("language.resolve", "parse_spec"),
    "Spec": ("language.spec", "Spec"),
    "compile_report": ("roofline.compile", "compile_report"),
    "load_hardware": ("targets.hardware", "load_hardware"),
    "Workload": ("ir.graph", "Workload"),
    "Phase": ("ir.graph", "Phase"),
    "Report": ("ir.report", "Report"),
    "Parallel": ("ir.graph", "Parallel"),
    "sweep": ("analyses.sweeps", "sweep"),
    "Sweep": ("analyses.sweeps", "Sweep"),
    "serve": ("analyses.serving", "serve"),
    "search": ("analyses.serving_search", "search"),
    "serve_mix": ("analyses.serving_mix", "serve_mix"),
    "Engine": ("analyses.serving_records", "Engine"),
    "Speculation": ("analyses.speculative", "Speculation"),
    "simulate": ("analyses.arrivals", "simulate"),
    "serve_disagg": ("analyses.disagg", "serve_disagg"),
    "search_disagg": ("analyses.disagg", "search_disagg"),
    "parse_pools": ("analyses.pools", "parse_pools"),
    "search_deployment": ("analyses.deployment", "search_deployment"),
    "search_training": ("analyses.training", "search_training"),
}


def __getattr__(name: str):
    if name == "render":  # the package modelcost.render, callable as render(report, fmt)
        import importlib

        return importlib.import_module(".render", __name__)
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(f".{module}", __name__), attr)
    raise AttributeError(f"module 'modelcost' has no attribute {name!r}")


# What the lower layers hand up (hooks.py), filled here, at the top, which every import
# of modelcost runs first: a domain object's notebook display is the render layer's,
# and a config.json read where a `.model` file may be (`load_spec("config.json")`,
# `import "config.json"`) goes through the importer front end.
def _show(obj: object, fmt: str) -> str:
    from .render.notebook import show

    return show(obj, fmt)


def _import_config(text: str, filename: str) -> str:
    from .importers import import_config

    return import_config(text, filename)


hooks.set_display(_show)
hooks.add_translator(".json", _import_config)


__all__ = [
    "Engine",
    "Parallel",
    "ParamCount",
    "Phase",
    "Report",
    "Spec",
    "SpecError",
    "Speculation",
    "Sweep",
    "Workload",
    "compile_report",
    "count_params",
    "load_hardware",
    "load_spec",
    "load_specs",
    "parse_pools",
    "parse_spec",
    "render",
    "search",
    "search_deployment",
    "search_disagg",
    "search_training",
    "serve",
    "serve_disagg",
    "serve_mix",
    "simulate",
    "sweep",
]
