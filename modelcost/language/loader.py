"""Loading a spec's files: a source's text read once, its imports followed relative to the
importing file (or to the zoo, for a shipped model's bare name), every chain of them
bounded, each file parsed once.
"""

from __future__ import annotations

import os
from pathlib import Path

from msgspec import Struct, field

import modelcost.language.syntax as s
from modelcost.base.errors import SpecError, did_you_mean
from modelcost.base.files import read_text
from modelcost.base.hooks import translator
from modelcost.base.record import Record
from modelcost.base.resources import shipped_model, shipped_models, specs_dir

from .parse import parse

MAX_IMPORT_DEPTH = 64  # files in one chain of imports (a file importing one importing one …)


class Source(Record, frozen=True):
    filename: str
    lines: tuple[str, ...]

    def error(self, message: str, pos: s.Pos, hint: str | None = None) -> SpecError:
        line_text = self.lines[pos.line - 1] if 0 < pos.line <= len(self.lines) else None
        return SpecError(
            message,
            filename=self.filename,
            line=pos.line,
            column=pos.column,
            hint=hint,
            source_line=line_text,
            width=pos.width,
        )


class LoadedFile(Struct, eq=False):
    """One parsed file and the definitions it can see (its own and its imports')."""

    path: Path | None
    src: Source
    module: s.Module
    models: dict[str, tuple[s.ModelDef, LoadedFile]] = field(default_factory=dict)
    blocks: dict[str, tuple[s.BlockDef, LoadedFile]] = field(default_factory=dict)
    local_models: list[str] = field(default_factory=list)


def _reason(err: SpecError) -> str:
    return err.message.removeprefix("cannot read file: ")


class Loader:
    """Parses files once each and links their imports, refusing cycles. Given a `root`
    (where specs come from pages: the MkDocs plugin, `modelcost site`), it reads no
    file outside it but the shipped specs, and names such a file without opening it."""

    def __init__(self, root: Path | None = None) -> None:
        self._cache: dict[Path, LoadedFile] = {}
        self._stack: list[Path] = []
        self._root = root.resolve() if root is not None else None

    def load_path(
        self, path: Path, src: Source | None = None, pos: s.Pos | None = None
    ) -> LoadedFile:
        try:
            resolved = path.resolve()
        except RuntimeError:  # a symlink loop (Python 3.11 raises RuntimeError)
            if src and pos:
                raise src.error(f"cannot read `{path}`: a symlink loop", pos) from None
            raise SpecError("cannot read file: a symlink loop", filename=str(path)) from None
        except (OSError, ValueError) as exc:  # e.g. a NUL byte in the path
            if src and pos:
                raise src.error(f"bad import path: {exc}", pos) from None
            raise SpecError(f"bad path: {exc}", filename=repr(str(path))) from None
        if self._root is not None and not within(resolved, self._root):
            err = f"`{path}` is outside the project's root, {self._root}"
            hint = ("specs a site builds read files inside its root only: move the file "
                    "there, or widen the root (the plugin's `root:`, site's --root)")  # fmt: skip
            if src and pos:
                raise src.error(err, pos, hint)
            raise SpecError(err, filename=str(path), hint=hint)
        if resolved in self._stack:
            cycle = " → ".join(p.name for p in [*self._stack[self._stack.index(resolved) :]])
            err = f"import cycle: {cycle} → {resolved.name}"
            if src and pos:
                raise src.error(err, pos, "a file cannot import itself, even indirectly")
            raise SpecError(err, filename=str(path))
        if resolved in self._cache:
            return self._cache[resolved]
        if len(self._stack) >= MAX_IMPORT_DEPTH and src and pos:
            hint = "import the files you need from one file instead of in a chain"
            raise src.error(f"imports nest more than {MAX_IMPORT_DEPTH} files deep", pos, hint)
        try:
            text = read_text(path)
        except SpecError as err:
            if src and pos and err.line == 0:  # unreadable: point at the import
                raise src.error(f"cannot read `{path}`: {_reason(err)}", pos) from None
            raise
        _check_kind(path, text)
        translate = translator(path.suffix)  # a Hugging Face config.json: import it first
        if translate is not None:
            text = translate(text, str(path))
        self._stack.append(resolved)
        try:
            unit = self.load_text(text, str(path), resolved)
        finally:
            self._stack.pop()
        self._cache[resolved] = unit
        return unit

    def load_text(self, text: str, filename: str, path: Path | None) -> LoadedFile:
        module = parse(text, filename)
        src = Source(filename, tuple(text.splitlines()))
        unit = LoadedFile(path, src, module)
        base = Path(filename).parent if path else Path()
        for item in module.items:
            if isinstance(item, s.Import):
                if not item.path:
                    raise src.error("empty import path", item.pos)
                target = Path(os.path.normpath(base / item.path))
                imported = self.load_path(_or_shipped(target, item.path), src, item.pos)
                for name, model in imported.models.items():
                    _define(unit.models, name, model, src, item.pos)
                for name, block in imported.blocks.items():
                    _define(unit.blocks, name, block, src, item.pos)
        for item in module.items:
            if isinstance(item, s.ModelDef | s.BlockDef):
                if item.name in unit.models or item.name in unit.blocks:
                    raise src.error(
                        f"`{item.name}` is already defined",
                        item.name_pos,
                        "model and block names share one namespace per file",
                    )
                if isinstance(item, s.ModelDef):
                    unit.models[item.name] = (item, unit)
                    unit.local_models.append(item.name)
                else:
                    unit.blocks[item.name] = (item, unit)
        return unit


def within(resolved: Path, root: Path) -> bool:
    """Whether the resolved path `resolved` lies inside `root` (resolved) or among the
    shipped specs, which any spec may import by name."""
    return resolved.is_relative_to(root) or resolved.is_relative_to(specs_dir().resolve())


def _check_kind(path: Path, text: str) -> None:
    """Refuse, saying what it is, a file that is not a spec: a hardware file (give it to
    --hw) or a rendered HTML page."""
    if path.suffix == ".hw" or text.lstrip().startswith("hardware "):
        raise SpecError("a hardware file, not a spec", filename=str(path),
                        hint=f"give it as --hw {path}")  # fmt: skip
    if text.lstrip()[:15].lower().startswith(("<!doctype", "<html")):
        raise SpecError("an HTML page (a rendered report?), not a spec", filename=str(path),
                        hint="specs are .model files; `modelcost diff` also compares two "
                        "reports saved with --format json")  # fmt: skip


def _or_shipped(path: Path, name: str | Path, given: bool = False) -> Path:
    """`path`, or where it names no file, the shipped model `name` means (a bare name:
    `llama3-70b`, `llama3-70b.model`), found from any folder and in an installed wheel.
    A bare name `given` on the command line that is neither is refused, with the
    nearest shipped name."""
    try:
        if path.exists():
            return path
    except (OSError, ValueError):  # a NUL byte, a name too long: load_path says so
        return path
    found = shipped_model(name)
    if found is not None:
        return found
    bare = str(name)
    if given and bare and "/" not in bare and not bare.endswith((".json", ".model")):
        hint = did_you_mean(bare, shipped_models()) or "`modelcost zoo` lists the shipped models"
        raise SpecError("cannot read file: no such file, nor a shipped model of that name",
                        filename=bare, hint=hint)  # fmt: skip
    return path


def _define(table: dict, name: str, entry: tuple, src: Source, pos: s.Pos) -> None:
    if name in table and table[name][0] is not entry[0]:
        raise src.error(f"import brings a second definition of `{name}`", pos)
    table[name] = entry
