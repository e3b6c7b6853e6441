"""The MkDocs plugin builds a real site: the configured specs × targets as pages with
their charts and an index, blocks inside any page, and a rebuild that compiles only the
pages whose inputs changed."""

import json
import os
import shutil
import signal
import stat
import time
from html import unescape
from pathlib import Path

import pytest
from conftest import MODELS, ROOT
from hypothesis import given, settings
from hypothesis import strategies as st

mkdocs_build = pytest.importorskip("mkdocs.commands.build")
from mkdocs.config import load_config  # noqa: E402
from mkdocs.exceptions import Abort, PluginError  # noqa: E402

from modelcost.publish.mkdocs_cache import read_entry  # noqa: E402
from modelcost.publish.mkdocs_fences import fenced_blocks  # noqa: E402

HOME = """# Home

```modelcost
spec: models/llama3-8b.model
hw: mi300x
show: summary
```

```modelcost
spec: models/gpt2.model
hw: h200
show: report
phase: decode
context: 512
```

```modelcost
spec: models/gpt2.model
vs: models/llama3-8b.model
hw: mi300x
show: diff
phase: decode
context: 512
```
"""
CONFIG = """site_name: Costs
plugins:
  - modelcost:
      specs: [models/llama3-8b.model, models/gpt2.model]
      hardware: [mi300x, h200]
      diffs: ["gpt2:llama3-8b"]
      context: 1024
"""


def make_site(root: Path, home: str = HOME, extra: str = "") -> Path:
    (root / "docs").mkdir(parents=True, exist_ok=True)
    (root / "models").mkdir(exist_ok=True)
    for name in ("llama3-8b", "llama3-70b", "gpt2"):  # 8B extends 70B
        shutil.copy(MODELS / f"{name}.model", root / "models")
    (root / "docs" / "index.md").write_text(home, encoding="utf-8")
    (root / "mkdocs.yml").write_text(CONFIG + extra, encoding="utf-8")
    return root


def build(root: Path):
    config = load_config(str(root / "mkdocs.yml"))
    mkdocs_build.build(config)
    return config.plugins["modelcost"]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    root = make_site(tmp_path_factory.mktemp("docs"))
    build(root)
    return root / "site"


def test_the_plugin_adds_the_pages_their_charts_and_the_index(site: Path) -> None:
    costs = site / "costs"
    index = (costs / "index.html").read_text()
    assert 'src="index-charts/grid.svg"' in index and (costs / "index-charts/grid.svg").exists()
    assert "decode at context 1024" in index  # the workload it used, stated
    for page in ("llama3-8b-mi300x", "gpt2-h200", "diff-gpt2-vs-llama3-8b-h200"):
        assert f'href="{page}/"' in index
        html = (costs / page / "index.html").read_text()
        images = [s for s in html.split('src="')[1:] if s.startswith(f"../{page}-charts/")]
        assert images and all((costs / s.split('"')[0][3:]).exists() for s in images)
    # 2 models × 2 targets, prefill and decode: 3 charts a phase
    assert len(list((costs / "gpt2-mi300x-charts").glob("*.svg"))) == 6


def test_blocks_embed_a_table_a_report_and_a_diff(site: Path) -> None:
    home = (site / "index.html").read_text()
    assert "Llama 3 8B (llama3_8b)" in home  # the summary table
    assert home.count('<svg xmlns="http://www.w3.org/2000/svg" class="modelcost roofline"') == 1 + 2
    assert 'class="modelcost waterfall"' in home  # the diff's charts, inline
    assert "<h2" in home and "Decode: batch 1, context 512" in home  # headings demoted


def test_a_rebuild_compiles_only_the_pages_whose_inputs_changed(tmp_path: Path) -> None:
    root = make_site(tmp_path, "# Home\n")
    first = build(root)
    assert (first.rebuilt, first.reused) == (4, 0)
    again = build(root)
    assert (again.rebuilt, again.reused) == (0, 4)
    spec = root / "models" / "gpt2.model"
    spec.write_text(spec.read_text().replace("layers = 12", "layers = 24"))
    changed = build(root)
    assert (changed.rebuilt, changed.reused) == (2, 2)  # gpt2 on both targets
    page = (root / "site" / "costs" / "gpt2-h200" / "index.html").read_text()
    assert "0-23" in page  # the new layers made it to the page


def test_a_bad_block_or_spec_stops_the_build_saying_where(tmp_path: Path, caplog) -> None:
    # the fence opens on line 5: `colour` is line 8 of index.md
    root = make_site(tmp_path, "# Home\n\ntext\n\n```modelcost\nspec: models/gpt2.model\nhw: h200"
                               "\ncolour: blue\n```\n")  # fmt: skip
    with pytest.raises((PluginError, Abort)):
        build(root)
    assert "index.md:8: modelcost block: expected `key: value`" in caplog.text
    assert "got 'colour: blue'" in caplog.text
    caplog.clear()
    root = make_site(tmp_path / "b", "# Home\n")
    (root / "models" / "gpt2.model").write_text(
        "model gpt2 {\n  d_model = 64\n  attention(8, kv_heads = 3)\n}\n"
    )
    with pytest.raises((PluginError, Abort)):
        build(root)
    assert "gpt2.model:3:27: error: kv_heads = 3 does not divide heads = 8" in caplog.text


def test_the_pages_can_be_of_a_device_layout(tmp_path: Path) -> None:
    root = make_site(tmp_path, "# Home\n")
    config = CONFIG.replace("      context: 1024\n", "      context: 1024\n      tp: 2\n")
    (root / "mkdocs.yml").write_text(config, encoding="utf-8")
    build(root)
    index = (root / "site" / "costs" / "index.html").read_text()
    assert "decode at context 1024 (or a model's own length" in index and "; tp 2;" in index
    page = (root / "site" / "costs" / "llama3-8b-h200" / "index.html").read_text()
    assert "tp 2" in page and "all_reduce" in page  # the tensor-parallel collectives


# ---- the cache is untrusted input (issue 20, item 5)
SMALL = """site_name: Costs
plugins:
  - modelcost:
      specs: [models/gpt2.model]
      hardware: [h200]
"""


@pytest.fixture(scope="module")
def cached(tmp_path_factory) -> Path:
    """A built one-page site: its cache holds `gpt2-h200.json`."""
    root = make_site(tmp_path_factory.mktemp("cached"), "# Home\n")
    (root / "mkdocs.yml").write_text(SMALL, encoding="utf-8")
    assert (build(root).rebuilt, 1) == (1, 1)
    return root


def entry(root: Path) -> Path:
    return root / ".modelcost-cache" / "gpt2-h200.json"


def page(root: Path) -> str:
    return (root / "site" / "costs" / "gpt2-h200" / "index.html").read_text()


def tamper(kind: str, path: Path, outside: Path) -> None:
    """Replace a good cache entry by one of the kinds a build must not trust."""
    good = json.loads(path.read_text())
    path.unlink()
    if kind == "junk JSON":
        path.write_text("{not json")
    elif kind == "deep JSON":
        path.write_text("[" * 100_000)
    elif kind == "a page beside the reports":  # the old format: pages read back as they were
        good |= {"page": "gpt2-h200", "files": [["gpt2-h200.md", "<script>alert(1)</script>"]]}
        path.write_text(json.dumps(good))
    elif kind == "no page files":  # the old format's silently dropped page
        path.write_text(json.dumps(good | {"page": "gpt2-h200", "files": []}))
    elif kind == "another key":
        path.write_text(json.dumps(good | {"key": "0" * 64}))
    elif kind == "another model's reports":
        for r in good["reports"]["reports"]:
            r["model"]["name"] = "llama3_8b"
        path.write_text(json.dumps(good))
    elif kind == "reports off their schema":
        good["reports"]["reports"][0]["totals"] = "fast"
        path.write_text(json.dumps(good))
    elif kind == "too large":  # sparse: refused by its size before a byte is read
        from modelcost.publish.mkdocs_cache import MAX_ENTRY_BYTES

        with open(path, "wb") as f:
            f.truncate(MAX_ENTRY_BYTES + 1)
    elif kind == "a directory":
        path.mkdir()
    elif kind == "a symlink":
        path.symlink_to(outside)
    elif kind == "a symlink loop":
        path.symlink_to(path.name)
    elif kind == "a FIFO":
        os.mkfifo(path)
    elif kind != "missing":
        raise AssertionError(kind)


KINDS = ["missing", "junk JSON", "deep JSON", "a page beside the reports", "no page files",
         "another key", "another model's reports", "reports off their schema", "too large",
         "a directory", "a symlink", "a symlink loop", "a FIFO"]  # fmt: skip


