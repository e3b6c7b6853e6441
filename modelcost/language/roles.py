"""The dtype each role (weights, activations, KV cache) and the precision recipe take: from
the innermost scope that sets them, the most specific name first, else the defaults.
"""

from __future__ import annotations

import modelcost.language.syntax as s
from modelcost.base.dtypes import DType, dtype_names, lookup_dtype
from modelcost.base.errors import did_you_mean

from .expressions import Scope, Symbol, _show
from .loader import Source
from .recipes import RECIPES

ROLE_CHAIN = {  # role -> the names that set it, most specific first
    "weights": ("weight_dtype", "dtype"),
    "activations": ("act_dtype", "dtype"),
    "kv_cache": ("kv_dtype", "act_dtype", "dtype"),
}


DEFAULT_DTYPE = DType.bf16


def role_recipe(scope: Scope, src: Source) -> str:
    """The precision recipe from the innermost scope that sets `recipe` (else none)."""
    current: Scope | None = scope
    while current is not None:
        if current.defines("recipe"):
            value = current._value("recipe", src, s.NOWHERE)
            if isinstance(value, Symbol) and value.name in RECIPES:
                return value.name
            d = current.defs.get("recipe")
            raise (d.unit.src if d else src).error(
                f"`recipe` must be a precision recipe, got {_show(value)}",
                d.expr.pos if d else s.NOWHERE,
                did_you_mean(str(value), RECIPES) or f"recipes: {', '.join(RECIPES)}",
            )
        current = current.parent
    return "none"


def role_dtype(scope: Scope, role: str, src: Source) -> DType:
    """The dtype for a role, from the innermost scope that sets it (or `dtype`)."""
    names = ROLE_CHAIN[role]
    current: Scope | None = scope
    while current is not None:
        for name in names:
            if current.defines(name):
                value = current._value(name, src, s.NOWHERE)
                d = current.defs.get(name)
                pos = d.expr.pos if d else s.NOWHERE
                where = d.unit.src if d else src
                dt = lookup_dtype(value.name) if isinstance(value, Symbol) else None
                if dt is None:
                    raise where.error(
                        f"`{name}` must be a dtype, got {_show(value)}",
                        pos,
                        did_you_mean(str(value), dtype_names())
                        or f"dtypes: {', '.join(dtype_names())}",
                    )
                return dt
        current = current.parent
    return DEFAULT_DTYPE
