"""Stage 2, resolve: AST → Spec IR.

Loads imports (relative to the importing file), follows `extends`, evaluates parameters
and expressions with late binding, expands blocks and repeats, fills dtype defaults per
role, binds layer statements to the built-in vocabulary, and checks everything a spec
can get wrong. Every failure is a SpecError pointing at the culprit.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path

from msgspec import Struct, field

import modelcost.language.spec as ir
import modelcost.language.syntax as s
from modelcost.base.bulk import in_bulk
from modelcost.base.dtypes import DType, dtype_names, lookup_dtype
from modelcost.base.errors import SpecError, did_you_mean
from modelcost.base.files import read_text
from modelcost.base.hooks import translator
from modelcost.base.record import Record
from modelcost.base.resources import shipped_model, shipped_models, specs_dir

from .parse import parse
from .recipes import RECIPES, RecipeName
from .spec import walk
from .vocabulary import (
    REQUIRED,
    ArgSpec,
    ArgType,
    CheckFailure,
    Derived,
    OpSignature,
    Ref,
    argument_names,
    signatures,
)

# Bounds that keep any spec, however hostile, cheap to compile.
MAX_ABS_INT = 2**63 - 1
MAX_DIM = 2**40
MAX_REPEAT = 100_000
MAX_MULTIPLICITY = 10_000_000
# layer statements after block expansion (a `repeat` is not expanded): resolving one
# costs ~25 µs, so the worst accepted model resolves in about half a second
MAX_OPS = 20_000
MAX_DEPTH = 64
MAX_IMPORT_DEPTH = 64  # files in one chain of imports (a file importing one importing one …)
MAX_EXPONENT = 256

FUNCTIONS = ("min", "max", "ceil", "floor")
METADATA = ("title",)
ROLE_CHAIN = {  # role -> the names that set it, most specific first
    "weights": ("weight_dtype", "dtype"),
    "activations": ("act_dtype", "dtype"),
    "kv_cache": ("kv_dtype", "act_dtype", "dtype"),
}
DEFAULT_DTYPE = DType.bf16


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


# ---------------------------------------------------------------- sources and units


class Source(Record, frozen=True):
    filename: str
    lines: tuple[str, ...]

    def error(self, message: str, pos: s.Pos, hint: str | None = None) -> SpecError:
        line_text = self.lines[pos.line - 1] if 0 < pos.line <= len(self.lines) else None
        return SpecError(
            message,
            filename=self.filename,
            line=pos.line,
            column=pos.column,
            hint=hint,
            source_line=line_text,
            width=pos.width,
        )


class LoadedFile(Struct, eq=False):
    """One parsed file and the definitions it can see (its own and its imports')."""

    path: Path | None
    src: Source
    module: s.Module
    models: dict[str, tuple[s.ModelDef, LoadedFile]] = field(default_factory=dict)
    blocks: dict[str, tuple[s.BlockDef, LoadedFile]] = field(default_factory=dict)
    local_models: list[str] = field(default_factory=list)


def _reason(err: SpecError) -> str:
    return err.message.removeprefix("cannot read file: ")


class Loader:
    """Parses files once each and links their imports, refusing cycles. Given a `root`
    (where specs come from pages: the MkDocs plugin, `modelcost site`), it reads no
    file outside it but the shipped specs, and names such a file without opening it."""

    def __init__(self, root: Path | None = None) -> None:
        self._cache: dict[Path, LoadedFile] = {}
        self._stack: list[Path] = []
        self._root = root.resolve() if root is not None else None

    def load_path(
        self, path: Path, src: Source | None = None, pos: s.Pos | None = None
    ) -> LoadedFile:
        try:
            resolved = path.resolve()
        except RuntimeError:  # a symlink loop (Python 3.11 raises RuntimeError)
            if src and pos:
                raise src.error(f"cannot read `{path}`: a symlink loop", pos) from None
            raise SpecError("cannot read file: a symlink loop", filename=str(path)) from None
        except (OSError, ValueError) as exc:  # e.g. a NUL byte in the path
            if src and pos:
                raise src.error(f"bad import path: {exc}", pos) from None
            raise SpecError(f"bad path: {exc}", filename=repr(str(path))) from None
        if self._root is not None and not within(resolved, self._root):
            err = f"`{path}` is outside the project's root, {self._root}"
            hint = ("specs a site builds read files inside its root only: move the file "
                    "there, or widen the root (the plugin's `root:`, site's --root)")  # fmt: skip
            if src and pos:
                raise src.error(err, pos, hint)
            raise SpecError(err, filename=str(path), hint=hint)
        if resolved in self._stack:
            cycle = " → ".join(p.name for p in [*self._stack[self._stack.index(resolved) :]])
            err = f"import cycle: {cycle} → {resolved.name}"
            if src and pos:
                raise src.error(err, pos, "a file cannot import itself, even indirectly")
            raise SpecError(err, filename=str(path))
        if resolved in self._cache:
            return self._cache[resolved]
        if len(self._stack) >= MAX_IMPORT_DEPTH and src and pos:
            hint = "import the files you need from one file instead of in a chain"
            raise src.error(f"imports nest more than {MAX_IMPORT_DEPTH} files deep", pos, hint)
        try:
            text = read_text(path)
        except SpecError as err:
            if src and pos and err.line == 0:  # unreadable: point at the import
                raise src.error(f"cannot read `{path}`: {_reason(err)}", pos) from None
            raise
        _check_kind(path, text)
        translate = translator(path.suffix)  # a Hugging Face config.json: import it first
        if translate is not None:
            text = translate(text, str(path))
        self._stack.append(resolved)
        try:
            unit = self.load_text(text, str(path), resolved)
        finally:
            self._stack.pop()
        self._cache[resolved] = unit
        return unit

    def load_text(self, text: str, filename: str, path: Path | None) -> LoadedFile:
        module = parse(text, filename)
        src = Source(filename, tuple(text.splitlines()))
        unit = LoadedFile(path, src, module)
        base = Path(filename).parent if path else Path()
        for item in module.items:
            if isinstance(item, s.Import):
                if not item.path:
                    raise src.error("empty import path", item.pos)
                target = Path(os.path.normpath(base / item.path))
                imported = self.load_path(_or_shipped(target, item.path), src, item.pos)
                for name, model in imported.models.items():
                    _define(unit.models, name, model, src, item.pos)
                for name, block in imported.blocks.items():
                    _define(unit.blocks, name, block, src, item.pos)
        for item in module.items:
            if isinstance(item, s.ModelDef | s.BlockDef):
                if item.name in unit.models or item.name in unit.blocks:
                    raise src.error(
                        f"`{item.name}` is already defined",
                        item.name_pos,
                        "model and block names share one namespace per file",
                    )
                if isinstance(item, s.ModelDef):
                    unit.models[item.name] = (item, unit)
                    unit.local_models.append(item.name)
                else:
                    unit.blocks[item.name] = (item, unit)
        return unit


def within(resolved: Path, root: Path) -> bool:
    """Whether the resolved path `resolved` lies inside `root` (resolved) or among the
    shipped specs, which any spec may import by name."""
    return resolved.is_relative_to(root) or resolved.is_relative_to(specs_dir().resolve())


def _check_kind(path: Path, text: str) -> None:
    """Refuse, saying what it is, a file that is not a spec: a hardware file (give it to
    --hw) or a rendered HTML page."""
    if path.suffix == ".hw" or text.lstrip().startswith("hardware "):
        raise SpecError("a hardware file, not a spec", filename=str(path),
                        hint=f"give it as --hw {path}")  # fmt: skip
    if text.lstrip()[:15].lower().startswith(("<!doctype", "<html")):
        raise SpecError("an HTML page (a rendered report?), not a spec", filename=str(path),
                        hint="specs are .model files; `modelcost diff` also compares two "
                        "reports saved with --format json")  # fmt: skip


def _or_shipped(path: Path, name: str | Path, given: bool = False) -> Path:
    """`path`, or where it names no file, the shipped model `name` means (a bare name:
    `llama3-70b`, `llama3-70b.model`), found from any folder and in an installed wheel.
    A bare name `given` on the command line that is neither is refused, with the
    nearest shipped name."""
    try:
        if path.exists():
            return path
    except (OSError, ValueError):  # a NUL byte, a name too long: load_path says so
        return path
    found = shipped_model(name)
    if found is not None:
        return found
    bare = str(name)
    if given and bare and "/" not in bare and not bare.endswith((".json", ".model")):
        hint = did_you_mean(bare, shipped_models()) or "`modelcost zoo` lists the shipped models"
        raise SpecError("cannot read file: no such file, nor a shipped model of that name",
                        filename=bare, hint=hint)  # fmt: skip
    return path


def _define(table: dict, name: str, entry: tuple, src: Source, pos: s.Pos) -> None:
    if name in table and table[name][0] is not entry[0]:
        raise src.error(f"import brings a second definition of `{name}`", pos)
    table[name] = entry


# ---------------------------------------------------------------- scopes and expressions


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


# ---------------------------------------------------------------- argument binding


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


# ---------------------------------------------------------------- the resolver


class _Resolver:
    def __init__(self, scope: Scope) -> None:
        self.model_scope = scope
        self.ops = 0
        self.blocks: list[str] = []
        self.multiplicity = 1
        self.width: int | None = None  # the stream's width here (set by an embedding)
        self.streams: dict[str, tuple[ir.Stream, s.Stream]] = {}
        self.in_stream = False
        self.tokens: int | None = None  # a stream's tokens per sequence here

    def body(self, stmts: tuple[s.Stmt, ...], scope: Scope, unit: LoadedFile, top: bool) -> list:
        nodes: list = []
        for stmt in stmts:
            match stmt:
                case s.Assign():
                    if not top:
                        where = "a `stream`" if self.in_stream else "`repeat`"
                        raise unit.src.error(
                            f"assignments are not allowed inside {where}",
                            stmt.pos,
                            "set parameters at the top of the model or block",
                        )
                case s.Repeat():
                    nodes.extend(self.repeat(stmt, scope, unit))
                case s.Stream():
                    if not top or self.blocks or self.in_stream:
                        raise unit.src.error(
                            f"stream `{stmt.name}` is inside another statement",
                            stmt.pos,
                            "declare streams at the top level of a model's body",
                        )
                    nodes.append(self.stream(stmt, scope, unit))
                case s.OpCall():
                    nodes.append(self.call(stmt, scope, unit))
        return nodes

    def repeat(self, stmt: s.Repeat, scope: Scope, unit: LoadedFile) -> list:
        src = unit.src
        count = evaluate(stmt.count, scope, src)
        if isinstance(count, float) and count.is_integer():
            count = int(count)
        if isinstance(count, bool) or not isinstance(count, int):
            raise src.error(
                f"repeat count must be a non-negative integer, got {_show(count)}", stmt.count.pos
            )
        if count < 0:
            raise src.error(f"repeat count must not be negative, got {count}", stmt.count.pos)
        if count > MAX_REPEAT:
            raise src.error(
                f"repeat count {count:,} is too large",
                stmt.count.pos,
                f"repeat counts are bounded by {MAX_REPEAT:,}",
            )
        outer = self.multiplicity
        self.multiplicity *= max(count, 1)
        if self.multiplicity > MAX_MULTIPLICITY:
            raise src.error(
                f"nested repeats multiply to more than {MAX_MULTIPLICITY:,} copies of one layer",
                stmt.count.pos,
            )
        width = self.width
        try:
            body = self.body(stmt.body, scope, unit, top=False)
        finally:
            self.multiplicity = outer
        if width is not None and self.width != width and count > 1:
            raise src.error(
                f"a repeated body must end as wide as it starts: {width} in, {self.width} out",
                stmt.pos,
                "a width change (linear) belongs outside `repeat`",
            )
        if count == 0 or not body:
            return []
        return [ir.Repeat.trusted(count=count, body=tuple(body))]

    STREAM_ARGS = (
        ArgSpec("length", ArgType.DIM, None),
        ArgSpec("joins", ArgType.COUNT, 0),
        ArgSpec("auxiliary", ArgType.BOOL, False),
    )

    def stream(self, stmt: s.Stream, scope: Scope, unit: LoadedFile) -> ir.Stream:
        """Another token stream: its arguments checked, its layers resolved with a width
        of their own, and what the main stream may read of it recorded."""
        src, what = unit.src, f"stream `{stmt.name}`"
        if stmt.name in self.streams:
            raise src.error(f"{what} is declared twice", stmt.pos, "give each stream its own name")
        names = [a.name for a in self.STREAM_ARGS]
        call = s.OpCall(stmt.name, stmt.args, True, stmt.pos)
        kinds = {a.name: a.type for a in self.STREAM_ARGS}
        bound = _bind(call, names, names[:2], what, scope, src, kinds)
        v = {a.name: _coerce(a, bound[a.name], what) if a.name in bound else a.default
             for a in self.STREAM_ARGS}  # fmt: skip
        length, joins, auxiliary = v["length"], int(v["joins"]), bool(v["auxiliary"])  # type: ignore[call-overload]
        length = None if length is None else int(length)  # type: ignore[call-overload]

        def at(name: str) -> s.Pos:
            return bound[name].pos if name in bound else stmt.pos

        if auxiliary and (length is not None or joins):
            raise src.error(
                f"{what} is auxiliary: it runs over the main sequence's tokens",
                at("length" if length is not None else "joins"),
                "drop length and joins (an auxiliary stream feeds no other)",
            )
        if not auxiliary and length is None:
            hint = f"stream {stmt.name}(length = tokens per sequence) {{ ... }}"
            raise src.error(f"{what} is missing its argument `length`", stmt.pos, hint)
        outer_width = self.width
        self.width, self.in_stream, self.tokens = outer_width if auxiliary else None, True, length
        try:
            body = self.body(stmt.body, scope, unit, top=False)
        finally:
            width, self.width, self.in_stream = self.width, outer_width, False
            tokens_out, self.tokens = self.tokens, None
        if joins > (tokens_out or 0):
            raise src.error(f"{what} joins {joins} tokens, more than the {tokens_out} it ends with",
                            at("joins"), "joins counts tokens of its own output")  # fmt: skip
        if not body:
            raise src.error(f"{what} has no layers", stmt.pos)
        node = ir.Stream.trusted(
            name=stmt.name,
            length=length or 0,
            joins=joins,
            auxiliary=auxiliary,
            width=width or 0,
            body=tuple(body),
        )
        patch = next((op for op, _ in walk(node.body) if isinstance(op, ir.PatchEmbed)), None)
        if patch is not None:
            tokens = patch.tokens
            if tokens != length:
                raise src.error(
                    f"{what} is {tokens} tokens long by its image "
                    f"(({patch.image}/{patch.patch})² patches"
                    + (" + 1 class token" if patch.cls_token else "")
                    + f"), not {length}",
                    at("length"),
                    f"length = {tokens}",
                )
        self.streams[stmt.name] = (node, stmt)
        return node

    def check_joins(self, body: list, src: Source) -> None:
        """A stream that joins the main sequence ends as wide as the main stream."""
        main = next((op.dim for op, _ in walk(tuple(body), streams=False)), None)
        for node, stmt in self.streams.values():
            if node.joins and main is not None and node.width != main:
                raise src.error(
                    f"stream `{node.name}` ends {node.width} wide, but the main stream it "
                    f"joins is {main} wide",
                    stmt.pos,
                    f"project it: end the stream with linear({main})",
                )
            if (
                not node.joins
                and not node.auxiliary
                and not any(
                    isinstance(op, ir.CrossAttention) and op.source == node.name
                    for op, _ in walk(tuple(body))
                )
            ):
                raise src.error(
                    f"stream `{node.name}` is never read: nothing cross-attends to it and "
                    "it joins no tokens",
                    stmt.pos,
                    f"cross_attention(heads, source = {node.name}), or joins = N",
                )

    def _source(self, values: dict, bound: dict, stmt: s.OpCall, src: Source) -> int:
        """The width of the stream a cross-attention reads (declared above it)."""
        name = values["source"]
        found = self.streams.get(name)
        b = bound.get("source")
        pos, where = (b.pos, b.src) if b else (stmt.pos, src)
        if found is None:
            hint = did_you_mean(name, list(self.streams)) or (
                f"streams declared above: {', '.join(self.streams)}"
                if self.streams
                else "declare `stream encoder(length = N) { ... }` first"
            )
            raise where.error(f"no stream `{name}` to cross-attend to", pos, hint)
        node = found[0]
        if node.joins or node.auxiliary:
            raise where.error(
                f"stream `{name}` joins the main sequence; cross-attention reads an encoder",
                pos,
                "an encoder stream has no `joins`",
            )
        return node.width

    def call(self, stmt: s.OpCall, scope: Scope, unit: LoadedFile):
        if stmt.name in unit.blocks:
            return self.expand_block(stmt, scope, unit)
        sigs = signatures(ir.OP_TYPES)
        if stmt.name in sigs:
            return self.op(sigs[stmt.name], stmt, scope, unit.src)
        hint = did_you_mean(stmt.name, [*sigs, *unit.blocks])
        if stmt.name in unit.models:
            hint = (
                "a model cannot be used as a layer: use `extends`, or move its layers into a block"
            )
        pos = s.Pos(stmt.pos.line, stmt.pos.column, stmt.pos.line, stmt.pos.column + len(stmt.name))
        raise unit.src.error(f"unknown layer `{stmt.name}`", pos, hint)

    def _count_op(self, src: Source, pos: s.Pos) -> None:
        self.ops += 1
        if self.ops > MAX_OPS:
            raise src.error(
                f"the model expands to more than {MAX_OPS:,} layer statements",
                pos,
                "use `repeat` for identical layers: it is not expanded",
            )

    def op(self, sig: OpSignature, stmt: s.OpCall, scope: Scope, src: Source):
        self._count_op(src, stmt.pos)
        what = f"`{sig.name}`"
        accepted = argument_names(sig)
        kinds = dict.fromkeys(accepted, ArgType.DTYPE) | {a.name: a.type for a in sig.args}
        if sig.recipe:
            kinds["recipe"] = ArgType.RECIPE
        bound = _bind(stmt, accepted, [a.name for a in sig.args], what, scope, src, kinds)
        values: dict[str, object] = {}
        # Derived defaults read other arguments, so they are filled in last.
        ordered = sorted(
            sig.args, key=lambda a: isinstance(a.default, Derived) and a.name not in bound
        )
        for spec in ordered:
            if spec.name in bound:
                values[spec.name] = _coerce(spec, bound[spec.name], what)
            elif spec.default is REQUIRED:
                raise src.error(
                    f"{what} is missing its argument `{spec.name}`",
                    stmt.pos,
                    f"{sig.name}({', '.join(a.name for a in sig.args if a.default is REQUIRED)})",
                )
            elif spec.name == "dim" and self.width is not None:
                values["dim"] = self.width  # a layer is as wide as the stream it reads
            elif isinstance(spec.default, Ref):
                found = scope.get(spec.default.name, src, stmt.pos)
                if found is None:
                    raise src.error(
                        f"{what} needs `{spec.name}`, and no `{spec.default.name}` is defined",
                        stmt.pos,
                        f"set `{spec.default.name} = ...` in the model, "
                        f"or pass `{spec.name} = ...`",
                    )
                origin = spec.default.name
                values[spec.name] = _coerce(spec, Bound(found, stmt.pos, src, origin), what)
            elif isinstance(spec.default, Derived):
                try:
                    values[spec.name] = spec.default.fn(values)
                except CheckFailure as fail:
                    raise self._blame(fail, bound, stmt, src) from None
            else:
                values[spec.name] = spec.default
        if sig.check:
            try:
                sig.check(values)
            except CheckFailure as fail:
                raise self._blame(fail, bound, stmt, src) from None
        dtypes = self.dtypes(sig, bound, scope, src, what)
        if sig.ir_type is ir.CrossAttention:
            values["source_dim"] = self._source(values, bound, stmt, src)
        op = sig.ir_type.trusted(**values, dtypes=dtypes)
        self._stream(op, stmt, bound, src, what)
        return op

    def _stream(self, op, stmt: s.OpCall, bound: dict, src: Source, what: str) -> None:
        """Widths agree from layer to layer: an embedding sets the stream's width, a
        linear changes it, every other layer must be as wide as the stream it reads."""
        if not op.starts_stream and self.width is not None and op.dim != self.width:
            b = bound.get("dim")
            raise (b.src if b else src).error(
                f"{what} is {op.dim} wide, but the stream is {self.width} wide here",
                b.pos if b else stmt.pos,
                f"pass dim = {self.width}, or change the stream's width with linear(out)",
            )
        if isinstance(op, ir.TOKEN_OPS):
            self._tokens(op, stmt, bound, src, what)
        if op.width_out is not None:
            self.width = op.width_out

    def _tokens(self, op, stmt: s.OpCall, bound: dict, src: Source, what: str) -> None:
        """Keep, pool and pixel shuffle change a stream's token count: at the top level
        of a stream (not repeated), over a square grid of tokens that divides evenly."""
        if not self.in_stream or self.multiplicity > 1 or self.blocks or self.tokens is None:
            raise src.error(
                f"{what} changes the token count: it belongs at the top of a stream's body",
                stmt.pos,
                "stream image(length = N) { ...; pool(4); ... } (not in a repeat or block)",
            )
        try:
            self.tokens = op.tokens_out(self.tokens)
        except CheckFailure as fail:
            raise self._blame(fail, bound, stmt, src) from None

    @staticmethod
    def _blame(fail: CheckFailure, bound: dict[str, Bound], stmt: s.OpCall, src: Source):
        b = bound.get(fail.arg)
        return (b.src if b else src).error(fail.message, b.pos if b else stmt.pos, fail.hint)

    def dtypes(
        self, sig: OpSignature, bound: dict[str, Bound], scope: Scope, src: Source, what: str
    ) -> ir.DtypePolicy:
        def arg(name: str) -> DType | None:
            if name not in bound:
                return None
            return _coerce(ArgSpec(name, ArgType.DTYPE), bound[name], what)  # type: ignore[return-value]

        chosen: dict[str, object] = {}
        for role, names in ROLE_CHAIN.items():
            explicit = next((d for d in map(arg, names) if d is not None), None)
            chosen[role] = explicit or role_dtype(scope, role, src)
        if not sig.recipe:
            return ir.DtypePolicy.trusted(**chosen)
        if "recipe" in bound:
            name = str(_coerce(ArgSpec("recipe", ArgType.RECIPE), bound["recipe"], what))
        else:
            name = role_recipe(scope, src)
        recipe = RECIPES[name]
        if recipe.weights is not None:  # the recipe stores the linear layers' weights
            chosen["weights"] = recipe.weights
        if recipe.attention and sig.kv_cache and arg("kv_dtype") is None:
            chosen["kv_cache"] = DType.fp8_e4m3  # FP8 attention reads an FP8 cache
        return ir.DtypePolicy.trusted(**chosen, recipe=name)

    def expand_block(self, stmt: s.OpCall, caller: Scope, unit: LoadedFile) -> ir.Block:
        bdef, bunit = unit.blocks[stmt.name]
        src = unit.src
        if stmt.name in self.blocks:
            chain = " → ".join([*self.blocks[self.blocks.index(stmt.name) :], stmt.name])
            raise src.error(f"block recursion: {chain}", stmt.pos, "a block cannot call itself")
        if len(self.blocks) >= MAX_DEPTH:
            raise src.error("blocks are nested too deeply", stmt.pos)
        names = [p.name for p in bdef.params]
        bound = _bind(stmt, names, names, f"block `{bdef.name}`", caller, src)
        defs: dict[str, Def] = {}
        for p in bdef.params:
            if p.name not in bound:
                if p.default is None:
                    raise src.error(
                        f"block `{bdef.name}` is missing its argument `{p.name}`",
                        stmt.pos,
                        f"{bdef.name}({', '.join(names)})",
                    )
                defs[p.name] = Def(p.default, bunit)
        for st in bdef.body:
            if isinstance(st, s.Assign):
                if st.name in names or st.name in defs:
                    raise bunit.src.error(
                        f"`{st.name}` is already a parameter of block `{bdef.name}`", st.pos
                    )
                defs[st.name] = Def(st.value, bunit)
        scope = Scope(defs, self.model_scope, {k: b.value for k, b in bound.items()})
        self.blocks.append(stmt.name)
        try:
            body = self.body(bdef.body, scope, bunit, top=True)
        finally:
            self.blocks.pop()
        return ir.Block.trusted(name=bdef.name, body=tuple(body))


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


# ---------------------------------------------------------------- models


def _model_chain(name: str, unit: LoadedFile) -> list[tuple[s.ModelDef, LoadedFile]]:
    """The model and its ancestors, leaf first."""
    chain: list[tuple[s.ModelDef, LoadedFile]] = [unit.models[name]]
    while (m := chain[-1][0]).extends is not None:
        owner = chain[-1][1]
        if m.extends not in owner.models:
            hint = did_you_mean(m.extends, owner.models)
            if m.extends in owner.blocks:
                hint = f"`{m.extends}` is a block; a model can only extend a model"
            raise owner.src.error(f"unknown model `{m.extends}`", m.extends_pos, hint)
        parent = owner.models[m.extends]
        if any(parent[0] is c[0] for c in chain):
            names = " → ".join([*(c[0].name for c in chain), parent[0].name])
            raise owner.src.error(f"`extends` cycle: {names}", m.extends_pos)
        chain.append(parent)
    return chain


def resolve_model(unit: LoadedFile, name: str) -> ir.Spec:
    """Resolve model `name` as seen from `unit` into a Spec."""
    chain = _model_chain(name, unit)
    defs: dict[str, Def] = {}
    inherited: set[str] = set()
    for i, (mdef, munit) in enumerate(reversed(chain)):
        local: set[str] = set()
        for st in mdef.body:
            if isinstance(st, s.Assign):
                if st.name in local:
                    raise munit.src.error(f"`{st.name}` is assigned twice in `{mdef.name}`", st.pos)
                local.add(st.name)
                defs[st.name] = Def(st.value, munit)
        if i < len(chain) - 1:
            inherited |= local
    owner = next((c for c in chain if any(not isinstance(x, s.Assign) for x in c[0].body)), None)
    leaf, leaf_unit = chain[0]
    if owner is None:
        raise leaf_unit.src.error(
            f"model `{leaf.name}` has no layers",
            leaf.name_pos,
            "add layer statements (embed, attention, ...) or `extends` a model that has them",
        )
    scope = Scope(defs)
    resolver = _Resolver(scope)
    body = resolver.body(owner[0].body, scope, owner[1], top=True)
    resolver.check_joins(body, owner[1].src)
    policy = ir.DtypePolicy.trusted(
        **{r: role_dtype(scope, r, leaf_unit.src) for r in ROLE_CHAIN},
        recipe=role_recipe(scope, leaf_unit.src),
    )
    # a title names one model: a child that sets none is labelled by its own name,
    # never with its parent's title
    own_title = any(isinstance(st, s.Assign) and st.name == "title" for st in leaf.body)
    title = scope.get("title", leaf_unit.src, leaf.name_pos) if own_title else None
    if len(chain) > 1:
        _check_unused_overrides(leaf, leaf_unit, scope, inherited)
    params: dict[str, ir.ParamValue] = {}
    for pname, d in defs.items():
        if pname in METADATA:
            continue
        value = scope._value(pname, d.unit.src, d.expr.pos)
        params[pname] = value.name if isinstance(value, Symbol) else value
    if own_title and not isinstance(title, str):
        d = defs["title"]
        raise d.unit.src.error(f"`title` must be a string, got {_show(title)}", d.expr.pos)  # type: ignore[arg-type]
    return ir.Spec.trusted(
        name=leaf.name,
        title=title if isinstance(title, str) else leaf.name,
        params=params,
        dtypes=policy,
        body=tuple(body),
    )


def _check_unused_overrides(leaf: s.ModelDef, unit: LoadedFile, scope: Scope, inherited: set[str]):
    for st in leaf.body:
        if isinstance(st, s.Assign) and st.name not in inherited | scope.used | METADATA_AND_ROLES:
            pos = s.Pos(st.pos.line, st.pos.column, st.pos.line, st.pos.column + len(st.name))
            raise unit.src.error(
                f"`{st.name}` is set but never used",
                pos,
                did_you_mean(st.name, inherited)
                or "a new parameter in a child model must be used by some expression",
            )


METADATA_AND_ROLES = (
    frozenset(METADATA) | {n for names in ROLE_CHAIN.values() for n in names} | {"recipe"}
)


def pick_model(unit: LoadedFile, model: str | None) -> str:
    if model is not None:
        if model not in unit.models:
            hint = did_you_mean(model, unit.models) or (
                f"models here: {', '.join(unit.local_models)}" if unit.local_models else None
            )
            raise SpecError(f"no model named `{model}`", filename=unit.src.filename, hint=hint)
        return model
    if len(unit.local_models) == 1:
        return unit.local_models[0]
    if not unit.local_models:
        raise SpecError(
            "no model is defined in this file",
            filename=unit.src.filename,
            hint="define one with `model NAME { ... }`",
        )
    raise SpecError(
        f"this file defines {len(unit.local_models)} models; choose one",
        filename=unit.src.filename,
        hint=f"pass model= one of: {', '.join(unit.local_models)}",
    )


@in_bulk
def load_specs(path: str | Path, root: Path | None = None) -> list[ir.Spec]:
    """Resolve every model a file defines (not those it imports), in file order; `path`
    may be a shipped model's name (`llama3-70b`). Given a `root`, no file outside it is
    read (Loader)."""
    unit = Loader(root).load_path(_or_shipped(Path(path), path, given=True))
    if not unit.local_models:
        pick_model(unit, None)  # raises the "no model" error
    return [resolve_model(unit, name) for name in unit.local_models]


@in_bulk
def load_spec(path: str | Path, model: str | None = None, root: Path | None = None) -> ir.Spec:
    """Load, resolve and validate the model defined in a `.model` file (or a shipped
    model's, by its name: `llama3-70b`); given a `root`, no file outside it is read."""
    unit = Loader(root).load_path(_or_shipped(Path(path), path, given=True))
    return resolve_model(unit, pick_model(unit, model))


@in_bulk
def parse_spec(text: str, filename: str = "<string>", model: str | None = None) -> ir.Spec:
    """Resolve a spec given as text; imports are relative to `filename`'s folder."""
    path = (
        Path(filename)
        if filename and not filename.startswith("<") and "\0" not in filename
        else None
    )
    unit = Loader().load_text(text, filename, path.resolve() if path else None)
    return resolve_model(unit, pick_model(unit, model))
