"""Text from a user's file made safe to show, in one place (the foundation, so errors
and every renderer share it): `clean` puts it on one line with nothing invisible,
reordering or XML-invalid; `opaque` does the same keeping its width (a source line
under which a caret points).

A tab or line break becomes a space (a title never starts a line of its own), and what
is invisible, reorders text or is not allowed in XML (C0/C1 controls, U+FFFE/U+FFFF,
lone surrogates, bidi overrides and isolates, zero-width characters, line and paragraph
separators, the byte-order mark) is shown as its escape, `\\u202e`: visibly, so a title
cannot pass for another (after U+202E, `%0001+` reads `+10000%`), and naming the code
point, which a replacement character (U+FFFD) would not.
"""

from __future__ import annotations

import re

# what `clean` turns into a space: tabs and line breaks (NEL too)
_BREAKS = re.compile("[\t\n\r\x0b\x0c\x85]")
# what `clean` shows as its escape: the other C0/C1 controls, lone surrogates, U+FFFE and
# U+FFFF (not XML characters), bidi marks, embeddings, overrides and isolates (U+061C,
# U+200E/F, U+202A-U+202E, U+2066-U+2069), zero-width characters (U+200B-U+200D, U+2060,
# U+FEFF) and the line and paragraph separators (U+2028, U+2029)
_HIDDEN = re.compile(
    "[\x00-\x08\x0e-\x1f\x7f-\x84\x86-\x9f\ud800-\udfff\ufffe\uffff"
    "\u061c\u200b-\u200f\u2028-\u202e\u2060\u2066-\u2069\ufeff]"
)


def clean(text: object) -> str:
    """Text from a user's file as every output shows it: on one line, with nothing
    invisible, reordering or XML-invalid (each shown as its `\\xhh` or `\\uhhhh`
    escape)."""
    s = _BREAKS.sub(" ", str(text))
    return _HIDDEN.sub(lambda m: _shown(ord(m.group())), s)


def opaque(text: str) -> str:
    """`clean` for a line that a caret points into: each break or hidden character is
    one `?`, so the columns stay where they were."""
    return _HIDDEN.sub("?", _BREAKS.sub("?", text))


def _shown(code: int) -> str:
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