@pytest.mark.parametrize("kind", KINDS)
def test_a_bad_cache_entry_is_compiled_again_never_trusted(
    kind: str, cached: Path, tmp_path: Path, caplog
) -> None:
    root = tmp_path / "site"
    shutil.copytree(cached, root, symlinks=True)
    outside = tmp_path / "outside.json"
    outside.write_text(entry(root).read_text())  # a valid entry: a symlink to it is still refused
    tamper(kind, entry(root), outside)
    signal.signal(signal.SIGALRM, lambda *_: pytest.fail("the build hangs on the cache entry"))
    signal.alarm(30)
    try:
        plugin = build(root)
    finally:
        signal.alarm(0)
    assert (plugin.rebuilt, plugin.reused) == (1, 0)
    assert page(root) == page(cached)  # the page compiled again, the same, never dropped
    assert "<script>alert" not in page(root)
    assert outside.read_text() == entry(cached).read_text()  # never written through
    if kind == "a directory":  # left alone; the build says the page is not cached
        assert entry(root).is_dir() and "cannot cache" in caplog.text
        return
    assert stat.S_ISREG(entry(root).lstat().st_mode)  # replaced by a good entry
    key = json.loads(entry(cached).read_text())["key"]  # the same inputs: the same key
    assert read_entry(entry(root), key) is not None


def test_a_page_is_rendered_from_its_cached_reports_not_read_back(cached: Path, tmp_path) -> None:
    # a forged title, under the key of the page's real inputs, is text: escaped as a
    # title from a spec is (the cache can never put markup on the site)
    root = tmp_path / "site"
    shutil.copytree(cached, root, symlinks=True)
    good = json.loads(entry(root).read_text())
    assert sorted(good) == ["key", "reports"]  # reports only: no page is cached
    for r in good["reports"]["reports"]:
        r["model"]["title"] = "<script>alert(1)</script>"
    entry(root).write_text(json.dumps(good))
    assert (build(root).reused, 1) == (1, 1)
    assert "<script>alert" not in page(root)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page(root)


def test_the_cache_key_covers_modelcosts_own_code(
    cached: Path, tmp_path: Path, monkeypatch
) -> None:
    from modelcost.base.resources import data_dir
    from modelcost.publish import mkdocs_cache

    root = tmp_path / "site"
    shutil.copytree(cached, root, symlinks=True)
    monkeypatch.setattr(
        "modelcost.publish.mkdocs_plugin.modelcost_digest", lambda: "another modelcost"
    )
    assert (build(root).rebuilt, 1) == (1, 1)
    # the digest: the package's source, its templates and its grammar, not bytecode
    code = tmp_path / "code"
    for name, folder in (("pkg", mkdocs_cache._PACKAGE), ("templates", data_dir("templates")),
                         ("grammar", data_dir("grammar"))):  # fmt: skip
        shutil.copytree(folder, code / name, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(mkdocs_cache, "_PACKAGE", code / "pkg")
    monkeypatch.setattr(mkdocs_cache, "data_dir", lambda name: code / name)
    seen = {mkdocs_cache.modelcost_digest()}
    (code / "pkg" / "__pycache__").mkdir()
    (code / "pkg" / "__pycache__" / "site.cpython-311.pyc").write_bytes(b"\0")
    (code / "pkg" / "notes.txt").write_text("not code")
    assert mkdocs_cache.modelcost_digest() in seen
    for edited in ("pkg/site.py", "templates/report.html.j2", "grammar/modelspec.lark"):
        with open(code / edited, "a") as f:
            f.write("\n")
        seen.add(mkdocs_cache.modelcost_digest())
    (code / "pkg" / "site.py").rename(code / "pkg" / "site2.py")  # a renamed module
    seen.add(mkdocs_cache.modelcost_digest())
    assert len(seen) == 5


# ---- blocks: fences as CommonMark reads them (issue 20, item 6)

FENCES = [  # (page, the (start, end) line indexes of its modelcost blocks)
    ("```modelcost\na\n```", [(0, 2)]),
    ("~~~modelcost\na\n~~~", [(0, 2)]),
    ("```modelcost  \na\n```  ", [(0, 2)]),
    ("````modelcost\n```\n````", [(0, 2)]),  # a shorter fence does not close it
    ("```modelcost\na\n`````", [(0, 2)]),  # a longer one does
    ("```modelcost\n~~~\n```", [(0, 2)]),  # tildes never close backticks
    ("```modelcost\n``` x\n```", [(0, 2)]),  # nor a fence with an info string
    ("   ```modelcost\na\n   ```", [(0, 2)]),  # three spaces: still a fence
    ("    ```modelcost\n    ```", []),  # four: indented code
    ("````markdown\n```modelcost\nspec: a\n```\n````", []),  # inside a longer fence: shown
    ("~~~\n```modelcost\n```\n~~~", []),
    ("``` modelcost ```\n```modelcost\n```", [(1, 2)]),  # inline code opens no fence
    ("```python\nx\n```\n```modelcost\nb\n```", [(3, 5)]),
    ("```modelcostx\n```\n```model cost\n```", []),
    ("text\n```modelcost\na\n```", [(1, 3)]),  # a fence interrupts a paragraph
    ("```modelcost\nnever closed", [(0, None)]),
    ("```\n```modelcost\n```modelcost\n```", []),  # the second line's fence is text
]


@pytest.mark.parametrize(("text", "expected"), FENCES)
def test_modelcost_blocks_are_the_fences_commonmark_sees(text: str, expected: list) -> None:
    assert [(b.start, b.end) for b in fenced_blocks(text.split("\n"))] == expected


LINES = ["```modelcost", "````modelcost", "~~~modelcost", "   ```modelcost", "    ```modelcost",
         "```", "````", "~~~", "~~~~", "  ```", "    ```", "``` x", "```python", "text", "",
         "spec: a"]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(LINES), max_size=12))
