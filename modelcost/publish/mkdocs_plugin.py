"""The MkDocs plugin: cost reports compiled at build time, as pages of the site and as
blocks inside any page.

    plugins:
      - modelcost:
          specs: [models/*.model]        # relative to mkdocs.yml
          hardware: [mi300x, h200]
          diffs: ["llama3-8b:llama3-70b"]
          folder: costs                  # where the pages and their index go

adds `costs/index.md` (the model × hardware grid and table), a page per model and target
and each diff, with their charts as SVG files, exactly what `modelcost site` writes. A
page's reports are cached (`cache`, beside mkdocs.yml) under the key of their inputs
(modelcost's own code, the resolved spec, the target, the workload): a rebuild compiles
only the pages whose inputs changed and renders every page from its reports, read back
as untrusted input (mkdocs_cache.py). And a fenced block in any page embeds one report,
a table of it, or a diff, with inline charts:

    ```modelcost
    spec: models/llama3-8b.model
    hw: mi300x
    show: report            # report, summary, kinds or diff (then `vs: B.model`)
    phase: prefill,decode
    batch: 8
    estimate: kernels       # or roofline (the default); `calibrate: FILE` implies kernels
    engine: trtllm          # whose custom all-reduce an inference step's collectives run as
    ```

Paths, in the configuration (`specs`, a `hardware` file) and in a block (`spec`, `vs`,
`hw`), are relative to mkdocs.yml's folder, never to the current directory; a `hardware`
or `hw` value that names no file there is a shipped target's name. A block is a fence
whose info string is `modelcost` (mkdocs_fences.py); one inside a longer fence is shown,
not run. A mistake in a block stops the build at its page and line.

mkdocs is not a dependency of modelcost: this module is imported by MkDocs only.
"""

from __future__ import annotations

import glob
import re
from pathlib import Path
from typing import Any

from mkdocs.config import base
from mkdocs.config import config_options as c
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.plugins import BasePlugin, get_plugin_logger
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

from modelcost.analyses.sweeps import check_calibration
from modelcost.base.errors import SpecError, did_you_mean
from modelcost.base.record import replace
from modelcost.base.resources import templates_dir
from modelcost.base.settings import DEFAULT_ESTIMATE, ESTIMATE_MODES, estimate_mode
from modelcost.base.version import __version__
from modelcost.estimate.calibration import load_calibration
from modelcost.estimate.costing import costing
from modelcost.estimate.engines import DEFAULT_ENGINE, ENGINES
from modelcost.ir.graph import DEFAULT_BATCH, Parallel, Phase, Workload
from modelcost.language.loader import within
from modelcost.language.resolve import load_spec
from modelcost.lowering.validate import check_reads, for_phase, given_options
from modelcost.targets.hardware import Hardware, hardware_dir, load_hardware, shipped_hardware

from .mkdocs_cache import entry_key, modelcost_digest, read_entry, write_entry
from .mkdocs_fences import fenced_blocks
from .site import SiteOptions, SitePage, assemble, render_page, site_page

log = get_plugin_logger(__name__)
FORMATS = ("md",)  # MkDocs renders the Markdown pages itself
SHOWS = ("report", "summary", "kinds", "diff")
BLOCK_KEYS = ("spec", "hw", "show", "phase", "batch", "seq", "context", "vs", "estimate",
              "calibrate", "engine")  # fmt: skip


# what the plugin's pages and blocks start with, and the style sheet that lays out what
# sits beside it in any theme (templates/mkdocs_pages.css)
PAGE_MARK = '<div class="modelcost-page"></div>'
STYLE_SHEET = "modelcost.css"


class ModelcostConfig(base.Config):
    specs = c.ListOfItems(c.Type(str), default=[])
    hardware = c.ListOfItems(c.Type(str), default=["mi300x"])
    diffs = c.ListOfItems(c.Type(str), default=[])
    batch = c.Type(int, default=1)
    seq = c.Optional(c.Type(int))
    context = c.Optional(c.Type(int))
    tp = c.Type(int, default=1)  # the layout of every page (as `modelcost site --tp ...`)
    sp = c.Type(bool, default=False)
    dp = c.Type(int, default=1)
    ep = c.Type(int, default=1)
    folder = c.Type(str, default="costs")
    cache = c.Type(str, default=".modelcost-cache")
    # no spec, import, hardware or calibration file outside it is read (nor quoted in an
    # error), but the shipped models and targets: relative to mkdocs.yml, default its folder
    root = c.Type(str, default=".")
    # as `modelcost site --estimate --calibrate` (a calibration file beside mkdocs.yml)
    estimate = c.Choice(ESTIMATE_MODES, default=DEFAULT_ESTIMATE)
    calibrate = c.Optional(c.Type(str))
    engine = c.Choice(ENGINES, default=DEFAULT_ENGINE)  # as `modelcost site --engine`


