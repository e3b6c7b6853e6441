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
page's inputs (the resolved spec, the target, the workload, modelcost's version) key a
cache (`cache`, beside mkdocs.yml): a rebuild compiles and renders only the pages whose
inputs changed. And a fenced block in any page embeds one report, a table of it, or a
diff, with inline charts:

    ```modelcost
    spec: models/llama3-8b.model
    hw: mi300x
    show: report            # report, summary, kinds or diff (then `vs: B.model`)
    phase: prefill,decode
    batch: 8
    ```

mkdocs is not a dependency of modelcost: this module is imported by MkDocs only.
"""

from __future__ import annotations

import glob
import hashlib
import json
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

from . import __version__
from .errors import SpecError
from .graph import DEFAULT_BATCH, Parallel, Phase, Workload
from .hardware import Hardware, load_hardware
from .report import ReportSet
from .resolve import load_spec
from .site import SiteOptions, SitePage, assemble, site_page

log = get_plugin_logger(__name__)
FORMATS = ("md",)  # MkDocs renders the Markdown pages itself
BLOCK = re.compile(r"^```modelcost[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)
SHOWS = ("report", "summary", "kinds", "diff")
BLOCK_KEYS = ("spec", "hw", "show", "phase", "batch", "seq", "context", "vs")


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


class ModelcostPlugin(BasePlugin[ModelcostConfig]):
    def on_config(self, config: MkDocsConfig) -> MkDocsConfig:
        self.root = Path(config.config_file_path or ".").resolve().parent
        self.rebuilt = self.reused = 0
        return config

    # ---- the pages
    def on_files(self, files: Files, *, config: MkDocsConfig) -> Files:
        cfg = self.config
        try:
            layout = Parallel(tp=cfg.tp, sp=cfg.sp, dp=cfg.dp, ep=cfg.ep)
        except ValueError as err:
            raise PluginError(f"modelcost: {err}") from None
        options = SiteOptions(batch=cfg.batch, seq=cfg.seq, context=cfg.context, parallel=layout)
        try:
            specs = self._specs()
            targets = [load_hardware(h) for h in cfg.hardware]
            diffs = [self._pair(d) for d in cfg.diffs]
            pages = [self._page(name, spec, hw, options) for name, spec in specs for hw in targets]
            site = assemble(pages, [n for n, _ in specs], targets, diffs, options, FORMATS)
        except (SpecError, ValueError) as err:  # ValueError: a workload the config sets
            raise PluginError(f"modelcost: {err}") from None
        folder = cfg.folder.strip("/")
        for rel, text in sorted(site.items()):
            files.append(File.generated(config, f"{folder}/{rel}", content=text))
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
        return [(p.stem, load_spec(p)) for p in paths]

    @staticmethod
    def _pair(text: str) -> tuple[str, str]:
        a, sep, b = text.partition(":")
        if not sep or not a or not b:
            raise SpecError(f"`diffs` takes A:B (file stems), got {text!r}", filename="mkdocs.yml")
        return a, b

    def _page(self, name: str, spec, hw: Hardware, options: SiteOptions) -> SitePage:
        """One page, from the cache when its inputs are the ones it was made from."""
        inputs = (__version__, spec.model_dump_json(), hw.model_dump_json(), repr(options))
        key = hashlib.sha256("\n".join(inputs).encode()).hexdigest()
        path = self.root / self.config.cache / f"{name}-{hw.name}.json"
        try:
            cached = json.loads(path.read_text(encoding="utf-8"))
            if cached["key"] == key:
                reports = ReportSet.model_validate_json(cached["reports"]).reports
                self.reused += 1
                return SitePage(name=cached["page"], spec=name, hardware=hw, reports=reports,
                                files=tuple((k, v) for k, v in cached["files"]))  # fmt: skip
        except (OSError, ValueError, KeyError):
            pass  # absent, stale or unreadable: compile it
        page = site_page(name, spec, hw, options, FORMATS)
        self.rebuilt += 1
        from .render.json_format import render_json

        record = {"key": key, "page": page.name, "files": [list(f) for f in page.files],
                  "reports": render_json(list(page.reports))}  # fmt: skip
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record), encoding="utf-8")
        return page

    # ---- blocks inside pages
    def on_page_markdown(self, markdown: str, *, page: Page, config: MkDocsConfig, files: Files):
        def expand(m: re.Match) -> str:
            line = markdown.count("\n", 0, m.start()) + 1  # the opening fence's
            where = f"{page.file.src_uri}:{line}"
            try:
                return self._block(m.group(1), page.file.src_uri, line)
            except SpecError as err:
                raise PluginError(f"{where}: modelcost block: {err}") from None

        return BLOCK.sub(expand, markdown)

    def _block(self, body: str, src: str, fence: int) -> str:
        from .compile import compile_report
        from .diff import diff
        from .render.formats import render_diff, render_markdown
        from .render.view import build_view

        where = f"{src}:{fence}"
        keys: dict[str, str] = {}
        lines: dict[str, int] = {}  # the page line of each key
        for n, raw in enumerate(body.splitlines(), fence + 1):
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
            keys[name], lines[name] = value.strip(), n
        show = keys.get("show", "report")
        if show not in SHOWS:
            at = f"{src}:{lines['show']}"
            raise PluginError(f"{at}: show: {show!r} is not one of {', '.join(SHOWS)}")
        if "spec" not in keys or "hw" not in keys:
            raise PluginError(f"{where}: a modelcost block needs `spec:` and `hw:`")
        if show == "diff" and "vs" not in keys:
            raise PluginError(f"{where}: show: diff needs `vs: B.model`")
        hw = load_hardware(keys["hw"])

        def ints(name: str) -> int | None:
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

        phases = [p.strip() for p in keys.get("phase", "prefill,decode").split(",") if p.strip()]
        bad = [p for p in phases if p not in Phase.__members__]
        if bad or not phases:
            at = f"{src}:{lines.get('phase', fence)}"
            raise PluginError(f"{at}: phase: {', '.join(bad) or 'none'} is not one of "
                              f"{', '.join(Phase)}")  # fmt: skip

        def reports(path: str) -> list:
            spec = load_spec(self.root / path)
            batch, seq, context = ints("batch") or DEFAULT_BATCH, ints("seq"), ints("context")
            return [compile_report(spec, hw, Workload(Phase(p), batch, seq, context))
                    for p in phases]  # fmt: skip

        a = reports(keys["spec"])
        if show == "diff":
            b = reports(keys["vs"])
            return _demote(render_diff(diff(a, b), "md", charts="inline", sides=(a, b)))
        if show == "report":
            return _demote(render_markdown(a, "inline"))
        view = build_view(a)
        if show == "summary":
            return f"{view.summary.markdown()}\n\n{view.per_token.markdown()}\n"
        tables = [f"**{p.heading}**\n\n{p.kinds.markdown()}" for p in view.phases]
        return "\n\n".join(tables) + "\n"


def _demote(markdown: str) -> str:
    """A report inside a page: its headings one level down (only our headings start a
    line with `#`: user text is escaped)."""
    return re.sub(r"^(#{1,5}) ", r"#\1 ", markdown, flags=re.M)