def test_the_fence_scanner_agrees_with_cmark(lines: list[str]) -> None:
    # GitHub's cmark-gfm, a CommonMark reference, finds the same modelcost blocks with
    # the same text (less the opening fence's indentation, as CommonMark takes it off)
    cmarkgfm = pytest.importorskip("cmarkgfm")
    html = cmarkgfm.markdown_to_html("\n".join(lines))
    theirs = [
        unescape(c.split("</code>")[0]) for c in html.split('class="language-modelcost">')[1:]
    ]
    ours = []
    for b in fenced_blocks(lines):
        indent = len(lines[b.start]) - len(lines[b.start].lstrip(" "))
        body = [line[min(indent, len(line) - len(line.lstrip(" "))) :] for line in b.body]
        if b.end is None and body and body[-1] == "":  # the page's last newline ends a line
            body.pop()
        ours.append("".join(line + "\n" for line in body))
    assert ours == theirs


def plugin_at(root: Path):
    from modelcost.publish.mkdocs_plugin import ModelcostPlugin

    plugin = ModelcostPlugin()
    plugin.root = root
    return plugin


UNCLOSED = {  # 30,000 lines each
    "opening fences": "```modelcost\n" * 30_000,  # the first opens; the others are its text
    "a block never closed": "```modelcost\nspec: a\n" + "x\n" * 29_998,
    "blocks inside an unclosed fence": "```\n" + "```modelcost\nspec: a\n" * 15_000,
}


@pytest.mark.parametrize("page_text", UNCLOSED.values(), ids=UNCLOSED.keys())
def test_a_page_of_unclosed_fences_is_read_in_linear_time(page_text: str) -> None:
    # the block pattern was quadratic on these: 30,000 lines ran past two minutes
    start = time.perf_counter()
    try:
        out = plugin_at(Path(".")).expand(page_text, "index.md")
    except PluginError as err:
        assert str(err).startswith("index.md:1: modelcost block: its fence is never closed")
    else:
        assert out == page_text  # nothing runs inside another fence
    assert time.perf_counter() - start < 0.5


def test_a_block_shown_inside_a_longer_fence_is_shown_not_run(tmp_path: Path) -> None:
    # as the README shows a block: its text on the page, no report compiled
    home = "# Home\n\n````markdown\n```modelcost\nspec: models/gpt2.model\nhw: h200\n```\n````\n"
    root = make_site(tmp_path, home)
    (root / "mkdocs.yml").write_text("site_name: Costs\nplugins:\n  - modelcost\n")
    build(root)
    html = (root / "site" / "index.html").read_text()
    assert "```modelcost\nspec: models/gpt2.model\nhw: h200\n```" in html
    assert "<svg" not in html


