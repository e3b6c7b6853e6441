"""The one user-facing error type: a mistake in a spec, pinned to a place in a file."""

from __future__ import annotations

from collections.abc import Iterable

from .visible import clean, opaque


class SpecError(Exception):
    """A mistake in a `.model` (or hardware) file.

    Carries the file, the 1-based line and column, the message, the offending source
    line and an optional hint. ``str(err)`` is the one-line ``path:line:col: error: msg``
    form; :meth:`render` adds the source line, a caret under the culprit and the hint.
    """

    def __init__(
        self,
        message: str,
        *,
        filename: str = "<string>",
        line: int = 0,
        column: int = 0,
        hint: str | None = None,
        source_line: str | None = None,
        width: int = 1,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.filename = filename
        self.line = line
        self.column = column
        self.hint = hint
        self.source_line = source_line
        self.width = max(1, width)

    @property
    def location(self) -> str:
        if self.line <= 0:
            return self.filename
        return f"{self.filename}:{self.line}:{self.column}"

    def __str__(self) -> str:
        return f"{self.location}: error: {self.message}"

    def render(self) -> str:
        """The full diagnostic: header, source line, caret and hint. Nothing from a
        user's file (a file name, a quoted value, the line) can start a line, drive the
        terminal (an ESC, a BEL) or reorder what is shown (a bidi override): the header
        and hint are `clean`, the source line `opaque` (so the caret stays under it)."""
        out = [clean(str(self))]
        if self.source_line is not None and self.line > 0:
            text = opaque(self.source_line.rstrip("\n").expandtabs(1))
            out.append(f"  {text}")
            start = max(self.column - 1, 0)
            width = max(1, min(self.width, len(text) - start)) if start < len(text) else 1
            out.append("  " + " " * start + "^" * width)
        if self.hint:
            out.append(f"  hint: {clean(self.hint)}")
        return "\n".join(out)


def did_you_mean(name: str, candidates: Iterable[str]) -> str | None:
    """A 'did you mean `x`?' hint for the closest candidate, or None."""
    import difflib  # only when a name is unknown

    matches = difflib.get_close_matches(name, sorted(set(candidates)), n=1, cutoff=0.6)
    return f"did you mean `{matches[0]}`?" if matches else None
