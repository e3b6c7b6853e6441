"""The formatter: an AST printed in canonical form, comments and paragraph breaks kept.

Canonical form: two-space indentation, one statement per line, no `;`, spaces around
binary operators and `=`, minimal parentheses, `op` rather than `op()`, one blank line
between top-level definitions, at most one blank line anywhere. Literals keep their
spelling (`128_256`, `4Ki`).
"""

from __future__ import annotations

import bisect

import modelcost.language.syntax as s

INDENT = "  "
LINE_WIDTH = 88

# Binding strength of each expression form (higher binds tighter).
_SUM, _PRODUCT, _UNARY, _POWER, _ATOM = 1, 2, 3, 4, 5
_PREC = {"+": _SUM, "-": _SUM, "*": _PRODUCT, "/": _PRODUCT, "//": _PRODUCT, "%": _PRODUCT}


def _prec(e: s.Expr) -> int:
    if isinstance(e, s.BinOp):
        return _POWER if e.op == "**" else _PREC[e.op]
    if isinstance(e, s.Unary):
        return _UNARY
    return _ATOM


def _wrap(e: s.Expr, parens: bool) -> str:
    text = format_expr(e)
    return f"({text})" if parens else text


def format_expr(e: s.Expr) -> str:
    """Canonical text of an expression, with only the parentheses it needs."""
    match e:
        case s.Number(text=text):
            return text
        case s.String(value=value):
            return quote(value)
        case s.Bool(value=value):
            return "true" if value else "false"
        case s.Name(id=name):
            return name
        case s.Unary(op=op, operand=operand):
            inner = _wrap(operand, _prec(operand) < _UNARY)
            return f"{op}{inner}"
        case s.FuncCall(name=name, args=args):
            return f"{name}({', '.join(format_expr(a) for a in args)})"
        case s.BinOp(op="**", left=left, right=right):
            return f"{_wrap(left, _prec(left) <= _POWER)} ** {_wrap(right, _prec(right) < _UNARY)}"
        case s.BinOp(op=op, left=left, right=right):
            p = _PREC[op]
            return f"{_wrap(left, _prec(left) < p)} {op} {_wrap(right, _prec(right) <= p)}"
    raise AssertionError(f"unhandled expression {e!r}")  # pragma: no cover


