"""Reading users' files and writing outputs the way a shell would.

Reading: regular files only (a FIFO, a device or a directory is refused before a byte
is read), at most MAX_FILE_BYTES (checked before reading, and never more than the limit
plus one byte read), UTF-8 with the first bad byte reported at its line and column.

Writing: `-` is standard output; a symlink is written through to its target; a
non-regular target (a device such as /dev/null, a FIFO) is written to directly; a
regular file is replaced atomically (a temporary file renamed over it) and keeps its
mode; a new file gets the usual mode (0666 less the umask).
"""

from __future__ import annotations

import os
import stat
import sys
import tempfile
from pathlib import Path

from .errors import SpecError

MAX_FILE_BYTES = 1_000_000


def read_text(path: str | os.PathLike[str], limit: int = MAX_FILE_BYTES) -> str:
    """The text of a regular file, or a SpecError saying why it cannot be read."""
    name = os.fspath(path)
    if "\0" in name:
        raise SpecError("a path cannot contain a NUL byte", filename=repr(name))
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise SpecError(f"cannot read file: {exc.strerror or exc}", filename=name) from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise SpecError(
            f"cannot read file: it is {_kind(info.st_mode)}, not a regular file", filename=name
        )
    with os.fdopen(fd, "rb") as f:
        if info.st_size > limit:
            raise _too_large(name, info.st_size, limit)
        try:
            data = f.read(limit + 1)
        except OSError as exc:
            raise SpecError(f"cannot read file: {exc.strerror or exc}", filename=name) from None
    if len(data) > limit:  # it grew while we looked
        raise _too_large(name, len(data), limit)
    return decode(data, name)


def decode(data: bytes, filename: str) -> str:
    """UTF-8 text; invalid bytes are a positioned error at the first of them."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        start = exc.start
        line_start = data.rfind(b"\n", 0, start) + 1
        line = data.count(b"\n", 0, start) + 1
        prefix = data[line_start:start].decode("utf-8", errors="replace")
        end = data.find(b"\n", start)
        shown = data[line_start : end if end >= 0 else len(data)]
        raise SpecError(
            f"invalid UTF-8: byte 0x{data[start]:02x} cannot be decoded",
            filename=filename,
            line=line,
            column=len(prefix) + 1,
            source_line=shown.decode("utf-8", errors="replace"),
            hint="save the file as UTF-8",
        ) from None


def _too_large(name: str, size: int, limit: int) -> SpecError:
    return SpecError(f"file is too large ({size:,} bytes; the limit is {limit:,})", filename=name)


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def write_text(output: str | os.PathLike[str], text: str) -> None:
    """Write `text` to `output` as `> output` would, but never half-written for a
    regular file. Raises OSError."""
    name = os.fspath(output)
    if name == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    if not name:
        raise FileNotFoundError(2, "an empty path names no file", name)
    target = Path(os.path.realpath(name))  # a symlink is written through
    try:
        info = target.stat()
    except FileNotFoundError:
        info = None
    if info is not None and not stat.S_ISREG(info.st_mode):
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(21, "Is a directory", name)
        with open(target, "w", encoding="utf-8", newline="") as f:  # /dev/null, a FIFO
            f.write(text)
        return
    _replace(target, text, None if info is None else stat.S_IMODE(info.st_mode))


def _replace(target: Path, text: str, mode: int | None) -> None:
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.chmod(tmp, _new_file_mode() if mode is None else mode)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _new_file_mode() -> int:
    """0666 less the process umask, as open(2) would give a new file."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask
