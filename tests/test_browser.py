"""The HTML report and the site index in a real browser (headless Chromium): no console
errors, one roofline point per op, and a column sort that works.

Needs Debian's `chromium` and the `playwright` package (.ci/run installs both); skipped
where they are missing, except under CI, where that is a failure.
"""

import os
import shutil
from pathlib import Path

import pytest
from conftest import MODELS

from modelcost import load_spec
from modelcost.compile import compile_report
from modelcost.graph import Phase, Workload
from modelcost.hardware import load_hardware
from modelcost.render.formats import render_html
from modelcost.site import build_site

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

try:
    from playwright.sync_api import sync_playwright
except ImportError:  # pragma: no cover - depends on the machine
    sync_playwright = None

MISSING = (
    "headless Chromium is not installed (apt-get install chromium)" if not CHROMIUM
    else "playwright is not installed (pip install -e '.[dev]')" if not sync_playwright
    else None
)  # fmt: skip
if MISSING and os.environ.get("CI"):
    raise RuntimeError(f"CI must run the browser tests, but {MISSING}: see .ci/run")
# each test skipped with the reason, which the summary prints (-rs in pyproject.toml):
# "7 skipped" and why, never one quiet module skip
pytestmark = pytest.mark.skipif(MISSING is not None, reason=f"browser test: {MISSING}")


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def open_page(browser, path: Path):
    page = browser.new_page(viewport={"width": 1280, "height": 2000})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: errors.append(f"network: {r.url}")
            if not r.url.startswith(("file:", "data:")) else None)  # fmt: skip
    page.goto(path.as_uri())
    page.wait_for_load_state("load")
    return page, errors


def column(page, table: str, col: int) -> list[float]:
    return page.eval_on_selector_all(
        f"#{table} tbody tr", f"rows => rows.map(r => parseFloat(r.cells[{col}].dataset.sort))"
    )


def test_report_renders_sorts_and_plots_every_op(browser, tmp_path: Path) -> None:
    spec = load_spec(MODELS / "deepseek-v3.model")
    hw = load_hardware("mi355x")
    reports = [compile_report(spec, hw, Workload(p, 1, 2048, 2048))
               for p in (Phase.prefill, Phase.decode)]  # fmt: skip
    path = tmp_path / "report.html"
    path.write_text(render_html(reports), encoding="utf-8")
    page, errors = open_page(browser, path)
    charts = page.locator("svg.roofline")
    assert charts.count() == 2
    for i, r in enumerate(reports):
        # every op with FLOPs is a point; the others (lookups, copies) a note
        plotted = [o for o in r.ops if o.flops > 0 and o.bytes > 0]
        assert charts.nth(i).locator("circle.op-point").count() == len(plotted)
        note = charts.nth(i).locator("text.note")
        hidden = len(r.ops) - len(plotted)
        assert note.text_content().startswith(f"not plotted: {hidden} ops without FLOPs")
    # sort the prefill op table by roofline time (column 10), descending then ascending
    header = page.locator("#ops-prefill th").nth(10)
    assert header.inner_text() == "roofline (µs)"
    header.click()
    times = column(page, "ops-prefill", 10)
    assert times == sorted(times, reverse=True) and len(times) == len(reports[0].ops)
    header.click()
    assert column(page, "ops-prefill", 10) == sorted(times)
    assert errors == []


def test_site_index_renders_and_sorts(browser, tmp_path: Path) -> None:
    specs = [(n, load_spec(MODELS / f"{n}.model")) for n in ("llama3-8b", "mixtral-8x7b", "gpt2")]
    files = build_site(specs, [load_hardware("mi300x"), load_hardware("h200")], [])
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(exist_ok=True)
        (tmp_path / rel).write_text(text, encoding="utf-8")
    page, errors = open_page(browser, tmp_path / "index.html")
    assert page.locator("#index tbody tr").count() == 6
    page.locator("#index th").nth(5).click()  # decode ms/token
    values = column(page, "index", 5)
    assert values == sorted(values, reverse=True)
    page.locator("#index tbody tr a").first.click()  # relative links open the page
    page.wait_for_load_state("load")
    assert page.locator("svg.roofline").count() == 2
    assert errors == []


def test_sweep_charts_render_with_their_series_and_axes(browser, tmp_path: Path) -> None:
    from modelcost.render.sweep_format import render_sweep
    from modelcost.sweeps import sweep

    spec = load_spec(MODELS / "llama3-70b.model")
    s = sweep([spec], [load_hardware("h200")], [Phase.decode], [1, 4, 16, 64],
              context=[4096, 131072], layout={"tp": [4, 8]})  # fmt: skip
    path = tmp_path / "sweep.html"
    path.write_text(render_sweep(s, "html"), encoding="utf-8")
    page, errors = open_page(browser, path)
    charts = page.locator("svg.line-chart")
    assert charts.count() == 3
    names = [charts.nth(i).get_attribute("data-chart") for i in range(3)]
    assert names == ["throughput", "pareto", "memory"]
    # tokens/s against batch: one line per (layout, context), 4 points each
    throughput = page.locator('svg[data-chart="throughput"]')
    assert throughput.locator("polyline.series").count() == 2 * 2
    assert throughput.locator("circle.pt").count() == 2 * 2 * 4
    assert throughput.locator("text.x-axis").text_content() == "batch"
    assert throughput.locator("text.y-axis").text_content() == "tokens/s"
    # memory against context: one line per (layout, batch) and the capacity line
    memory = page.locator('svg[data-chart="memory"]')
    assert memory.locator("polyline.series").count() == 2 * 4
    assert "141 GB" in memory.locator("text.roof-label").text_content()
    assert page.locator("table.sweep tbody tr").count() == len(s.rows) == 16
    assert errors == []


def test_serving_search_page_charts_each_layouts_curve(browser, tmp_path: Path) -> None:
    from modelcost.render.serving_format import render_search
    from modelcost.serving import search

    spec = load_spec(MODELS / "llama3.1-405b-fp8.model")
    found = search(spec, load_hardware("h200"), 2048, 256, tpot=0.050)
    path = tmp_path / "serve.html"
    path.write_text(render_search(found, "html"), encoding="utf-8")
    page, errors = open_page(browser, path)
    charts = page.locator("svg.line-chart")
    assert [charts.nth(i).get_attribute("data-chart") for i in range(charts.count())] == [
        "tpot",
        "ttft",
    ]
    tpot = page.locator('svg[data-chart="tpot"]')
    # one line per layout tried (tp 4, tp 8), one point per concurrency on its curve
    assert tpot.locator("polyline.series").count() == 2
    points = sum(len(s.curve) for s in found.tried)
    assert tpot.locator("circle.pt").count() == points
    assert tpot.locator("text.x-axis").text_content() == "output tokens/s per device"
    assert tpot.locator("text.roof-label").text_content() == "TPOT target 50 ms"
    assert page.locator("table.sweep tbody tr").count() == 2
    assert "chosen" in page.locator("table.sweep tbody tr").first.text_content()
    assert errors == []


FIT = """() => {
  const out = [];
  for (const t of document.querySelectorAll('table')) {
    const box = t.parentElement, style = getComputedStyle(box), r = box.getBoundingClientRect();
    const fits = t.scrollWidth <= box.clientWidth + 1;
    const scrolls = ['auto', 'scroll'].includes(style.overflowX) && r.right <= innerWidth + 1
      && box.clientHeight <= innerHeight;
    if (!fits && !scrolls) out.push(t.id || t.className);
  }
  return {clipped: out, page: document.documentElement.scrollWidth, width: innerWidth};
}"""


