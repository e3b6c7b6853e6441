"""Prebuilt LALR tables for the grammars in grammar/, so no run rebuilds them.

Building a lark LALR parser takes tens of milliseconds, longer than compiling a spec.
`_tables.marshal` holds each grammar's serialized parser and the SHA-256 of the grammar text
it came from; a parser is loaded from there only when that hash matches, so a stale
table is never used (the grammar is rebuilt instead, and a test fails until the tables
are regenerated). After editing a grammar:

    python -m modelcost.regen_tables
"""

from __future__ import annotations

import hashlib
import marshal
from functools import cache
from pathlib import Path

import lark
from lark import Lark
from lark.grammar import Rule
from lark.lexer import TerminalDef

from .resources import grammar_path

OPTIONS: dict[str, dict] = {
    "modelspec.lark": {"propagate_positions": True, "maybe_placeholders": True},
    "hardware.lark": {"propagate_positions": True, "maybe_placeholders": True},
}
TABLES_FILE = Path(__file__).with_name("_tables.marshal")


def digest(name: str) -> str:
    text = grammar_path(name).read_text(encoding="utf-8")
    key = f"{text}\n{sorted(OPTIONS[name].items())}\nlark {lark.__version__}"
    return hashlib.sha256(key.encode()).hexdigest()


def _build(name: str) -> Lark:
    text = grammar_path(name).read_text(encoding="utf-8")
    return Lark(text, parser="lalr", **OPTIONS[name])


@cache
def _tables() -> dict:
    try:
        return marshal.loads(TABLES_FILE.read_bytes())
    except (OSError, ValueError, EOFError, TypeError):  # missing, or another Python's format
        return {}


def load_parser(name: str) -> Lark:
    """The parser for grammar `name`, from the prebuilt tables when they are current."""
    entry = _tables().get(name)
    if entry is not None and entry["sha256"] == digest(name):
        return Lark.__new__(Lark)._load({"data": entry["data"], "memo": entry["memo"]})
    return _build(name)


def generate() -> bytes:
    """The content of `_tables.marshal` for the current grammars."""
    tables = {}
    for name in OPTIONS:
        data, memo = _build(name).memo_serialize([TerminalDef, Rule])
        tables[name] = {"sha256": digest(name), "data": data, "memo": memo}
    return marshal.dumps(tables)
