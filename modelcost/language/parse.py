"""Stage 1, parse: `.model` text → AST (syntax.Module), with positioned syntax errors."""

from __future__ import annotations

import re
from functools import cache

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken, VisitError
from lark.lexer import PatternStr

import modelcost.language.syntax as s
from modelcost.base.bounds import check_bounds
from modelcost.base.errors import SpecError
from modelcost.base.settings import SIZE_SUFFIXES

from .grammar_tables import load_parser

MAX_SOURCE_CHARS = 1_000_000
# A `#` starts a comment unless it is inside a string, and strings cannot span lines.
_STRING_OR_COMMENT = re.compile(r'"(?:[^"\\\n]|\\.)*"|#[^\n]*')


@cache
def _parser() -> Lark:
    return load_parser("modelspec.lark")


def _pos(meta_or_token) -> s.Pos:
    return s.Pos(
        meta_or_token.line,
        meta_or_token.column,
        meta_or_token.end_line,
        meta_or_token.end_column,
    )


def number_value(text: str) -> int | float:
    """The value of a NUMBER literal: `128_256`, `0.5`, `1e-5`, `4K` (4000), `128Ki` (131072)."""
    body, scale = text.replace("_", ""), 1
    for suffix, factor in SIZE_SUFFIXES.items():
        if body.endswith(suffix):
            body, scale = body[: -len(suffix)], factor
            break
    if any(c in body for c in ".eE"):
        value = float(body) * scale
        return int(value) if scale != 1 and value.is_integer() else value
    return int(body) * scale


def _strip(children) -> list:
    return [c for c in children if c is not None]


class _ToAst(Transformer):
    """Builds typed AST nodes; every node keeps its source span."""

    @v_args(meta=True, inline=True)
    def start(self, _meta, *items):
        return tuple(items)

    @v_args(meta=True, inline=True)
    def import_stmt(self, meta, path: Token):
        return s.Import(_unquote(path), _pos(meta))

    @v_args(meta=True, inline=True)
    def model_def(self, meta, name: Token, *rest):
        extends = None
        body = list(rest)
        if body and isinstance(body[0], tuple) and body[0][0] == "extends":
            extends = body.pop(0)[1]
        ext_name, ext_pos = (extends.value, _pos(extends)) if extends else (None, s.NOWHERE)
        return s.ModelDef(str(name), ext_name, tuple(body), _pos(meta), _pos(name), ext_pos)

    @v_args(inline=True)
    def extends_clause(self, name: Token):
        return ("extends", name)

    @v_args(meta=True, inline=True)
    def block_def(self, meta, name: Token, *rest):
        params: tuple[s.Param, ...] = ()
        body = list(rest)
        if body and isinstance(body[0], list):
            params = tuple(body.pop(0))
        return s.BlockDef(str(name), params, tuple(body), _pos(meta), _pos(name))

    def param_list(self, children):
        return _strip(children)

    @v_args(meta=True, inline=True)
    def param(self, meta, name: Token, default=None):
        return s.Param(str(name), default, _pos(meta))

    @v_args(meta=True, inline=True)
    def assign(self, meta, name: Token, value):
        return s.Assign(str(name), value, _pos(meta))

    @v_args(meta=True, inline=True)
    def op_call(self, meta, name: Token, args=None):
        return s.OpCall(str(name), tuple(args or ()), args is not None, _pos(meta))

    def call_args(self, children):
        return _strip(children)

    @v_args(meta=True, inline=True)
    def pos_arg(self, meta, value):
        return s.Arg(None, value, _pos(meta))

    @v_args(meta=True, inline=True)
    def kw_arg(self, meta, name: Token, value):
        return s.Arg(str(name), value, _pos(meta))

    @v_args(meta=True, inline=True)
    def repeat(self, meta, count, *body):
        return s.Repeat(count, tuple(body), _pos(meta), meta.end_line)

    @v_args(meta=True, inline=True)
    def stream(self, meta, name: Token, *rest):
        body = list(rest)
        args = tuple(body.pop(0)) if body and isinstance(body[0], list) else ()
        return s.Stream(str(name), args, tuple(body), _pos(meta), meta.end_line)

    # expressions
    @v_args(inline=True)
    def number(self, tok: Token):
        return s.Number(str(tok), number_value(str(tok)), _pos(tok))

    @v_args(inline=True)
    def string(self, tok: Token):
        return s.String(_unquote(tok), _pos(tok))

    @v_args(meta=True, inline=True)
    def true(self, meta):
        return s.Bool(True, _pos(meta))

    @v_args(meta=True, inline=True)
    def false(self, meta):
        return s.Bool(False, _pos(meta))

    @v_args(inline=True)
    def name(self, tok: Token):
        return s.Name(str(tok), _pos(tok))

    @v_args(meta=True, inline=True)
    def func(self, meta, name: Token, *args):
        return s.FuncCall(str(name), tuple(_strip(args)), _pos(meta))

    @v_args(meta=True, inline=True)
    def neg(self, meta, operand):
        return s.Unary("-", operand, _pos(meta))

    @v_args(meta=True, inline=True)
    def pos(self, meta, operand):
        return s.Unary("+", operand, _pos(meta))


