"""The documentation site (issue 25): the generated reference pages are what their
sources say today (a page left stale fails here: `python -m modelcost.cli.reference`
rewrites them), every layer kind is named in the language guide, the README stays
short, and the site builds with `mkdocs build --strict`."""

import subprocess
import sys

import yaml
from conftest import ROOT

import modelcost.language.spec as ir
from modelcost.cli.reference import REFERENCE, main, stale


def test_no_generated_page_is_stale() -> None:
    assert stale() == [], "run: python -m modelcost.cli.reference"
    assert main(["--check"]) == 0


def test_each_page_is_made_from_its_source() -> None:
    # the layer reference lists every kind's every argument; the command reference
    # every command; the hardware page every shipped target; the catalog every kernel
    from modelcost.base.resources import kernel_table
    from modelcost.cli import COMMANDS
    from modelcost.language.vocabulary import signatures
    from modelcost.targets.hardware import shipped_hardware

    language = REFERENCE["language.md"]()
    for name, sig in signatures(ir.OP_TYPES).items():
        section = language.split(f"## `{name}`\n", 1)[1].split("\n## ", 1)[0]
        for a in sig.args:
            row = next(x for x in section.splitlines() if x.startswith(f"| `{a.name}` |"))
            assert row.split("|")[4].strip(), f"{name}.{a.name} has no meaning"  # described
    commands = REFERENCE["commands.md"]()
    assert all(f"## `modelcost {c}`" in commands for c in COMMANDS)
    assert "`--executor`" in commands and "(one of: local, ray)" in commands
    hardware = REFERENCE["hardware.md"]()
    assert all(f"| `{h}` |" in hardware for h in shipped_hardware())
    kernels = REFERENCE["kernels.md"]()
    assert all(k["title"] in kernels for k in kernel_table("gluon")["kernels"])


def test_the_language_guide_names_every_layer_kind() -> None:
    guide = (ROOT / "docs" / "language.md").read_text()
    for cls in ir.OP_TYPES:
        assert f"`{cls.model_fields['kind'].default}`" in guide


def test_the_readme_is_short_and_points_to_the_site() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]
    pages = {p for item in nav for p in _pages(item)}
    for page in ("getting-started.md", "language.md", "reference/language.md", "accuracy.md"):
        assert page in pages and f"(docs/{page})" in readme


def _pages(item):
    value = next(iter(item.values())) if isinstance(item, dict) else item
    if isinstance(value, list):
        for sub in value:
            yield from _pages(sub)
    else:
        yield value


def test_the_site_builds_strictly(tmp_path) -> None:
    # the repository's mkdocs.yml with its paths made absolute, the site and the zoo's
    # cache in tmp_path (nothing written into the checkout)
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    config["docs_dir"] = str(ROOT / "docs")
    config["site_dir"] = str(tmp_path / "site")
    plugin = next(p for p in config["plugins"] if isinstance(p, dict) and "modelcost" in p)
    plugin["modelcost"]["specs"] = [str(ROOT / s) for s in plugin["modelcost"]["specs"]]
    plugin["modelcost"]["cache"] = str(tmp_path / "cache")
    path = tmp_path / "mkdocs.yml"
    path.write_text(yaml.safe_dump(config))
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(path)],
                       capture_output=True, text=True, cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    site = tmp_path / "site"
    for page in ("index.html", "reference/language.html", "zoo/index.html", "accuracy.html"):
        assert (site / page).is_file(), page
