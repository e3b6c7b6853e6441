"""Regenerate the screenshots in docs/: `python docs/screenshots.py` (needs chromium and
playwright, as the browser test does). The README's picture is the documentation
site's own zoo, built by modelcost's MkDocs plugin (`mkdocs.yml`) into a temporary
folder and photographed there."""

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml
from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def main() -> None:
    out = Path(tempfile.mkdtemp())
    run = [sys.executable, "-m", "modelcost"]
    subprocess.run(
        [
            *run,
            "compile",
            "specs/models/deepseek-v3.model",
            "--hw",
            "mi355x",
            "--phase",
            "prefill,decode",
            "--format",
            "html",
            "-o",
            str(out / "r.html"),
        ],
        cwd=ROOT,
        check=True,
    )
    subprocess.run(
        [
            *run,
            "site",
            *map(str, sorted((ROOT / "specs/models").glob("*.model"))),
            "--hw",
            "mi300x,mi355x,h200",
            "-o",
            str(out / "site"),
        ],
        cwd=ROOT,
        check=True,
    )
    sweep = ["sweep", "specs/models/llama3-70b.model", "--hw", "h200", "--phase", "decode",
             "--batch", "1..512", "--context", "4K,32K,128K", "--tp", "4,8", "--format",
             "html", "-o", str(out / "sweep.html")]  # fmt: skip
    subprocess.run([*run, *sweep], cwd=ROOT, check=True)
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())  # the docs site, built aside
    config["docs_dir"], config["site_dir"] = str(ROOT / "docs"), str(out / "docs-site")
    plugin = next(p for p in config["plugins"] if isinstance(p, dict) and "modelcost" in p)
    plugin["modelcost"]["specs"] = [str(ROOT / s) for s in plugin["modelcost"]["specs"]]
    plugin["modelcost"]["cache"] = str(out / "cache")
    (out / "mkdocs.yml").write_text(yaml.safe_dump(config))
    # not --strict: the site shows the pictures this run makes (CI builds it strictly)
    subprocess.run([sys.executable, "-m", "mkdocs", "build", "-f", str(out / "mkdocs.yml")],
                   cwd=ROOT, check=True, capture_output=True)  # fmt: skip
    diff = ["diff", "specs/models/llama3-70b.model", "specs/models/llama3.1-405b-fp8.model",
            "--hw", "mi355x", "--phase", "prefill", "--format", "html", "-o",
            str(out / "diff.html")]  # fmt: skip
    subprocess.run([*run, *diff], cwd=ROOT, check=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1500})
        page.goto((out / "r.html").as_uri())
        page.screenshot(path=str(ROOT / "docs" / "report-screenshot.png"))
        page.locator("svg.roofline").first.screenshot(
            path=str(ROOT / "docs" / "roofline-screenshot.png")
        )
        page.goto((out / "diff.html").as_uri())
        page.locator("div.charts").first.screenshot(path=str(ROOT / "docs" / "diff-screenshot.png"))
        page.goto((out / "site" / "index.html").as_uri())
        page.set_viewport_size({"width": 1400, "height": 1100})
        page.screenshot(path=str(ROOT / "docs" / "site-screenshot.png"))
        page.set_viewport_size({"width": 1100, "height": 900})
        page.goto((out / "sweep.html").as_uri())
        facets = page.locator("div.facets").first  # tokens/s against batch, a chart a layout
        facets.screenshot(path=str(ROOT / "docs" / "sweep-screenshot.png"))
        page.set_viewport_size({"width": 1400, "height": 1000})
        page.goto((out / "docs-site" / "zoo" / "index.html").as_uri())
        page.screenshot(path=str(ROOT / "docs" / "zoo-screenshot.png"))
        for rel, name in (
            ("index.html", "site-home"),
            ("reference/language.html", "site-reference"),
            ("zoo/llama3-70b-mi355x.html", "site-zoo-page"),
        ):
            page.goto((out / "docs-site" / rel).as_uri())
            page.screenshot(path=str(ROOT / "docs" / f"{name}.png"))
        browser.close()
    shutil.rmtree(out)


if __name__ == "__main__":
    main()
