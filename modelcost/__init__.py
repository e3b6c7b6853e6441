"""modelcost: compile declarative model-architecture specs into analytical cost reports.

Public API: `load_spec`, `parse_spec`, `SpecError`, and the `Spec` IR.
"""

from .errors import SpecError
from .params import ParamCount, count_params
from .resolve import load_spec, load_specs, parse_spec
from .spec import Spec

__all__ = [
    "ParamCount",
    "Spec",
    "SpecError",
    "count_params",
    "load_spec",
    "load_specs",
    "parse_spec",
]
__version__ = "0.1.0"
