"""Writing outputs as a shell redirect would (issue 20, items 18 and 20): never a file
the user could not open for writing, hard links, owner and mode kept, a trailing slash
refused, a closed or broken standard output reported without a traceback."""

from __future__ import annotations

import os
import pwd
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import MODELS, ROOT, run_cli

from modelcost.base.files import TRAILING_SLASH, write_text

SMALL = ("compile", str(MODELS / "gpt2.model"), "--hw", "h100", "--seq", "64", "--format", "json")


def _nobody() -> pwd.struct_passwd:
    """The unprivileged user the permission tests run as, or a visible skip."""
    if os.geteuid() != 0:
        pytest.skip("needs root, to switch to the unprivileged user 'nobody' (os.setuid)")
    try:
        return pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("there is no user 'nobody' to run the permission tests as")


def _as_nobody(folder: Path, action: Callable[[], None]) -> str:
    """Run `action` in a forked child working in `folder` as user nobody: 'ok', or the
    OSError it raised as 'ClassName: strerror'. (A fresh interpreter cannot be started
    as nobody here: Python may live under root's 0700 home; the fork has it loaded.)"""
    user = _nobody()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        outcome = "ok"
        try:
            os.close(read)
            os.chdir(folder)  # relative paths: no need to search root's 0700 parents
            os.setgroups([])
            os.setgid(user.pw_gid)
            os.setuid(user.pw_uid)
            action()
        except OSError as exc:
            outcome = f"{type(exc).__name__}: {exc.strerror}"
        except BaseException as exc:  # reported, not raised: the child never returns
            outcome = f"unexpected {exc!r}"
        os.write(write, outcome.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        got = f.read().decode()
    os.waitpid(pid, 0)
    return got


@pytest.fixture
def shared(tmp_path: Path) -> Path:
    """A world-writable folder without the sticky bit: a rename there may replace
    anyone's file, so only the open(2) check stops it."""
    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(0o777)
    return folder


def _file(path: Path, text: str, mode: int, uid: int = 0, gid: int = 0) -> Path:
    path.write_text(text)
    os.chown(path, uid, gid)
    path.chmod(mode)
    return path


def test_a_user_cannot_replace_roots_read_only_file(shared: Path) -> None:
    # `echo new > theirs.txt` as nobody: "Permission denied"; so must -o be
    theirs = _file(shared / "theirs.txt", "root's", 0o644)
    got = _as_nobody(shared, lambda: write_text("theirs.txt", "new"))
    assert got == "PermissionError: Permission denied"
    assert theirs.read_text() == "root's" and theirs.stat().st_uid == 0
    assert sorted(p.name for p in shared.iterdir()) == ["theirs.txt"]  # no temporary left


def test_a_user_cannot_replace_their_own_0444_file(shared: Path) -> None:
    user = _nobody()
    mine = _file(shared / "mine.txt", "kept", 0o444, user.pw_uid, user.pw_gid)
    got = _as_nobody(shared, lambda: write_text("mine.txt", "new"))
    assert got == "PermissionError: Permission denied"
    assert mine.read_text() == "kept" and stat.S_IMODE(mine.stat().st_mode) == 0o444


def test_a_user_writing_anothers_writable_file_keeps_its_owner(shared: Path) -> None:
    # a redirect may write root's 0666 file and leaves it root's; a rename would make
    # it nobody's: it is written in place
    theirs = _file(shared / "theirs.txt", "old", 0o666)
    assert _as_nobody(shared, lambda: write_text("theirs.txt", "new")) == "ok"
    info = theirs.stat()
    assert theirs.read_text() == "new" and (info.st_uid, stat.S_IMODE(info.st_mode)) == (0, 0o666)


def test_a_user_writes_their_file_in_a_folder_they_cannot_create_files_in(
    tmp_path: Path,
) -> None:
    # no temporary file can go beside it, yet a redirect would succeed: in place
    user = _nobody()
    folder = tmp_path / "locked"
    folder.mkdir()
    folder.chmod(0o755)
    mine = _file(folder / "mine.txt", "old", 0o644, user.pw_uid, user.pw_gid)
    assert _as_nobody(folder, lambda: write_text("mine.txt", "new")) == "ok"
    assert mine.read_text() == "new"


def test_a_user_replaces_their_own_file_atomically(shared: Path) -> None:
    user = _nobody()
    mine = _file(shared / "mine.txt", "old", 0o640, user.pw_uid, user.pw_gid)
    before = mine.stat().st_ino
    assert _as_nobody(shared, lambda: write_text("mine.txt", "new")) == "ok"
    info = mine.stat()
    assert mine.read_text() == "new" and info.st_ino != before  # renamed over, not truncated
    assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (user.pw_uid, 0o640)


def test_root_writing_a_users_file_keeps_its_owner(tmp_path: Path) -> None:
    user = _nobody()
    out = _file(tmp_path / "report.json", "old", 0o600, user.pw_uid, user.pw_gid)
    assert run_cli(*SMALL, "-o", str(out)).returncode == 0
    info = out.stat()
    assert (info.st_uid, info.st_gid) == (user.pw_uid, user.pw_gid)
    assert stat.S_IMODE(info.st_mode) == 0o600 and out.read_text().startswith("{")


def test_root_may_write_a_0444_file_as_a_redirect_may(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("as root only: a redirect as root may write a 0444 file")
    out = _file(tmp_path / "report.json", "old", 0o444)
    assert run_cli(*SMALL, "-o", str(out)).returncode == 0
    assert out.read_text().startswith("{") and stat.S_IMODE(out.stat().st_mode) == 0o444


def test_a_hard_link_stays_one(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    out.write_text("old")
    other = tmp_path / "other-name.json"
    os.link(out, other)
    r = run_cli(*SMALL, "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert out.stat().st_ino == other.stat().st_ino and out.stat().st_nlink == 2
    assert other.read_text() == out.read_text() and out.read_text().startswith("{")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other-name.json", "report.json"]


@pytest.mark.parametrize("output", ["q.txt/", "sub/q.txt/", "sub/"])
def test_a_trailing_slash_is_refused(tmp_path: Path, output: str) -> None:
    (tmp_path / "sub").mkdir()
    r = run_cli(*SMALL, "-o", f"{tmp_path}/{output}")
    assert r.returncode == 2
    assert r.stderr == f"{tmp_path}/{output}: error: cannot write: {TRAILING_SLASH}\n"
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["sub"]  # no q.txt written


def test_a_trailing_slash_is_refused_by_every_writer(tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError, match=TRAILING_SLASH):
        write_text(f"{tmp_path}/q.txt/", "x")
    assert not (tmp_path / "q.txt").exists()


# ---- 18. standard output closed, or a reader that went away


@pytest.mark.parametrize(
    "args",
    [
        ["compile", str(MODELS / "gpt2.model"), "--hw", "h100", "--seq", "64", "-o", "-"],
        ["compile", str(MODELS / "gpt2.model"), "--hw", "h100", "--seq", "64"],
        ["check", str(MODELS / "gpt2.model")],  # print() would drop the text silently
        ["fmt", str(MODELS / "gpt2.model")],
        ["schema"],
    ],
    ids=["dash", "default", "check", "fmt", "schema"],
)
def test_a_closed_standard_output_is_exit_2_with_a_message(args: list[str]) -> None:
    r = subprocess.run(
        ["sh", "-c", '"$0" -m modelcost "$@" >&-', sys.executable, *args],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert (r.returncode, r.stderr) == (
        2,
        "modelcost: error: cannot write: standard output is closed\n",
    )


def test_a_closed_standard_output_does_not_stop_writing_a_file(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    r = subprocess.run(
        ["sh", "-c", '"$0" -m modelcost "$@" >&-', sys.executable, *SMALL, "-o", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert (r.returncode, r.stderr) == (0, "") and out.read_text().startswith("{")


@pytest.mark.parametrize("buffered", [True, False], ids=["buffered", "unbuffered"])
def test_a_reader_that_went_away_is_a_quiet_exit(buffered: bool) -> None:
    # `modelcost params x | head -0`: no traceback, no "Exception ignored" at exit (it
    # came from flushing a buffered stdout at shutdown, exit 120)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if not buffered:
        env["PYTHONUNBUFFERED"] = "1"
    read, write = os.pipe()
    os.close(read)  # nobody will read: every write is EPIPE
    try:
        r = subprocess.run(
            [sys.executable, "-m", "modelcost", "params", str(MODELS / "gpt2.model")],
            cwd=ROOT, stdout=write, stderr=subprocess.PIPE, text=True, env=env, timeout=60,
            check=False,
        )  # fmt: skip
    finally:
        os.close(write)
    assert (r.returncode, r.stderr) == (0, "")


def test_a_trailing_slash_is_refused_for_a_page_and_its_charts(tmp_path: Path) -> None:
    # Path("q.md/").name is "q.md": the page and its charts must not be written there
    out = f"{tmp_path}/q.md/"
    r = run_cli("compile", str(MODELS / "gpt2.model"), "--hw", "h100", "--seq", "64",
                "--format", "md", "-o", out)  # fmt: skip
    assert (r.returncode, r.stderr) == (2, f"{out}: error: cannot write: {TRAILING_SLASH}\n")
    assert list(tmp_path.iterdir()) == []


def test_import_and_calibrate_report_a_write_they_cannot_do(tmp_path: Path) -> None:
    # a folder in the way of the output: exit 2 and a message, never a traceback
    (tmp_path / "taken").mkdir()
    out = str(tmp_path / "taken")
    config = ROOT / "tests" / "data" / "hf-configs" / "llama3-8b.json"
    r = run_cli("import", str(config), "-o", out)
    assert (r.returncode, r.stderr) == (2, f"{out}: error: cannot write: Is a directory\n")
    measured = ROOT / "tests" / "data" / "measured-kernels.json"
    r = run_cli("calibrate", str(measured), "--hw", "h100", "-o", out)
    assert r.returncode == 2 and r.stderr == f"{out}: error: cannot write: Is a directory\n"
    assert "wrote" not in r.stdout
