"""The abstract syntax tree of a `.model` file: frozen nodes that keep source positions."""

from __future__ import annotations

from functools import cache

from modelcost.base.record import Record


class Pos(Record, frozen=True):
    """A source span: 1-based line and column of the start, and of one past the end."""

    line: int
    column: int
    end_line: int
    end_column: int

    @property
    def width(self) -> int:
        return self.end_column - self.column if self.end_line == self.line else 1


NOWHERE = Pos(0, 0, 0, 0)

# where a node was written, not what it says: left out of equality and hashing, so two
# parses of the same text formatted differently compare equal
UNCOMPARED = frozenset(
    {"end_line", "extends_pos", "filename", "name_pos", "parens", "pos", "source"}
)


class Syntax(Record, frozen=True):
    """A syntax node: equal to another when they say the same, wherever written."""

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in _compared(type(self)))

    def __hash__(self) -> int:
        return hash((type(self), *(getattr(self, f) for f in _compared(type(self)))))


@cache
def _compared(cls: type[Syntax]) -> tuple[str, ...]:
    return tuple(f for f in cls.__struct_fields__ if f not in UNCOMPARED)


# ---------------------------------------------------------------- expressions


class Number(Syntax, frozen=True):
    text: str  # as written (kept by the formatter)
    value: int | float
    pos: Pos = NOWHERE


class String(Syntax, frozen=True):
    value: str
    pos: Pos = NOWHERE


class Bool(Syntax, frozen=True):
    value: bool
    pos: Pos = NOWHERE


class Name(Syntax, frozen=True):
    id: str
    pos: Pos = NOWHERE


class BinOp(Syntax, frozen=True):
    op: str  # one of + - * / // % **
    left: Expr
    right: Expr
    pos: Pos = NOWHERE


class Unary(Syntax, frozen=True):
    op: str  # - or +
    operand: Expr
    pos: Pos = NOWHERE


class FuncCall(Syntax, frozen=True):
    name: str
    args: tuple[Expr, ...]
    pos: Pos = NOWHERE


Expr = Number | String | Bool | Name | BinOp | Unary | FuncCall

# ---------------------------------------------------------------- statements


class Assign(Syntax, frozen=True):
    name: str
    value: Expr
    pos: Pos = NOWHERE


class Arg(Syntax, frozen=True):
    name: str | None  # None for a positional argument
    value: Expr
    pos: Pos = NOWHERE


class OpCall(Syntax, frozen=True):
    """A layer statement: a built-in op (`attention(...)`) or a block (`decoder_layer`)."""

    name: str
    args: tuple[Arg, ...]
    parens: bool = False
    pos: Pos = NOWHERE


class Repeat(Syntax, frozen=True):
    count: Expr
    body: tuple[Stmt, ...]
    pos: Pos = NOWHERE
    end_line: int = 0


class Stream(Syntax, frozen=True):
    """`stream NAME(args) { ... }`: layers over another token stream (an encoder)."""

    name: str
    args: tuple[Arg, ...]
    body: tuple[Stmt, ...]
    pos: Pos = NOWHERE
    end_line: int = 0


Stmt = Assign | OpCall | Repeat | Stream

# ---------------------------------------------------------------- top level


class Param(Syntax, frozen=True):
    name: str
    default: Expr | None
    pos: Pos = NOWHERE


class ModelDef(Syntax, frozen=True):
    name: str
    extends: str | None
    body: tuple[Stmt, ...]
    pos: Pos = NOWHERE
    name_pos: Pos = NOWHERE
    extends_pos: Pos = NOWHERE


class BlockDef(Syntax, frozen=True):
    name: str
    params: tuple[Param, ...]
    body: tuple[Stmt, ...]
    pos: Pos = NOWHERE
    name_pos: Pos = NOWHERE


class Import(Syntax, frozen=True):
    path: str
    pos: Pos = NOWHERE


Item = Import | ModelDef | BlockDef


class Comment(Syntax, frozen=True):
    text: str  # including the leading '#'
    line: int
    trailing: bool  # code precedes it on its line


class Module(Syntax, frozen=True):
    items: tuple[Item, ...]
    filename: str
    source: str
    comments: tuple[Comment, ...] = ()
