"""Reading users' files and writing outputs the way a shell would.

Reading: regular files only (a FIFO, a device or a directory is refused before a byte
is read), at most MAX_FILE_BYTES (checked before reading, and never more than the limit
plus one byte read), UTF-8 with the first bad byte reported at its line and column.

Writing: `-` is standard output (closed, `>&-`: an error); a path ending in `/` is
refused; a symlink is written through to its target; a non-regular target (a device
such as /dev/null, a FIFO) is written to directly. An existing regular file is written
only if a redirect could open it for writing (the same open(2) check), and is replaced
atomically (a temporary file renamed over it, with its mode and owner) unless the rename
would change it otherwise: a hard-linked file, another's file the new one cannot be
given, a folder the user cannot create files in; then it is truncated and written in
place as a redirect does, from text already rendered. A new file is written atomically
and gets the usual mode (0666 less the umask).
"""

from __future__ import annotations

import errno
import io
import os
import secrets
import shutil
import stat
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from .errors import SpecError

MAX_FILE_BYTES = 1_000_000
TRAILING_SLASH = "a path ending in / names a directory, not a file"
_SEPARATORS = tuple(s for s in (os.sep, os.altsep) if s)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def read_text(path: str | os.PathLike[str], limit: int = MAX_FILE_BYTES) -> str:
    """The text of a regular file, or a SpecError saying why it cannot be read."""
    name = os.fspath(path)
    if "\0" in name:
        raise SpecError("a path cannot contain a NUL byte", filename=repr(name))
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | _CLOEXEC)
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
    """UTF-8 text, without the byte-order mark an editor may put first (Notepad's);
    invalid bytes are a positioned error at the first of them."""
    try:
        return data.removeprefix(b"\xef\xbb\xbf").decode("utf-8")
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
    regular file the rename can replace unchanged. Raises OSError."""
    name = os.fspath(output)
    if name == "-":
        write_stdout(text)
        return
    check_output(name)
    data = text.encode("utf-8")  # everything that can fail before a byte is written
    target = os.path.realpath(name) if os.path.islink(name) else name  # written through
    try:
        info = os.stat(target)
    except FileNotFoundError:
        _replace(target, data, None)  # a new file
        return
    if stat.S_ISDIR(info.st_mode):
        raise IsADirectoryError(errno.EISDIR, "Is a directory", name)
    if not stat.S_ISREG(info.st_mode):  # /dev/null, a FIFO: as a redirect, blocking
        with open(target, "wb") as f:
            f.write(data)
        return
    # what a redirect may open for writing, and nothing else (root may open a 0444
    # file; a user may not open root's 0644 one); O_NONBLOCK: no hang if it became a FIFO
    fd = os.open(target, os.O_WRONLY | os.O_NONBLOCK | _CLOEXEC)
    try:
        info = os.fstat(fd)
        regular = stat.S_ISREG(info.st_mode) and info.st_nlink == 1  # a hard link stays one
        if not (regular and _replace(target, data, info)):
            _write_in_place(fd, data)
    finally:
        os.close(fd)


@contextmanager
def streamed(output: str | None) -> Iterator[IO[bytes]]:
    """A binary file to write a long output into as it is made: standard output (None or
    `-`), a special file (/dev/null, a FIFO) written as it goes, or, for a regular
    file, a temporary file beside it renamed over it when the block ends without an
    error and removed when it raises (nothing half-written). Raises OSError."""
    if output in (None, "-"):
        if sys.stdout is None:
            raise StdoutClosedError
        sys.stdout.flush()
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    check_output(output)
    target = os.path.realpath(output) if os.path.islink(output) else output
    try:
        info: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        info = None
    if info is not None and stat.S_ISDIR(info.st_mode):
        raise IsADirectoryError(errno.EISDIR, "Is a directory", output)
    if info is not None and not stat.S_ISREG(info.st_mode):
        with open(target, "wb") as f:
            yield f
        return
    fd, tmp = _temporary(target)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            os.fchmod(f.fileno(), _new_file_mode() if info is None else stat.S_IMODE(info.st_mode))
            if info is not None and not _same_owner(f.fileno(), info):
                f.flush()  # another's file: written through, as a redirect would
                with open(tmp, "rb") as made, open(target, "r+b") as through:
                    through.truncate(0)
                    shutil.copyfileobj(made, through)
                Path(tmp).unlink()
                return
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def check_output(name: str) -> None:
    """Refuse an output path that can name no file to write, with the OSError writing
    it raises: empty, or ending in `/` (`-o q.txt/` is not `q.txt`)."""
    if not name:
        raise FileNotFoundError(errno.ENOENT, "an empty path names no file", name)
    if name.endswith(_SEPARATORS):
        raise IsADirectoryError(errno.EISDIR, TRAILING_SLASH, name)


class StdoutClosedError(OSError):
    """Standard output was closed before modelcost started (`>&-`)."""

    def __init__(self) -> None:
        super().__init__(errno.EBADF, "standard output is closed", "-")


class ClosedStdout(io.TextIOBase):
    """What stands for a closed standard output: every write is a StdoutClosedError
    (Python's own `None` there would make `print` drop text silently)."""

    def writable(self) -> bool:
        return True

    def write(self, _s: str) -> int:
        raise StdoutClosedError


def write_stdout(text: str) -> None:
    """`text` on standard output, flushed; StdoutClosedError if it is closed."""
    if sys.stdout is None:
        raise StdoutClosedError
    sys.stdout.write(text)
    sys.stdout.flush()


def _replace(target: str, data: bytes, old: os.stat_result | None) -> bool:
    """Write `data` to a temporary file beside `target` and rename it over `target`,
    with `old`'s mode and owner; False (nothing changed) when the new file could not
    have them (another's file, a folder the user cannot create files in, where `old`
    exists): the caller then writes in place, as a redirect does."""
    try:
        fd, tmp = _temporary(target)
    except PermissionError:
        if old is None:
            raise
        return False
    try:
        with os.fdopen(fd, "wb") as f:
            if old is not None and not _same_owner(f.fileno(), old):
                Path(tmp).unlink()
                return False
            f.write(data)
            os.fchmod(f.fileno(), _new_file_mode() if old is None else stat.S_IMODE(old.st_mode))
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return True


def _temporary(target: str) -> tuple[int, str]:
    """A new 0600 file beside `target`, open for writing, and its name: relative where
    `target` is (as a redirect, it needs no search permission above the working folder,
    which `tempfile` would by making the path absolute)."""
    folder, base = os.path.split(target)
    for _ in range(100):
        name = os.path.join(folder, f".{base}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _CLOEXEC, 0o600), name
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name", target)


def _same_owner(fd: int, old: os.stat_result) -> bool:
    """Whether the file open at `fd` is (or could be made) owned as `old` is."""
    mine = os.fstat(fd)
    if (mine.st_uid, mine.st_gid) == (old.st_uid, old.st_gid):
        return True
    try:
        os.fchown(fd, old.st_uid, old.st_gid)  # root may; a user may change the group
    except PermissionError:
        return False
    return True


def _write_in_place(fd: int, data: bytes) -> None:
    """Truncate and write through an open file, as a redirect does: links, owner and
    mode stay as they are."""
    os.ftruncate(fd, 0)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _new_file_mode() -> int:
    """0666 less the process umask, as open(2) would give a new file."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask
