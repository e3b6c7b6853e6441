"""Escaping of text that came from a user's file, for each text output format.

Every format for people (not JSON, which carries the data as it is) first passes such
text (a title, a name, a file name) through `clean` (modelcost/base/visible.py, the one
sanitiser, which error messages share): on one line, nothing invisible, reordering or
XML-invalid.

Then, per format. Markdown (`md`): rendered by Python-Markdown (MkDocs, with attr_list,
legacy_attrs, md_in_html, pymdownx) or as GitHub-flavoured Markdown, an escaped string
yields exactly its characters: no HTML element, no link or autolink, no emphasis, no
attribute list, no math, no extra table cell or row. SVG (`xml`): well-formed XML,
escaped. HTML: jinja's autoescape of the cleaned text (render/env.py). Terminal text:
no control characters (an ESC in a title must not drive the user's terminal).
"""

from __future__ import annotations

import re
from html import escape
from urllib.parse import quote

from modelcost.base.visible import clean

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# backslash-escaped: the characters that make emphasis, code and links
# (`_` only where it could open or close emphasis: not inside a word like `gate_proj`)
_BACKSLASHED = re.compile(r"([\\`*\[\]]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")
# entities where Python-Markdown has no backslash escape: `|` splits table cells, `~`
# strikes through in GFM, `{` and `}` open and close attribute lists (attr_list,
# legacy_attrs: `{: onclick=...}`) and critic marks, `$` math (GitHub, arithmatex); and
# pymdownx's inline marks: `^` (caret), `==` (mark), `++` (keys), `:name:` (emoji, an
# image from a CDN)
_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_ENTITY = re.compile(r"[&<>|~{}$^]|(?<=\+)\+|\+(?=\+)|(?<==)=|=(?==)|:(?=[\w+-])")
_AUTOLINK = re.compile(r"(?<=[A-Za-z0-9])(:)(?=//)|(?i:(?<=\bwww)(\.))")
# what would start a heading, list, rule or setext underline at the start of a line
_BLOCK_START = re.compile(r"^(\s*)([#+\-=](?=\s|$|[#+\-=])|\d{1,9}(?=[.)](?:\s|$)))")
ZERO_WIDTH_SPACE = "\u200b"


def xml(text: object) -> str:
    """Text from a user's file inside an SVG (element text or a quoted attribute)."""
    return escape(clean(text))


class Markdown(str):
    """Markdown that is already escaped (or built by us): templates insert it as is."""

    __slots__ = ()


def md(text: object) -> Markdown:
    """`text` as Markdown that renders to exactly its characters (one line)."""
    if isinstance(text, Markdown):
        return text
    s = _BACKSLASHED.sub(r"\\\1", clean(text))
    s = _ENTITY.sub(lambda m: _ENTITIES.get(m.group()) or f"&#{ord(m.group())};", s)
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
    named `javascript:x` is a relative link to `javascript%3Ax`). A relative link is
    a file name, every character its own: `%` and `#` encoded too (`x#y.md` is not `x`,
    `%2e%2e.md` not `...md`). Encode once: give it the name, not an encoded link."""
    scheme, sep, rest = href.partition("://")
    if sep and scheme in ("http", "https"):
        return f"{scheme}://{quote(rest, safe='/:@%#?=&+,;~')}"
    return quote(href, safe="/")


def terminal(text: str) -> str:
    """Text for a terminal: control characters (ESC, BEL, CR, ...) dropped, newlines
    and tabs kept."""
    return _CONTROL.sub(lambda m: m.group() if m.group() in "\n\t" else "", text)