@pytest.mark.parametrize("width", [1400, 800])
def test_no_table_is_clipped_and_charts_carry_their_labels(browser, tmp_path: Path, width) -> None:
    from modelcost.diff import diff
    from modelcost.render.formats import render_diff

    hw = load_hardware("mi355x")
    ds = load_spec(MODELS / "deepseek-v3.model")
    reports = [compile_report(ds, hw, Workload(p, 1, 2048, 2048))
               for p in (Phase.prefill, Phase.decode)]  # fmt: skip
    llama = load_spec(MODELS / "llama3-70b.model")
    other = [compile_report(llama, hw, Workload(p, 1, 2048, 2048))
             for p in (Phase.prefill, Phase.decode)]  # fmt: skip
    (tmp_path / "report.html").write_text(render_html(reports), encoding="utf-8")
    page_html = render_diff(diff(other, reports), "html", sides=(other, reports))
    (tmp_path / "diff.html").write_text(page_html, encoding="utf-8")
    files = build_site([("llama3-70b", llama), ("deepseek-v3", ds)], [hw], [])
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(exist_ok=True)
        (tmp_path / rel).write_text(text, encoding="utf-8")
    for name in ("report.html", "diff.html", "index.html"):
        page = browser.new_page(viewport={"width": width, "height": 900})
        page.goto((tmp_path / name).as_uri())
        fit = page.evaluate(FIT)
        assert fit["clipped"] == [], (name, fit)  # each table fits or scrolls on screen
        assert fit["page"] <= fit["width"], (name, fit)  # the page itself never does
        page.close()
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.goto((tmp_path / "report.html").as_uri())
    roof = page.locator("svg.roofline").first
    assert roof.locator("text.bw-label").text_content() == "HBM 8.00 TB/s"
    assert roof.locator("text.ridge-label").count() == 3  # fp8, bf16 matrix; bf16 vector
    assert roof.locator("text.op-label").count() == 3
    # both phases on one set of axes
    ticks = [page.locator("svg.roofline").nth(i).locator("text.tick").all_text_contents()
             for i in range(2)]  # fmt: skip
    assert ticks[0] == ticks[1]
    assert page.locator("nav.toc a").count() >= 14  # summary, per token, 2 × (1 + 6)
    page.goto((tmp_path / "diff.html").as_uri())
    assert page.locator("svg.waterfall rect.step").count() >= 4
    assert page.locator("svg.paired-bars rect.bar-b").count() >= 4
    page.goto((tmp_path / "index.html").as_uri())
    assert page.locator("svg.grid rect.cell-bar").count() == 2 * 3
    assert "Workload: batch 1" in page.locator("p.workload").text_content()
    page.close()


def test_the_mkdocs_site_loads_with_its_charts(browser, tmp_path: Path) -> None:
    from test_mkdocs import build, make_site

    # pages as files (file://), and a built-in theme without its CDN-hosted highlighter
    # (the `mkdocs` theme's search modal throws on file://, readthedocs' does not)
    extra = "use_directory_urls: false\ntheme:\n  name: readthedocs\n  highlightjs: false\n"
    root = make_site(tmp_path, extra=extra)
    build(root)
    site = root / "site"
    page, errors = open_page(browser, site / "costs" / "index.html")
    images = page.locator("img")
    assert images.count() == 1  # the grid
    loaded = page.evaluate("() => [...document.images].map(i => i.complete && i.naturalWidth)")
    assert all(loaded), loaded
    with page.expect_navigation():
        page.locator('[role="main"] a[href="gpt2-h200.html"]').first.click()  # not the nav's
    page.wait_for_load_state("load")
    assert page.url.endswith("/costs/gpt2-h200.html")
    loaded = page.evaluate("() => [...document.images].map(i => i.complete && i.naturalWidth)")
    assert len(loaded) == 6 and all(loaded)  # prefill and decode, 3 charts each
    page.goto((site / "index.html").as_uri())
    assert page.locator("svg.roofline").count() == 3  # the report block and the diff's
    assert errors == []