def _binop(op: str):
    @v_args(meta=True, inline=True)
    def build(_self, meta, left, right):
        return s.BinOp(op, left, right, _pos(meta))

    return build


for _rule, _op in {
    "add": "+",
    "sub": "-",
    "mul": "*",
    "div": "/",
    "floordiv": "//",
    "mod": "%",
    "pow": "**",
}.items():
    setattr(_ToAst, _rule, _binop(_op))


def _unquote(tok: Token) -> str:
    body = str(tok)[1:-1]
    out, i = [], 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            out.append({"n": "\n", "t": "\t"}.get(nxt, nxt))
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


_FRIENDLY = {"NAME": "a name", "NUMBER": "a number", "STRING": "a string", "$END": "end of file"}


def _describe_terminal(name: str, parser: Lark | None = None) -> str:
    if name in _FRIENDLY:
        return _FRIENDLY[name]
    for term in (parser or _parser()).terminals:
        if term.name == name and isinstance(term.pattern, PatternStr):
            return f"`{term.pattern.value}`"
    return name.lower()


def syntax_error(
    err: UnexpectedInput, source: str, filename: str, parser: Lark | None = None
) -> SpecError:
    """A positioned SpecError for a lark error (`parser`: the grammar that raised it)."""
    lines = source.splitlines()
    line, column, width, hint = err.line, err.column, 1, None
    if isinstance(err, UnexpectedToken):
        tok = err.token
        expected = sorted({_describe_terminal(t, parser) for t in err.expected})
        if tok.type == "$END":
            message = "unexpected end of file"
            line = max(len(lines), 1)
            column = len(lines[-1]) + 1 if lines else 1
            if "`}`" in expected:
                hint = "a `{` is never closed: add the matching `}`"
        else:
            described = _describe_terminal(tok.type, parser).removeprefix("a ")
            shown = f"`{tok.value}`"
            message = f"unexpected {shown if described == shown else f'{described} {shown}'}"
            width = len(str(tok.value))
        if hint is None and expected:
            hint = "expected " + ", ".join(expected[:8]) + (" ..." if len(expected) > 8 else "")
    elif isinstance(err, UnexpectedCharacters):
        message = f"unexpected character `{err.char}`"
        if err.char == "'":
            hint = 'strings use double quotes: "..."'
    else:  # pragma: no cover - other lark input errors
        message = "syntax error"
    source_line = lines[line - 1] if 0 < line <= len(lines) else None
    return SpecError(
        message,
        filename=filename,
        line=line,
        column=column,
        hint=hint,
        source_line=source_line,
        width=width,
    )


def parse(source: str, filename: str = "<string>") -> s.Module:
    """Parse `.model` text into an AST. Raises SpecError on any syntax error."""
    if len(source) > MAX_SOURCE_CHARS:
        raise SpecError(
            f"file is too large ({len(source)} characters; the limit is {MAX_SOURCE_CHARS})",
            filename=filename,
        )
    check_bounds(source, filename)
    try:
        tree = _parser().parse(source)
        items = _ToAst().transform(tree)
    except UnexpectedInput as err:
        raise syntax_error(err, source, filename) from None
    except (RecursionError, VisitError) as err:
        raise SpecError(
            "the file is nested too deeply to parse", filename=filename, hint=str(err)[:200]
        ) from None
    return s.Module(tuple(items), filename, source, _comments(source))


def _comments(source: str) -> tuple[s.Comment, ...]:
    """Every `#` comment with its line, and whether code precedes it on that line."""
    out = []
    line, line_start = 1, 0
    for m in _STRING_OR_COMMENT.finditer(source):
        if m.group().startswith('"'):
            continue
        start = m.start()
        line += source.count("\n", line_start, start)
        line_start = source.rfind("\n", 0, start) + 1
        out.append(s.Comment(m.group(), line, bool(source[line_start:start].strip())))
    return tuple(out)
