"""The fenced code blocks of a Markdown page, found as CommonMark finds them, in one pass
over its lines: the MkDocs plugin's blocks are the fences whose info string is
`modelcost`. One inside a longer fence (a page showing how to write a block) is that
fence's text, shown, never run.

CommonMark's rules kept: a fence is three or more backticks or tildes indented at most
three spaces; a backtick fence's info string holds no backtick; a fence closes at a line
of the same character, at least as long, indented at most three spaces and followed by
spaces or tabs only; a fence never closed runs to the end of the page. Not kept: the
scanner sees the page's top level only, not fences inside list items or block quotes.
"""

from __future__ import annotations

import re

from modelcost.base.record import Record

BLOCK_INFO = "modelcost"
_OPEN = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")
_CLOSE = re.compile(r" {0,3}(`{3,}|~{3,})[ \t]*")


class Block(Record, frozen=True):
    """A fenced block: its fence (```` ``` ```` or longer, or tildes), the 0-based indexes
    of its opening and closing fence lines (end is None for a fence never closed) and the
    lines between them."""

    fence: str
    start: int
    end: int | None
    body: tuple[str, ...]


def fenced_blocks(lines: list[str], info: str = BLOCK_INFO) -> list[Block]:
    """The fences of `lines` whose info string is `info`, in page order."""
    blocks: list[Block] = []
    mark, length, start = "", 0, -1  # the open fence; mark "" while none is open
    for i, line in enumerate(lines):
        if not mark:
            m = _OPEN.fullmatch(line)
            if m is None or (m[1][0] == "`" and "`" in m[2]):  # the latter: inline code
                continue
            mark, length, start = m[1][0], len(m[1]), i
        elif (m := _CLOSE.fullmatch(line)) and m[1][0] == mark and len(m[1]) >= length:
            if _info(lines[start]) == info:
                blocks.append(Block(mark * length, start, i, tuple(lines[start + 1 : i])))
            mark = ""
    if mark and _info(lines[start]) == info:
        blocks.append(Block(mark * length, start, None, tuple(lines[start + 1 :])))
    return blocks


def _info(fence: str) -> str:
    """The info string of an opening fence line."""
    return fence.strip().lstrip(fence.strip()[0]).strip()
