"""Every command the docs show runs (issue 38, item 8): each `modelcost ...` line of a
code block in README.md and docs/*.md, and each inline `modelcost ...` span that is a
whole command, run as a reader pastes it from the repository's root, exits 0.

A command that names a file the reader writes first (`mine.model`, `config.json`) or a
placeholder (`SPEC`, `NAME`) is not runnable as written: such files and words are listed
here by name, so a command with a mistyped path still fails.
"""

import re
import shlex
import shutil
from pathlib import Path

import pytest
from conftest import ROOT, run_cli

# files a page asks the reader to write (or to have) before the command
WRITTEN_BY_THE_READER = {
    "mine.model", "my.model", "bad.model", "config.json", "base.json", "branch.json",
    "A.model", "B.model", "deepseek-r1-fp8.model", "deepseek-r1-nvfp4.model",
    "llama3.1-405b-nvfp4.model",
}  # fmt: skip
# a span of one command word names the command (`modelcost site` writes ...): prose
WHOLE_ALONE = {"zoo", "schema", "--help"}


def _pages() -> list[Path]:
    docs = [p for p in sorted((ROOT / "docs").rglob("*.md")) if "reference" not in p.parts]
    return [ROOT / "README.md", *docs]


def _commands(page: Path) -> list[str]:
    text = page.read_text(encoding="utf-8")
    found = []
    for block in re.findall(r"```\w*\n(.*?)```", text, re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        found += [line.strip().removeprefix("$ ") for line in joined.splitlines()
                  if line.strip().removeprefix("$ ").startswith("modelcost ")]  # fmt: skip
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    found += [" ".join(span.split()) for span in re.findall(r"`(modelcost [^`]+)`", prose)]
    return found


def _runnable(command: str) -> bool:
    words = shlex.split(command.split("#")[0])[1:]
    if len(words) == 1 and words[0] not in WHOLE_ALONE:
        return False  # the command's name in a sentence
    placeholder = any(w.isupper() or "[" in w or w in ("...", "…") or "|" in w for w in words)
    return not placeholder and not any(Path(w).name in WRITTEN_BY_THE_READER for w in words)


CASES = [(page, c) for page in _pages() for c in _commands(page) if _runnable(c)]


def test_the_docs_show_commands_and_the_list_is_honest() -> None:
    assert len(CASES) >= 40  # 41 when written: the list did not silently empty
    everything = [c for page in _pages() for c in _commands(page)]
    skipped = {Path(w).name for c in everything if not _runnable(c)
               for w in shlex.split(c.split("#")[0])}  # fmt: skip
    assert skipped >= WRITTEN_BY_THE_READER  # each name is still in some page


@pytest.mark.slow
@pytest.mark.parametrize(("page", "command"), CASES, ids=[f"{p.name}:{c[:60]}" for p, c in CASES])
def test_every_command_in_the_docs_runs(page: Path, command: str, tmp_path: Path) -> None:
    # from a copy of the root's inputs, so what a command writes lands in tmp_path
    for name in ("specs", "tests"):
        (tmp_path / name).symlink_to(ROOT / name)
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    if "--calibrate h100-calibration.json" in command:  # precision.md writes it first
        words = "calibrate tests/data/tracelens-h100/*.csv --hw h100 -o h100-calibration.json"
        assert run_cli(*_expand(words, tmp_path), cwd=tmp_path).returncode == 0
    args = _expand(command.split("#")[0].removeprefix("modelcost "), tmp_path)
    r = run_cli(*args, cwd=tmp_path)
    assert r.returncode == 0, f"{page.name}: {command}\n{r.stderr}"


def _expand(command: str, cwd: Path) -> list[str]:
    out: list[str] = []
    for word in shlex.split(command):
        matches = sorted(str(p.relative_to(cwd)) for p in cwd.glob(word)) if "*" in word else []
        out += matches or [word]
    return out
