"""Bounds on source text, checked before the parser sees it, so that no input within
the size limit can take the parser (or the recursive passes after it) long.

Lark's LALR parser costs about 15-40 µs per token and the AST passes recurse once per
level of nesting, so a hostile file of a million characters could take tens of seconds
or exhaust the stack. One linear scan (a C regex plus a loop over at most MAX_TOKENS
tokens) enforces, with a positioned error for each:

- at most MAX_TOKENS tokens, comments included (the largest shipped spec has 167
  tokens of code; 20,000 parse in about a second);
- at most MAX_NESTING levels of `(` and `{`;
- at most MAX_CHAIN operators in one run of an expression (between `=`, `,`, `;` and
  brackets): `1 + 1 + ... + 1` builds a tree as deep as it is long;
- number literals of at most MAX_NUMBER_CHARS characters.
"""

from __future__ import annotations

import re

from .errors import SpecError

MAX_TOKENS = 20_000
MAX_NESTING = 64
MAX_CHAIN = 256
MAX_NUMBER_CHARS = 64

# strings and comments first (their brackets and operators do not count), then words
# and numbers, two-character operators, then any other single character
_TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|#[^\n]*|[A-Za-z0-9_.]+|\*\*|//|\S')
_OPEN, _CLOSE = "({", ")}"
_OPERATORS = frozenset({"+", "-", "*", "/", "//", "%", "**"})
_SEPARATORS = frozenset({"=", ",", ";"})


def check_bounds(source: str, filename: str) -> None:
    """Raise a positioned SpecError if `source` exceeds any bound above."""
    tokens = _TOKEN.findall(source)
    if len(tokens) > MAX_TOKENS:
        raise SpecError(
            f"the file has too many tokens ({len(tokens):,}; the limit is {MAX_TOKENS:,})",
            filename=filename,
            hint="split it into files that import each other, or use `repeat` and blocks",
        )
    if not _needs_scan(source, tokens):
        return
    depth, chain = 0, [0]
    for m in _TOKEN.finditer(source):
        tok = m.group()
        first = tok[0]
        if first in '"#':
            continue
        if first.isdigit() and len(tok) > MAX_NUMBER_CHARS:
            raise _error(source, m, filename, f"number literal is too long ({len(tok):,} "
                         f"characters; the limit is {MAX_NUMBER_CHARS})", len(tok))  # fmt: skip
        if tok in _OPEN:
            depth += 1
            if depth > MAX_NESTING:
                raise _error(source, m, filename, f"brackets are nested more than "
                             f"{MAX_NESTING} levels deep", hint="flatten the expression or "
                             "the blocks")  # fmt: skip
            chain.append(0)
        elif tok in _CLOSE:
            if depth:
                depth -= 1
                chain.pop()
            chain[-1] = 0
        elif tok in _SEPARATORS:
            chain[-1] = 0
        elif tok in _OPERATORS:
            chain[-1] += 1
            if chain[-1] > MAX_CHAIN:
                raise _error(source, m, filename, f"expression is too long (more than "
                             f"{MAX_CHAIN} operators in a row)", len(tok),
                             "compute it in steps: `a = ...`, then `b = a + ...`")  # fmt: skip


def _needs_scan(source: str, tokens: list[str]) -> bool:
    """Whether any bound but the token count could be exceeded: cheap counts first."""
    brackets = source.count("(") + source.count("{")
    operators = sum(source.count(c) for c in "+-*/%")
    longest = max((len(t) for t in tokens if t[0].isdigit()), default=0)
    return brackets > MAX_NESTING or operators > MAX_CHAIN or longest > MAX_NUMBER_CHARS


def _error(
    source: str, m: re.Match, filename: str, message: str, width: int = 1, hint: str | None = None
) -> SpecError:
    start = m.start()
    line_start = source.rfind("\n", 0, start) + 1
    line_end = source.find("\n", start)
    return SpecError(
        message,
        filename=filename,
        line=source.count("\n", 0, start) + 1,
        column=start - line_start + 1,
        source_line=source[line_start : line_end if line_end >= 0 else len(source)][:200],
        width=width,
        hint=hint,
    )