class ModelcostPlugin(BasePlugin[ModelcostConfig]):
    def on_config(self, config: MkDocsConfig) -> MkDocsConfig:
        self.root = Path(config.config_file_path or ".").resolve().parent
        self.confine = (self.root / self.config.root).resolve()
        self.rebuilt = self.reused = 0
        self.code = modelcost_digest()  # once a build: an edit of modelcost recompiles
        config.extra_css.append(f"{self.config.folder.strip('/')}/{STYLE_SHEET}")
        return config

    # ---- the pages
    def on_files(self, files: Files, *, config: MkDocsConfig) -> Files:
        cfg = self.config
        try:
            layout = Parallel(tp=cfg.tp, sp=cfg.sp, dp=cfg.dp, ep=cfg.ep)
        except ValueError as err:
            raise PluginError(f"modelcost: {err}") from None
        try:
            estimate, calibration = self._estimation(cfg.estimate, cfg.calibrate)
            how = costing(estimate=estimate, calibration=calibration, engine=cfg.engine)
            options = SiteOptions(batch=cfg.batch, seq=cfg.seq, context=cfg.context,
                                  parallel=layout, costing=how)  # fmt: skip
            specs = self._specs()
            targets = [self._hardware(h) for h in cfg.hardware]
            check_calibration(calibration, targets)  # as `modelcost site` does
            diffs = [self._pair(d) for d in cfg.diffs]
            pages = [self._page(name, spec, hw, options) for name, spec in specs for hw in targets]
            site = assemble(pages, [n for n, _ in specs], targets, diffs, options, FORMATS)
        except (SpecError, ValueError) as err:  # ValueError: a workload the config sets
            raise PluginError(f"modelcost: {err}") from None
        folder = cfg.folder.strip("/")
        for rel, text in sorted(site.items()):
            marked = f"{PAGE_MARK}\n\n{text}" if rel.endswith(".md") else text
            files.append(File.generated(config, f"{folder}/{rel}", content=marked))
        css = (templates_dir() / "mkdocs_pages.css").read_text(encoding="utf-8")
        files.append(File.generated(config, f"{folder}/{STYLE_SHEET}", content=css))
        log.info(f"{self.rebuilt} pages compiled, {self.reused} unchanged (cache {cfg.cache})")
        return files

    def _specs(self) -> list[tuple[str, Any]]:
        paths: list[Path] = []
        for pattern in self.config.specs:
            found = sorted(glob.glob(str(self.root / pattern)))
            if not found:
                raise SpecError(f"`specs` pattern {pattern!r} matches no file",
                                filename=str(self.root / "mkdocs.yml"))  # fmt: skip
            paths.extend(Path(p) for p in found)
        return [(p.stem, load_spec(p, root=self.confine)) for p in paths]

    def _estimation(self, estimate: str, calibrate: str | None, hw: Hardware | None = None):
        """(the estimate mode, the calibration read relative to mkdocs.yml): a
        calibration implies the kernels' estimate, as on the command line."""
        if calibrate is None:
            return estimate_mode(estimate), None
        calibration = load_calibration(self._inside(self.root / calibrate), hw)
        return estimate_mode(estimate, calibration), calibration

    def _inside(self, path: Path) -> Path:
        """`path`, if it lies inside the root (`root:`); else a SpecError naming it, the
        file unread."""
        if not within(path.resolve(), self.confine):
            raise SpecError(f"`{path}` is outside the project's root, {self.confine}",
                            filename=str(self.root / "mkdocs.yml"),
                            hint="move the file there, or widen `root:`")  # fmt: skip
        return path

    @staticmethod
    def _pair(text: str) -> tuple[str, str]:
        a, sep, b = text.partition(":")
        if not sep or not a or not b:
            raise SpecError(f"`diffs` takes A:B (file stems), got {text!r}", filename="mkdocs.yml")
        return a, b

    def _hardware(self, value: str, src: str = "", line: int = 0, raw: str = "") -> Hardware:
        """A target by file, relative to mkdocs.yml as a spec is, or by a shipped target's
        name; `src`, `line` and `raw`: where a block names it."""
        path = self.root / value
        if path.suffix == ".hw" or path.exists():
            return load_hardware(self._inside(path))
        names = shipped_hardware()
        if value in names:
            return load_hardware(hardware_dir() / f"{value}.hw")
        raise SpecError(
            f"unknown hardware `{value}`: no shipped target and no file {path}",
            filename=src or str(self.root / "mkdocs.yml"),
            line=line,
            column=raw.find(value) + 1,
            source_line=raw,
            width=len(value),
            hint=did_you_mean(value, names) or f"shipped: {', '.join(names)}",
        )

    def _page(self, name: str, spec, hw: Hardware, options: SiteOptions) -> SitePage:
        """One page, rendered from its cached reports when their inputs are this page's,
        else compiled (and cached)."""
        inputs = (self.code, __version__, spec.model_dump_json(), hw.model_dump_json())
        key = entry_key(*inputs, repr(options))
        path = self.root / self.config.cache / f"{name}-{hw.name}.json"
        reports = read_entry(path, key)
        if reports is not None and all(
            r.model.name == spec.name and r.hardware.name == hw.name for r in reports
        ):
            self.reused += 1
            return render_page(name, hw, reports, FORMATS)
        page = site_page(name, spec, hw, options, FORMATS)
        self.rebuilt += 1
        try:
            write_entry(path, key, page.reports)
        except OSError as err:  # the build goes on; the next compiles this page again
            log.warning(f"modelcost: cannot cache {path}: {err.strerror or err}")
        return page

    # ---- blocks inside pages
    # MkDocs passes every event argument by keyword: the signature is its API
    def on_page_markdown(self, markdown: str, *, page: Page, config: MkDocsConfig, files: Files):  # noqa: ARG002
        return self.expand(markdown, page.file.src_uri)

    def expand(self, markdown: str, src: str) -> str:
        """`markdown` with each of its blocks replaced by what it shows."""
        lines = markdown.split("\n")
        out: list[str] = []
        done = 0  # lines[:done] are in `out`
        for block in fenced_blocks(lines):
            fence = block.start + 1  # the opening fence's line
            if block.end is None:
                raise PluginError(f"{src}:{fence}: modelcost block: its fence is never "
                                  f"closed (end it with a line of {block.fence})")  # fmt: skip
            out += lines[done : block.start]
            try:
                out.append(f"{PAGE_MARK}\n\n{self._block(block.body, src, fence)}")
            except SpecError as err:  # its source line, caret and hint too
                raise PluginError(f"{src}:{fence}: modelcost block: {err.render()}") from None
            done = block.end + 1
        return "\n".join(out + lines[done:])

    def _block(self, body: tuple[str, ...], src: str, fence: int) -> str:
        from modelcost.roofline.compile import compile_report

        keys, lines, raws = _block_keys(body, src, fence)
        show, phases = _block_checked(keys, lines, src, fence)
        hw = self._hardware(keys["hw"], src, lines["hw"], raws["hw"])
        estimate, calibration = self._estimation(
            keys.get("estimate", DEFAULT_ESTIMATE), keys.get("calibrate"), hw
        )
        how = costing(estimate=estimate, calibration=calibration,
                      engine=keys.get("engine", DEFAULT_ENGINE))  # fmt: skip

        def number(name: str) -> int | None:
            return _block_int(keys, lines, src, name)

        def reports(path: str) -> list:
            spec = load_spec(self.root / path, root=self.confine)
            batch = number("batch") or DEFAULT_BATCH
            asked = Workload(Phase(phases[0]), batch, number("seq"), number("context"))
            check_reads([Phase(p) for p in phases], given_options(asked))
            return [compile_report(spec, hw, for_phase(replace(asked, phase=Phase(p))), how=how)
                    for p in phases]  # fmt: skip

        a = reports(keys["spec"])
        return _shown(show, a, reports(keys["vs"]) if show == "diff" else None)


