"""The MkDocs plugin's cache (`.modelcost-cache/`): compiled reports, read back as
untrusted input.

An entry is one page's reports (a ReportSet's JSON) under the key of what they were
compiled from: modelcost's own code (`code_digest`: the package's source, templates and
grammar), the resolved spec, the target and the workload. The plugin renders a page
again from the reports it reads, so nothing in the cache reaches the site except
through the renderers and their escaping, and no page can go missing from it.

Reading: an entry is used only if it is a regular file (opened without following a
symlink and without waiting on a FIFO; a directory, a device, a socket is refused), at
most MAX_ENTRY_BYTES, and JSON of exactly `{"key", "reports"}` whose key matches and
whose reports validate against the report schema. Anything else is a miss, never an
error: the page is compiled again. Writing: a temporary file beside the entry renamed
over it, so a reader never sees half an entry and a symlink is replaced, never written
through.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path

from modelcost.base.frozen import Frozen
from modelcost.base.resources import data_dir
from modelcost.ir.report import Report, ReportSet

MAX_ENTRY_BYTES = 64 * 2**20  # the largest shipped model's page is ~0.2 MB

_PACKAGE = Path(__file__).resolve().parent.parent  # modelcost/, this file in modelcost/publish


class Entry(Frozen):
    """One cache file."""

    key: str
    reports: ReportSet


def code_digest(folders: Iterable[tuple[str, Path, str]]) -> str:
    """A SHA-256 over every file matching each (label, folder, pattern) below its folder:
    its path under the label and its bytes. Compiled bytecode is not the source."""
    h = hashlib.sha256()
    for label, folder, pattern in folders:
        files = sorted(
            p for p in folder.rglob(pattern) if p.is_file() and "__pycache__" not in p.parts
        )
        for path in files:
            data = path.read_bytes()
            name = f"{label}/{path.relative_to(folder).as_posix()}"
            h.update(f"{name}\0{len(data)}\0".encode())
            h.update(data)
    return h.hexdigest()


def modelcost_digest() -> str:
    """The digest of the modelcost that is running: its package, templates and grammar."""
    return code_digest(
        (
            ("modelcost", _PACKAGE, "*.py"),
            ("templates", data_dir("templates"), "*"),
            ("grammar", data_dir("grammar"), "*"),
        )
    )


def entry_key(*inputs: str) -> str:
    """The key of an entry compiled from `inputs` (each a string, in a fixed order)."""
    h = hashlib.sha256()
    for text in inputs:
        data = text.encode()
        h.update(f"{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


def read_entry(path: Path, key: str) -> tuple[Report, ...] | None:
    """The reports cached at `path` under `key`, or None for any doubt about them."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)  # a symlink (or a loop of them): ELOOP
    except OSError:
        return None  # absent, a symlink, unreadable
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_ENTRY_BYTES:
        os.close(fd)  # a directory, a FIFO, a device; or too large to be ours
        return None
    with os.fdopen(fd, "rb") as f:
        try:
            data = f.read(MAX_ENTRY_BYTES + 1)
        except OSError:
            return None
    if len(data) > MAX_ENTRY_BYTES:  # it grew while we looked
        return None
    try:
        entry = Entry.model_validate_json(data)
    except ValueError:  # not JSON, not an entry, not reports (pydantic's errors included)
        return None
    return entry.reports.reports if entry.key == key else None


def write_entry(path: Path, key: str, reports: Iterable[Report]) -> None:
    """Cache `reports` at `path` under `key`, atomically. Raises OSError."""
    entry = Entry.trusted(key=key, reports=ReportSet.trusted(reports=tuple(reports)))
    data = entry.model_dump_json().encode()
    if len(data) > MAX_ENTRY_BYTES:
        return  # it would never be read back
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)  # over a symlink: the link is replaced, its target untouched
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
