"""What a lower layer hands up to the layers above it without importing them: how a
domain object shows itself in a notebook (the render layer draws it) and how a file
the language does not read itself becomes `.model` text (a config.json: the importer
front end). The top of the package (modelcost/__init__.py, which every import of
modelcost runs first) fills both, so imports still only run down the layers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# shows a domain object (a Report, Sweep, Serving, ...) as `html` or `md`
Display = Callable[[Any, str], str]
_display: list[Display] = []


def set_display(show: Display) -> None:
    """How the render layer shows domain objects (set once by the package's top)."""
    _display[:] = [show]


def shown(obj: object, fmt: str) -> str:
    """`obj` as `fmt` (`html` or `md`), as notebooks show it (`_repr_html_`)."""
    if not _display:
        raise RuntimeError("no renderer registered: import modelcost first")
    return _display[0](obj, fmt)


# turns a file's text into `.model` text: (text, filename) → text
Translator = Callable[[str, str], str]
_translators: dict[str, Translator] = {}


def add_translator(suffix: str, translate: Translator) -> None:
    """Files ending in `suffix` are read through `translate` (set by the package's top)."""
    _translators[suffix] = translate


def translator(suffix: str) -> Translator | None:
    """What turns a file ending in `suffix` into `.model` text; None: it is one."""
    return _translators.get(suffix)