def test_hw_resolves_against_mkdocs_yml_as_spec_does(tmp_path: Path, monkeypatch, caplog) -> None:
    home = ("# Home\n\n```modelcost\nspec: models/gpt2.model\nhw: targets/mine.hw\n"
            "show: summary\nphase: decode\ncontext: 512\n```\n")  # fmt: skip
    root = make_site(tmp_path / "docs", home)
    (root / "targets").mkdir()
    shutil.copy(ROOT / "specs" / "hardware" / "h200.hw", root / "targets" / "mine.hw")
    config = "site_name: Costs\nplugins:\n  - modelcost:\n      specs: [models/gpt2.model]\n"
    (root / "mkdocs.yml").write_text(config + "      hardware: [targets/mine.hw]\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # neither path exists from here
    build(root)
    assert "H200" in (root / "site" / "index.html").read_text()  # the target's title
    assert (root / "site" / "costs" / "gpt2-h200" / "index.html").exists()
    # a name that is neither a file beside mkdocs.yml nor a shipped target: at its line
    (root / "docs" / "index.md").write_text(home.replace("targets/mine.hw", "h20"))
    (root / "mkdocs.yml").write_text(config)
    with pytest.raises((PluginError, Abort)):
        build(root)
    assert "index.md:3: modelcost block: index.md:5:5: error: unknown hardware `h20`" in caplog.text
    assert "hint: did you mean `h200`?" in caplog.text
    (root / "docs" / "index.md").write_text(home.replace("targets/mine.hw", ""))
    with pytest.raises((PluginError, Abort)):
        build(root)
    assert "index.md:5: modelcost block: `hw:` needs a value" in caplog.text


# ---- issue 21: the estimate in the plugin's configuration and in its blocks


def test_the_plugin_and_its_blocks_take_the_estimate(tmp_path: Path) -> None:
    block = ("# Home\n\n```modelcost\nspec: models/gpt2.model\nhw: h200\nshow: report\n"
             "phase: decode\ncontext: 512\nestimate: kernels\n```\n")  # fmt: skip
    root = make_site(tmp_path, block, extra="      estimate: kernels\n")
    build(root)
    home = (root / "site" / "index.html").read_text()
    assert "estimate: step time" in home  # the block's report carries the estimate
    index = (root / "site" / "costs" / "index.html").read_text()
    assert "the kernel-aware estimate beside the roofline" in index
    bad = make_site(tmp_path / "bad", block.replace("estimate: kernels", "estimate: guess"))
    with pytest.raises((PluginError, Abort)):
        build(bad)


def test_the_plugin_and_its_blocks_take_the_engine(tmp_path: Path) -> None:
    # `engine:` in a block and in the configuration, as `--engine` on the command line:
    # a known engine builds; an unknown one is refused at its line
    block = ("# Home\n\n```modelcost\nspec: models/gpt2.model\nhw: h200\nshow: report\n"
             "phase: decode\nestimate: kernels\nengine: trtllm\n```\n")  # fmt: skip
    build(make_site(tmp_path, block, extra="      engine: sglang\n"))
    bad = make_site(tmp_path / "bad", block.replace("engine: trtllm", "engine: tgi"))
    with pytest.raises((PluginError, Abort)):
        build(bad)


# ---- issue 38, item 12: where specs come from pages, nothing outside the root is read


def _secret(tmp_path: Path) -> Path:
    secret = tmp_path / "secret.model"  # outside the project: a line nobody may print
    secret.write_text("password = hunter2\n", encoding="utf-8")
    return secret


def test_a_page_cannot_import_a_file_outside_the_root(tmp_path: Path, caplog) -> None:
    secret = _secret(tmp_path)
    root = make_site(tmp_path / "proj", "# Home\n")
    (root / "models" / "gpt2.model").write_text(f'import "{secret}"\n' + (
        MODELS / "gpt2.model").read_text())  # fmt: skip
    with pytest.raises((PluginError, Abort)):
        build(root)
    assert f"gpt2.model:1:1: error: `{secret}` is outside the project's root, {root}" in (
        caplog.text
    )
    assert "hunter2" not in caplog.text


def test_a_block_cannot_name_a_spec_or_target_outside_the_root(tmp_path: Path, caplog) -> None:
    secret = _secret(tmp_path)
    hw = tmp_path / "secret.hw"
    hw.write_text("hardware x { password = hunter2 }\n", encoding="utf-8")
    for key, value in (("spec", "../secret.model"), ("hw", "../secret.hw")):
        caplog.clear()
        block = {"spec": "models/gpt2.model", "hw": "h200", key: value}
        home = "# Home\n\n```modelcost\n" + "".join(f"{k}: {v}\n" for k, v in block.items())
        root = make_site(tmp_path / key, home + "show: summary\n```\n")
        assert (root / value).resolve() in (secret, hw)  # the secrets beside the project
        with pytest.raises((PluginError, Abort)):
            build(root)
        assert "is outside the project's root" in caplog.text
        assert "hunter2" not in caplog.text


def test_the_root_is_configurable(tmp_path: Path) -> None:
    shared = tmp_path / "shared.model"  # a file beside the project, a root above it
    shared.write_text((MODELS / "gpt2.model").read_text(), encoding="utf-8")
    root = make_site(tmp_path / "proj", "# Home\n", extra="      root: ..\n")
    (root / "models" / "gpt2.model").write_text(
        'import "../../shared.model"\nmodel mine extends gpt2 {}\n'
    )
    build(root)  # no error: the root above the project holds the shared file
    assert (root / "site" / "costs" / "gpt2-h200" / "index.html").exists()