def _demote(markdown: str) -> str:
    """A report inside a page: its headings one level down (only our headings start a
    line with `#`: user text is escaped)."""
    return re.sub(r"^(#{1,5}) ", r"#\1 ", markdown, flags=re.M)


def _block_keys(body: tuple[str, ...], src: str,
                fence: int) -> tuple[dict[str, str], dict[str, int], dict[str, str]]:  # fmt: skip
    """A block's `key: value` lines (comments after `#`): each key's value, its page
    line and its text; a line that is not one, or a key without a value, is an error
    at its line."""
    keys: dict[str, str] = {}
    lines: dict[str, int] = {}  # the page line of each key
    raws: dict[str, str] = {}  # and its text
    for n, raw in enumerate(body, fence + 1):
        text = raw.split("#", 1)[0].strip()
        if not text:
            continue
        name, sep, value = text.partition(":")
        name = name.strip()
        if not sep or name not in BLOCK_KEYS:
            keys_known = ", ".join(BLOCK_KEYS)
            raise PluginError(
                f"{src}:{n}: modelcost block: expected `key: value` with a key of "
                f"{keys_known}, got {raw.strip()!r}"
            )
        if not value.strip():  # `hw:` alone would name mkdocs.yml's folder
            raise PluginError(f"{src}:{n}: modelcost block: `{name}:` needs a value")
        keys[name], lines[name], raws[name] = value.strip(), n, raw
    return keys, lines, raws