def quote(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + escaped.replace("\n", "\\n").replace("\t", "\\t") + '"'


def _format_arg(a: s.Arg) -> str:
    return format_expr(a.value) if a.name is None else f"{a.name} = {format_expr(a.value)}"


def _format_param(p: s.Param) -> str:
    return p.name if p.default is None else f"{p.name} = {format_expr(p.default)}"


def format_stmt(st: s.Assign | s.OpCall, depth: int = 0) -> str:
    """A simple statement; a call too wide for one line gets one argument per line."""
    if isinstance(st, s.Assign):
        return f"{st.name} = {format_expr(st.value)}"
    if not st.args:
        return st.name
    args = [_format_arg(a) for a in st.args]
    one_line = f"{st.name}({', '.join(args)})"
    if len(INDENT * depth + one_line) <= LINE_WIDTH:
        return one_line
    inner = "".join(f"\n{INDENT * (depth + 1)}{a}," for a in args)
    return f"{st.name}({inner}\n{INDENT * depth})"


class _Printer:
    def __init__(self, module: s.Module) -> None:
        self.out: list[str] = []
        self.comments = sorted(module.comments, key=lambda c: c.line)
        self.comment_lines = [c.line for c in self.comments]
        self.next_comment = 0
        src_lines = module.source.splitlines()
        self.blank = {i + 1 for i, text in enumerate(src_lines) if not text.strip()}
        self.last_line = 0  # source line of the last thing printed
        self.fresh = True  # nothing printed yet at this level

    # -- comments and spacing
    def _gap(self, line: int) -> bool:
        return any(n in self.blank for n in range(self.last_line + 1, line))

    def _space_before(self, line: int, force: bool = False) -> None:
        if not self.fresh and (force or self._gap(line)):
            self.out.append("")
        self.fresh = False

    def _pending(self, before: int) -> list[s.Comment]:
        end = bisect.bisect_left(self.comment_lines, before, lo=self.next_comment)
        taken = self.comments[self.next_comment : end]
        self.next_comment = end
        return taken

    def _leading(self, line: int, depth: int, force_blank: bool = False) -> None:
        """Comments on their own lines before source line `line`, then spacing for it."""
        first = True
        for c in self._pending(line):
            self._space_before(c.line, force=force_blank and first)
            first = False
            self.out.append(INDENT * depth + c.text)
            self.last_line = c.line
        self._space_before(line, force=force_blank and first)

    def _trailing(self, text: str, end: int, depth: int, shared: bool = False) -> None:
        """Print `text` for source lines up to `end`, with the comments inside that span.

        `shared`: the next statement starts on line `end`, so a comment there is its own.
        """
        inside = self._pending(end if shared else end + 1)
        for c in inside[:-1]:
            self.out.append(INDENT * depth + c.text)
        tail = f"  {inside[-1].text}" if inside else ""
        self.out.append(INDENT * depth + text + tail)
        self.last_line = end

    # -- structure
    def _open(self, header: str, pos: s.Pos, depth: int, first_line: int) -> None:
        inside = self._pending(pos.line + 1 if first_line > pos.line else pos.line)
        tail = f"  {inside[-1].text}" if inside else ""
        for c in inside[:-1]:
            self.out.append(INDENT * depth + c.text)
        self.out.append(INDENT * depth + header + " {" + tail)
        self.last_line = pos.line
        self.fresh = True

    def _close(self, end_line: int, depth: int) -> None:
        for c in self._pending(end_line):
            self._space_before(c.line)
            self.out.append(INDENT * (depth + 1) + c.text)
            self.last_line = c.line
        self._trailing("}", end_line, depth)
        self.fresh = False

    def body(self, stmts: tuple[s.Stmt, ...], depth: int, end_line: int) -> None:
        for i, st in enumerate(stmts):
            next_line = stmts[i + 1].pos.line if i + 1 < len(stmts) else end_line
            self._leading(st.pos.line, depth)
            if isinstance(st, s.Repeat):
                self._container(f"repeat {format_expr(st.count)}", st.pos, st.body, depth)
            elif isinstance(st, s.Stream):
                call = format_stmt(s.OpCall(st.name, st.args), depth)
                self._container(f"stream {call}", st.pos, st.body, depth)
            else:
                shared = next_line == st.pos.end_line
                self._trailing(format_stmt(st, depth), st.pos.end_line, depth, shared)

    def _container(self, header: str, pos: s.Pos, body: tuple[s.Stmt, ...], depth: int) -> None:
        self._open(header, pos, depth, body[0].pos.line if body else pos.end_line)
        self.body(body, depth + 1, pos.end_line)
        self._close(pos.end_line, depth)

    def module(self, items: tuple[s.Item, ...]) -> str:
        previous: s.Item | None = None
        for item in items:
            together = isinstance(item, s.Import) and isinstance(previous, s.Import)
            self._leading(item.pos.line, 0, force_blank=not together)
            if isinstance(item, s.Import):
                self._trailing(f"import {quote(item.path)}", item.pos.end_line, 0)
            elif isinstance(item, s.ModelDef):
                ext = f" extends {item.extends}" if item.extends else ""
                self._container(f"model {item.name}{ext}", item.pos, item.body, 0)
            else:
                params = f"({', '.join(map(_format_param, item.params))})" if item.params else ""
                self._container(f"block {item.name}{params}", item.pos, item.body, 0)
            previous = item
        rest = self.comments[self.next_comment :]
        for c in rest:
            self._space_before(c.line, force=c is rest[0] and previous is not None)
            self.out.append(c.text)
            self.last_line = c.line
        return "\n".join(self.out) + "\n" if self.out else ""


def format_module(module: s.Module) -> str:
    """Canonical text of a parsed file."""
    return _Printer(module).module(module.items)


def format_source(source: str, filename: str = "<string>") -> str:
    """Parse and reformat `.model` text (raises SpecError on a syntax error)."""
    from .parse import parse

    return format_module(parse(source, filename))
