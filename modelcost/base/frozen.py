"""The one base of every pydantic model modelcost defines: frozen (values, not objects
that change), no unknown fields, validators built on first use (building them all up
front costs more than compiling a spec), and `trusted` construction for the values
modelcost computes itself."""

from __future__ import annotations

from typing import Any, Self

from pydantic import BaseModel, ConfigDict
from pydantic_core import PydanticUndefined

_new = object.__new__
_set = object.__setattr__


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    @classmethod
    def trusted(cls, **values: Any) -> Self:
        """An instance from values modelcost computed itself, without validation.

        Validation is for input from outside (a `.model` file, a JSON report read back);
        the report's own numbers are typed by the code that builds them (mypy checks it)
        and validating them again cost ~20 µs an op. Callers pass every field in its
        field type (tuples for tuple fields); the defaults fill in the rest. That a
        trusted report equals its validated JSON read back is tested for every shipped
        spec, target and phase (tests/test_compile.py).
        """
        layout, names, required = _LAYOUT.get(cls) or _layout(cls)
        given = set(values)
        # in field order: the JSON serializer writes the fields in the dict's order
        if tuple(values) != names:  # not every field, in order: check and complete
            keys = values.keys()
            if not (required <= keys <= layout.keys()):  # a programming error
                raise TypeError(
                    f"{cls.__name__}: unknown {sorted(keys - layout.keys())}, "
                    f"missing {sorted(required - keys)}"
                )
            values = {k: values.get(k, d) for k, d in layout.items()}
        obj = _new(cls)
        _set(obj, "__dict__", values)
        _set(obj, "__pydantic_fields_set__", given)
        _set(obj, "__pydantic_extra__", None)
        _set(obj, "__pydantic_private__", None)
        return obj


Layout = tuple[dict[str, Any], tuple[str, ...], frozenset[str]]
_LAYOUT: dict[type[Frozen], Layout] = {}


def _layout(cls: type[Frozen]) -> Layout:
    """Each field of `cls` in order with its default, their names, and the fields
    without a default."""
    defaults = {name: f.default for name, f in cls.model_fields.items()}
    required = frozenset(k for k, d in defaults.items() if d is PydanticUndefined)
    layout = _LAYOUT[cls] = defaults, tuple(defaults), required
    return layout
