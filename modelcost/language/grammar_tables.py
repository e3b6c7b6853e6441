"""Prebuilt LALR tables for the grammars in grammar/, so no run rebuilds them.

Building a lark LALR parser takes tens of milliseconds, longer than compiling a spec.
`_tables.marshal` holds each grammar's parser as lark's public `Lark.save` writes it, and
the SHA-256 of the grammar text it came from; a parser is read back with `Lark.load` only
when that hash matches, so a stale table is never used (the grammar is rebuilt instead,
and a test fails until the tables are regenerated). The file ships inside the package,
written by the command below, never by a user's input. After editing a grammar:

    python -m modelcost.language.regen_tables
"""

from __future__ import annotations

import hashlib
import io
import marshal
from functools import cache
from pathlib import Path

import lark
from lark import Lark

from modelcost.base.resources import grammar_path

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
        return Lark.load(io.BytesIO(entry["parser"]))
    return _build(name)


def generate() -> bytes:
    """The content of `_tables.marshal` for the current grammars."""
    tables = {}
    for name in OPTIONS:
        saved = io.BytesIO()
        _build(name).save(saved)
        tables[name] = {"sha256": digest(name), "parser": saved.getvalue()}
    return marshal.dumps(tables)
