"""How layer statements bind to the Spec IR: argument kinds, defaults and checks.

A layer kind is declared once, as its Spec IR class (spec.py): each field that a
statement may set carries an `Arg` (its kind and default) in its annotation, and the
class says its statement name (the `kind` literal), whether it takes a `kv_dtype`, and
its check. `signatures(OP_TYPES)` reads those declarations into the table the resolver
binds calls such as `attention(64, kv_heads = 8)` against. Checks only look at bound values
and name the argument to blame, so the resolver can point at it.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from functools import cache

from modelcost.base.frozen import Frozen
from modelcost.base.record import Record


class ArgType(Enum):
    DIM = "a positive integer"
    COUNT = "a non-negative integer"
    BOOL = "true or false"
    NUMBER = "a non-negative number"
    DTYPE = "a dtype"
    ACT = "an activation"
    ROUTER = "a router function"
    RECIPE = "a precision recipe"
    KERNEL = "an attention kernel"
    STREAM = "a stream's name (a string)"


class Ref(Record, frozen=True):
    """A default taken from the scope the op is called in (e.g. `dim` ← `d_model`)."""

    name: str


class Derived(Record, frozen=True):
    """A default computed from other bound arguments; `text` documents it."""

    text: str
    fn: Callable[[dict], object]


REQUIRED = object()


class Arg(Record, frozen=True):
    """Annotation metadata of an IR field a statement may set: its kind and default
    (REQUIRED, a value, a `Ref` to the calling scope or a `Derived` value)."""

    type: ArgType
    default: object = REQUIRED


class ArgSpec(Record, frozen=True):
    name: str
    type: ArgType
    default: object = REQUIRED


class CheckFailure(Exception):
    """Raised by a check: which argument is to blame, the message and a hint."""

    def __init__(self, arg: str, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.arg, self.message, self.hint = arg, message, hint


class OpSignature(Record, frozen=True):
    name: str
    ir_type: type[Frozen]  # the layer kind's IR class
    args: tuple[ArgSpec, ...]
    kv_cache: bool = False  # takes a kv_dtype override
    recipe: bool = False  # its linear layers follow a precision recipe (takes `recipe`)
    check: Callable[[dict], None] | None = None

    def arg(self, name: str) -> ArgSpec | None:
        return next((a for a in self.args if a.name == name), None)


DTYPE_ARGS = ("dtype", "weight_dtype", "act_dtype")


def _signature(cls: type) -> OpSignature:
    """A statement's signature from its IR class: the fields carrying an `Arg`, in
    declaration order, with `dim` (declared by the base class) last."""
    args = [
        ArgSpec(name, arg.type, arg.default)
        for name, info in cls.model_fields.items()  # type: ignore[attr-defined]
        for arg in info.metadata
        if isinstance(arg, Arg)
    ]
    args.sort(key=lambda a: a.name == "dim")  # stable: only moves `dim` to the end
    return OpSignature(
        name=cls.model_fields["kind"].default,  # type: ignore[attr-defined]
        ir_type=cls,
        args=tuple(args),
        kv_cache=getattr(cls, "takes_kv_dtype", False),
        recipe=getattr(cls, "quantized", False),
        check=getattr(cls, "check", None),
    )


@cache
def signatures(op_types: tuple[type[Frozen], ...]) -> dict[str, OpSignature]:
    """The statements of `op_types` (the Spec IR's layer kinds, spec.OP_TYPES) by name;
    the IR imports this module, so the kinds are given, never imported here."""
    return {sig.name: sig for sig in map(_signature, op_types)}


def argument_names(sig: OpSignature) -> list[str]:
    """Every keyword the statement accepts, dtype overrides included."""
    names = [a.name for a in sig.args] + list(DTYPE_ARGS)
    names += ["kv_dtype"] if sig.kv_cache else []
    return [*names, "recipe"] if sig.recipe else names