def _block_checked(keys: dict[str, str], lines: dict[str, int], src: str,
                   fence: int) -> tuple[str, list[str]]:  # fmt: skip
    """What a block shows and its phases, every key it needs given and every value one
    of its choices; else an error at the key's line (the fence's where one is missing)."""
    where = f"{src}:{fence}"
    show = keys.get("show", "report")
    if show not in SHOWS:
        raise PluginError(f"{src}:{lines['show']}: show: {show!r} is not one of "
                          f"{', '.join(SHOWS)}")  # fmt: skip
    if "spec" not in keys or "hw" not in keys:
        raise PluginError(f"{where}: a modelcost block needs `spec:` and `hw:`")
    if show == "diff" and "vs" not in keys:
        raise PluginError(f"{where}: show: diff needs `vs: B.model`")
    phases = [p.strip() for p in keys.get("phase", "prefill,decode").split(",") if p.strip()]
    bad = [p for p in phases if p not in Phase.__members__]
    if bad or not phases:
        at = f"{src}:{lines.get('phase', fence)}"
        raise PluginError(f"{at}: phase: {', '.join(bad) or 'none'} is not one of "
                          f"{', '.join(Phase)}")  # fmt: skip
    if keys.get("estimate", DEFAULT_ESTIMATE) not in ESTIMATE_MODES:
        raise PluginError(f"{src}:{lines['estimate']}: estimate: {keys['estimate']!r} is "
                          f"not one of {', '.join(ESTIMATE_MODES)}")  # fmt: skip
    if keys.get("engine", DEFAULT_ENGINE) not in ENGINES:
        raise PluginError(f"{src}:{lines['engine']}: engine: {keys['engine']!r} is "
                          f"not one of {', '.join(ENGINES)}")  # fmt: skip
    return show, phases


def _block_int(keys: dict[str, str], lines: dict[str, int], src: str, name: str) -> int | None:
    """A count key's value (`1_024` as Python writes it), None when not given; not a
    positive whole number is an error at its line."""
    if name not in keys:
        return None
    try:
        value = int(keys[name].replace("_", ""))
    except ValueError:
        value = 0
    if value <= 0:
        at = f"{src}:{lines[name]}"
        raise PluginError(f"{at}: {name}: {keys[name]!r} is not a positive whole number")
    return value


def _shown(show: str, a: list, b: list | None) -> str:
    """The block's Markdown: the report, its summary, its kinds, or the diff of a and b."""
    from modelcost.analyses.diff import diff
    from modelcost.render.formats import render_diff, render_markdown
    from modelcost.render.view import build_view

    if b is not None:
        return _demote(render_diff(diff(a, b), "md", charts="inline", sides=(a, b)))
    if show == "report":
        return _demote(render_markdown(a, "inline"))
    view = build_view(a)
    if show == "summary":
        return f"{view.summary.markdown()}\n\n{view.per_token.markdown()}\n"
    tables = [f"**{p.heading}**\n\n{p.kinds.markdown()}" for p in view.phases]
    return "\n\n".join(tables) + "\n"
