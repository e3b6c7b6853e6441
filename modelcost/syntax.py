"""The abstract syntax tree of a `.model` file: frozen nodes that keep source positions."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Pos:
    """A source span: 1-based line and column of the start, and of one past the end."""

    line: int
    column: int
    end_line: int
    end_column: int

    @property
    def width(self) -> int:
        return self.end_column - self.column if self.end_line == self.line else 1


NOWHERE = Pos(0, 0, 0, 0)

# ---------------------------------------------------------------- expressions


@dataclass(frozen=True, slots=True)
class Number:
    text: str  # as written (kept by the formatter)
    value: int | float
    pos: Pos = field(default=NOWHERE, compare=False)


@dataclass(frozen=True, slots=True)
class String:
    value: str
    pos: Pos = field(default=NOWHERE, compare=False)


@dataclass(frozen=True, slots=True)
class Bool:
    value: bool
    pos: Pos = field(default=NOWHERE, compare=False)


@dataclass(frozen=True, slots=True)
class Name:
    id: str
    pos: Pos = field(default=NOWHERE, compare=False)


@dataclass(frozen=True, slots=True)
class BinOp:
    op: str  # one of + - * / // % **
    left: Expr
    right: Expr
    pos: Pos = field(default=NOWHERE, compare=False)


@dataclass(frozen=True, slots=True)
class Unary:
    op: str  # - or +
    operand: Expr
    pos: Pos = field(default=NOWHERE, compare=False)


@dataclass(frozen=True, slots=True)
class FuncCall:
    name: str
    args: tuple[Expr, ...]
    pos: Pos = field(default=NOWHERE, compare=False)


Expr = Number | String | Bool | Name | BinOp | Unary | FuncCall

# ---------------------------------------------------------------- statements


@dataclass(frozen=True, slots=True)
class Assign:
    name: str
    value: Expr
    pos: Pos = field(default=NOWHERE, compare=False)


@dataclass(frozen=True, slots=True)
class Arg:
    name: str | None  # None for a positional argument
    value: Expr
    pos: Pos = field(default=NOWHERE, compare=False)


@dataclass(frozen=True, slots=True)
class OpCall:
    """A layer statement: a built-in op (`attention(...)`) or a block (`decoder_layer`)."""

    name: str
    args: tuple[Arg, ...]
    parens: bool = field(default=False, compare=False)
    pos: Pos = field(default=NOWHERE, compare=False)


@dataclass(frozen=True, slots=True)
class Repeat:
    count: Expr
    body: tuple[Stmt, ...]
    pos: Pos = field(default=NOWHERE, compare=False)
    end_line: int = field(default=0, compare=False)


Stmt = Assign | OpCall | Repeat

# ---------------------------------------------------------------- top level


@dataclass(frozen=True, slots=True)
class Param:
    name: str
    default: Expr | None
    pos: Pos = field(default=NOWHERE, compare=False)


@dataclass(frozen=True, slots=True)
class ModelDef:
    name: str
    extends: str | None
    body: tuple[Stmt, ...]
    pos: Pos = field(default=NOWHERE, compare=False)
    name_pos: Pos = field(default=NOWHERE, compare=False)
    extends_pos: Pos = field(default=NOWHERE, compare=False)


@dataclass(frozen=True, slots=True)
class BlockDef:
    name: str
    params: tuple[Param, ...]
    body: tuple[Stmt, ...]
    pos: Pos = field(default=NOWHERE, compare=False)
    name_pos: Pos = field(default=NOWHERE, compare=False)


@dataclass(frozen=True, slots=True)
class Import:
    path: str
    pos: Pos = field(default=NOWHERE, compare=False)


Item = Import | ModelDef | BlockDef


@dataclass(frozen=True, slots=True)
class Comment:
    text: str  # including the leading '#'
    line: int
    trailing: bool  # code precedes it on its line


@dataclass(frozen=True, slots=True)
class Module:
    items: tuple[Item, ...]
    filename: str = field(compare=False)
    source: str = field(compare=False, repr=False)
    comments: tuple[Comment, ...] = field(default=(), compare=False)
