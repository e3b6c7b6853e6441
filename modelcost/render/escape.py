"""Escaping of text that came from a user's file, for each text output format.

Markdown: rendered by Python-Markdown (MkDocs) or as GitHub-flavoured Markdown, an
escaped string yields exactly its characters: no HTML element, no link or autolink, no
emphasis, no extra table cell or row. Terminal text: no control characters (an ESC in
a title must not drive the user's terminal). HTML escaping is jinja's autoescape.
"""

from __future__ import annotations

import re
from urllib.parse import quote

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# backslash-escaped: the characters that make emphasis, code and links
# (`_` only where it could open or close emphasis: not inside a word like `gate_proj`)
_BACKSLASHED = re.compile(r"([\\`*\[\]]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")
# entities where Python-Markdown has no backslash escape: `|` splits table cells, `~`
# strikes through in GFM
_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "|": "&#124;", "~": "&#126;"}
_ENTITY = re.compile(r"[&<>|~]")
_AUTOLINK = re.compile(r"(?<=[A-Za-z0-9])(:)(?=//)|(?i:(?<=\bwww)(\.))")
# what would start a heading, list, rule or setext underline at the start of a line
_BLOCK_START = re.compile(r"^(\s*)([#+\-=](?=\s|$|[#+\-=])|\d{1,9}(?=[.)](?:\s|$)))")
ZERO_WIDTH_SPACE = "\u200b"


class Markdown(str):
    """Markdown that is already escaped (or built by us): templates insert it as is."""

    __slots__ = ()


def md(text: object) -> Markdown:
    """`text` as Markdown that renders to exactly its characters (one line)."""
    if isinstance(text, Markdown):
        return text
    s = _CONTROL.sub(" ", str(text))
    s = _BACKSLASHED.sub(r"\\\1", s)
    s = _ENTITY.sub(lambda m: _ENTITIES[m.group()], s)
    # GFM autolinks `scheme://...`, `www.` and e-mail addresses in plain text; a zero-width
    # space breaks each pattern (a backslash would show in Python-Markdown)
    s = _AUTOLINK.sub(lambda m: ZERO_WIDTH_SPACE + m.group(), s)
    s = s.replace("@", "@" + ZERO_WIDTH_SPACE)
    # a leading `#`, `-`, `+`, `=` or `1.` would start a heading, a list or a rule
    m = _BLOCK_START.match(s)
    if m:
        lead, mark = m.groups()
        s = f"{lead}{mark}\\{s[m.end() :]}" if mark[0].isdigit() else f"{lead}\\{s[len(lead) :]}"
    return Markdown(s)


def md_link(text: object, href: str) -> Markdown:
    """A Markdown link to `href` (a relative page or an http(s) URL we made)."""
    return Markdown(f"[{md(text)}]({safe_href(href)})")


def safe_href(href: str) -> str:
    """`href` percent-encoded, never with a scheme other than http(s) (so a page
    named `javascript:x` is a relative link to `javascript%3Ax`)."""
    scheme, sep, rest = href.partition("://")
    if sep and scheme in ("http", "https"):
        return f"{scheme}://{quote(rest, safe='/:@%#?=&+,;~')}"
    return quote(href, safe="/%#")


def terminal(text: str) -> str:
    """Text for a terminal: control characters (ESC, BEL, CR, ...) dropped, newlines
    and tabs kept."""
    return _CONTROL.sub(lambda m: m.group() if m.group() in "\n\t" else "", text)
