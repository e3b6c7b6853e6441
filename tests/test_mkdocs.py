"""The MkDocs plugin builds a real site: the configured specs × targets as pages with
their charts and an index, blocks inside any page, and a rebuild that compiles only the
pages whose inputs changed."""

import shutil
from pathlib import Path

import pytest
from conftest import MODELS

mkdocs_build = pytest.importorskip("mkdocs.commands.build")
from mkdocs.config import load_config  # noqa: E402
from mkdocs.exceptions import Abort, PluginError  # noqa: E402

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
