"""Regenerate the screenshots in docs/: `python docs/screenshots.py` (needs chromium and
playwright, as the browser test does)."""

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

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
        browser.close()
    shutil.rmtree(out)


if __name__ == "__main__":
    main()
