"""A spec's expressions: the scope parameters and definitions live in (late binding),
arithmetic and the built-in functions with magnitudes bounded, and an argument bound and
coerced to what its layer statement declares.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from enum import StrEnum

import modelcost.language.spec as ir
import modelcost.language.syntax as s
from modelcost.base.dtypes import dtype_names, lookup_dtype
from modelcost.base.errors import SpecError, did_you_mean
from modelcost.base.record import Record

from .loader import LoadedFile, Source
from .recipes import RecipeName
from .vocabulary import ArgSpec, ArgType

# Bounds that keep any spec, however hostile, cheap to compile.
MAX_ABS_INT = 2**63 - 1


MAX_DIM = 2**40


MAX_DEPTH = 64


MAX_EXPONENT = 256


FUNCTIONS = ("min", "max", "ceil", "floor")


class Symbol(Record, frozen=True):
    """A bare name that denotes a constant of the language: a dtype or an activation."""

    name: str

    def __str__(self) -> str:
        return self.name


Value = bool | int | float | str | Symbol


# Arguments whose values are bare names of an enumeration: what each is called, its names
ENUM_ARGS: dict[ArgType, tuple[str, type[StrEnum]]] = {
    ArgType.ACT: ("activation", ir.Activation),
    ArgType.ROUTER: ("router function", ir.Router),
    ArgType.RECIPE: ("precision recipe", RecipeName),
    ArgType.KERNEL: ("attention kernel", ir.AttentionKernel),
}


SYMBOLS = frozenset(dtype_names()).union(
    *({m.value for m in enum} for _, enum in ENUM_ARGS.values())
)


class Def(Record, frozen=True):
    expr: s.Expr
    unit: LoadedFile


class Scope:
    """Names visible at a point: pre-bound values, then lazy definitions, then the parent.

    Definitions are evaluated on first use, in the scope that holds them (late binding:
    a child model's override changes every parent expression that uses the name).
    """

    def __init__(
        self,
        defs: dict[str, Def],
        parent: Scope | None = None,
        values: dict[str, Value] | None = None,
    ) -> None:
        self.defs = defs
        self.parent = parent
        self.values: dict[str, Value] = dict(values or {})
        self.used: set[str] = set()
        self._busy: list[str] = []

    def defines(self, name: str) -> bool:
        return name in self.values or name in self.defs

    def visible(self) -> Iterator[str]:
        scope: Scope | None = self
        while scope is not None:
            yield from scope.values
            yield from scope.defs
            scope = scope.parent

    def get(self, name: str, src: Source, pos: s.Pos) -> Value | None:
        """The value of `name`, or None when no scope in the chain defines it."""
        scope: Scope | None = self
        while scope is not None:
            if scope.defines(name):
                return scope._value(name, src, pos)
            scope = scope.parent
        return None

    def _value(self, name: str, src: Source, pos: s.Pos) -> Value:
        self.used.add(name)
        if name in self.values:
            return self.values[name]
        if name in self._busy:
            cycle = " → ".join([*self._busy[self._busy.index(name) :], name])
            raise src.error(f"parameter cycle: {cycle}", pos, "a parameter cannot depend on itself")
        if len(self._busy) > MAX_DEPTH:
            raise src.error("parameters depend on each other too deeply", pos)
        d = self.defs[name]
        self._busy.append(name)
        try:
            value = evaluate(d.expr, self, d.unit.src)
        finally:
            self._busy.pop()
        self.values[name] = value
        return value

    def lookup(self, name: str, src: Source, pos: s.Pos) -> Value:
        value = self.get(name, src, pos)
        if value is not None:
            return value
        if name in SYMBOLS:
            return Symbol(name)
        hint = did_you_mean(name, [*self.visible(), *SYMBOLS])
        raise src.error(f"unknown name `{name}`", pos, hint)


def _check_magnitude(value: int | float, src: Source, pos: s.Pos) -> int | float:
    if isinstance(value, int) and abs(value) > MAX_ABS_INT:
        raise src.error("value is too large", pos, f"values are bounded by {MAX_ABS_INT:,}")
    if isinstance(value, float) and not math.isfinite(value):
        raise src.error("value is not a finite number", pos)
    return value


def _number(value: Value, src: Source, pos: s.Pos, context: str) -> int | float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        shown = _show(value)
        raise src.error(f"{context} needs a number, got {shown}", pos)
    return value


def _show(value: Value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, float):
        return f"{value:.6g}"
    return f"`{value}`" if isinstance(value, Symbol) else str(value)


def _arith(op: str, a: int | float, b: int | float, src: Source, pos: s.Pos) -> int | float:
    if op in ("/", "//", "%") and b == 0:
        raise src.error("division by zero", pos)
    match op:
        case "+":
            return a + b
        case "-":
            return a - b
        case "*":
            return a * b
        case "/":
            if isinstance(a, int) and isinstance(b, int) and a % b == 0:
                return a // b
            return a / b
        case "//":
            return a // b
        case "%":
            return a % b
    # "**"
    if isinstance(a, int) and isinstance(b, int) and b >= 0:
        if b > MAX_EXPONENT and abs(a) > 1:
            raise src.error(
                f"exponent {b} is too large", pos, f"exponents are bounded by {MAX_EXPONENT}"
            )
        return a**b
    if a == 0 and b < 0:
        raise src.error("division by zero", pos, "0 raised to a negative power")
    try:
        return math.pow(a, b)
    except OverflowError:
        raise src.error("value is too large", pos) from None
    except ValueError:
        raise src.error("a negative number to a fractional power is not real", pos) from None


def evaluate(expr: s.Expr, scope: Scope, src: Source) -> Value:
    """The value of an expression in a scope."""
    match expr:
        case s.Number(value=value):
            return _check_magnitude(value, src, expr.pos)
        case s.String(value=value) | s.Bool(value=value):
            return value
        case s.Name(id=name):
            return scope.lookup(name, src, expr.pos)
        case s.Unary(op=op, operand=operand):
            v = _number(evaluate(operand, scope, src), src, operand.pos, f"unary `{op}`")
            return -v if op == "-" else v
        case s.BinOp(op=op, left=left, right=right):
            a = _number(evaluate(left, scope, src), src, left.pos, f"`{op}`")
            b = _number(evaluate(right, scope, src), src, right.pos, f"`{op}`")
            return _check_magnitude(_arith(op, a, b, src, expr.pos), src, expr.pos)
        case s.FuncCall(name=name, args=args):
            return _call(name, args, scope, src, expr.pos)
    raise AssertionError(f"unhandled expression {expr!r}")  # pragma: no cover


def _call(name: str, args: tuple[s.Expr, ...], scope: Scope, src: Source, pos: s.Pos) -> Value:
    if name not in FUNCTIONS:
        raise src.error(f"unknown function `{name}`", pos, did_you_mean(name, FUNCTIONS))
    values = [_number(evaluate(a, scope, src), src, a.pos, f"`{name}`") for a in args]
    if name in ("min", "max"):
        if not values:
            raise src.error(f"`{name}` needs at least one argument", pos)
        return min(values) if name == "min" else max(values)
    if len(values) != 1:
        raise src.error(f"`{name}` takes exactly one argument, got {len(values)}", pos)
    return math.ceil(values[0]) if name == "ceil" else math.floor(values[0])


class Bound(Record, frozen=True):
    value: Value
    pos: s.Pos
    src: Source
    origin: str | None = None  # the scope name a defaulted value came from


def _bind(
    call: s.OpCall,
    accepted: list[str],
    positional: list[str],
    what: str,
    scope: Scope,
    src: Source,
    kinds: dict[str, ArgType] | None = None,
) -> dict[str, Bound]:
    """Evaluate a call's arguments in `scope` and match them to parameter names."""
    bound: dict[str, Bound] = {}
    seen_keyword = False
    for i, arg in enumerate(call.args):
        if arg.name is None:
            if seen_keyword:
                raise src.error(
                    "positional argument after a keyword argument",
                    arg.pos,
                    "put positional arguments first",
                )
            if i >= len(positional):
                raise src.error(
                    f"too many arguments: {what} takes at most {len(positional)} positionally",
                    arg.pos,
                    f"its parameters are: {', '.join(positional)}",
                )
            name = positional[i]
        else:
            seen_keyword = True
            name = arg.name
            if name not in accepted:
                hint = did_you_mean(name, accepted) or f"it accepts: {', '.join(accepted)}"
                raise src.error(f"{what} has no argument `{name}`", arg.pos, hint)
        if name in bound:
            raise src.error(f"argument `{name}` given twice", arg.pos)
        kind = kinds.get(name) if kinds else None
        bound[name] = Bound(_evaluate_arg(arg.value, scope, src, kind), arg.value.pos, src)
    return bound


def _evaluate_arg(expr: s.Expr, scope: Scope, src: Source, kind: ArgType | None) -> Value:
    """Evaluate an argument; a misspelt dtype or activation gets a message of its own;
    a stream is named by a bare word (`source = encoder`) or a string."""
    bare = isinstance(expr, s.Name) and scope.get(expr.id, src, expr.pos) is None
    if kind is ArgType.STREAM and bare:
        return expr.id  # type: ignore[union-attr]
    if (
        (kind is ArgType.DTYPE or kind in ENUM_ARGS)
        and isinstance(expr, s.Name)
        and expr.id not in SYMBOLS
        and scope.get(expr.id, src, expr.pos) is None
    ):
        if kind is ArgType.DTYPE:
            what, choices = "dtype", dtype_names()
        else:
            what, enum = ENUM_ARGS[kind]
            choices = [m.value for m in enum]
        hint = did_you_mean(expr.id, choices) or f"{what}s: {', '.join(choices)}"
        raise src.error(f"unknown {what} `{expr.id}`", expr.pos, hint)
    return evaluate(expr, scope, src)


def _coerce(spec: ArgSpec, b: Bound, what: str) -> object:
    value, t = b.value, spec.type
    where = f"`{spec.name}` of {what}" + (f" (from `{b.origin}`)" if b.origin else "")

    def fail(message: str, hint: str | None = None) -> SpecError:
        return b.src.error(f"{where} must be {t.value}, {message}", b.pos, hint)

    if t is ArgType.BOOL:
        if not isinstance(value, bool):
            raise fail(f"got {_show(value)}")
        return value
    if t is ArgType.DTYPE:
        dt = lookup_dtype(value.name) if isinstance(value, Symbol) else None
        if dt is None:
            hint = did_you_mean(str(value), dtype_names()) if isinstance(value, Symbol) else None
            raise fail(f"got {_show(value)}", hint or f"dtypes: {', '.join(dtype_names())}")
        return dt
    if t is ArgType.STREAM:
        if not isinstance(value, str):
            raise fail(f"got {_show(value)}", "name a stream declared above: source = encoder")
        return value
    if t in ENUM_ARGS:
        what, enum = ENUM_ARGS[t]
        names = [m.value for m in enum]
        if not (isinstance(value, Symbol) and value.name in names):
            raise fail(f"got {_show(value)}", f"{what}s: {', '.join(names)}")
        return enum(value.name)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise fail(f"got {_show(value)}")
    if t is ArgType.NUMBER:
        if value < 0:
            raise fail(f"got {_show(value)}")
        return float(value)
    if isinstance(value, float):
        if not value.is_integer():
            raise fail(f"got {_show(value)}", "dimensions and counts are whole numbers")
        value = int(value)
    if t is ArgType.DIM and value <= 0:
        raise fail(f"got {value}")
    if t is ArgType.COUNT and value < 0:
        raise fail(f"got {value}")
    if value > MAX_DIM:
        raise fail(f"got {value:,}", f"sizes are bounded by {MAX_DIM:,}")
    return value
