"""Locates the data that ships beside the code: grammar/, templates/ and specs/.

In a source checkout these are top-level folders of the repository; an installed
wheel carries them inside the package as ``modelcost/_data/<name>``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

V = TypeVar("V")

_PACKAGE = Path(__file__).resolve().parent.parent  # modelcost/, this file in modelcost/base


@cache
def data_dir(name: str) -> Path:
    """The folder ``name`` (``grammar``, ``templates`` or ``specs``)."""
    for candidate in (_PACKAGE / "_data" / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"modelcost data folder {name!r} is missing from the installation")


def grammar_path(name: str = "modelspec.lark") -> Path:
    return data_dir("grammar") / name


def specs_dir() -> Path:
    return data_dir("specs")


def shipped_models() -> dict[str, Path]:
    """The zoo's specs (specs/models/*.model) by name: `llama3-70b`."""
    return {p.stem: p for p in sorted((specs_dir() / "models").glob("*.model"))}


def shipped_model(name: str | Path) -> Path | None:
    """The shipped spec a bare name means (`llama3-70b` or `llama3-70b.model`, no
    folder), or None: what a path that names no file may be, on the command line and
    in an `import`."""
    text = str(name)
    if not text or "/" in text or "\\" in text or text.startswith("."):
        return None
    return shipped_models().get(text.removesuffix(".model"))


def templates_dir() -> Path:
    return data_dir("templates")


@cache
def kernel_table(name: str) -> dict[str, Any]:
    """specs/kernels/NAME.json, a table of published figures, read once (callers share
    it: never modify it)."""
    text = (specs_dir() / "kernels" / f"{name}.json").read_text(encoding="utf-8")
    table: dict[str, Any] = json.loads(text)
    return table


def entries(table: Mapping[str, V]) -> dict[str, V]:
    """A table's entries, without its notes (the keys that start with `_`: `_comment`)."""
    return {key: value for key, value in table.items() if not key.startswith("_")}
