"""The HTML report and the site index in a real browser (headless Chromium): no console
errors, one roofline point per op, and a column sort that works.

Needs Debian's `chromium` and the `playwright` package (.ci/run installs both); skipped
where they are missing, except under CI, where that is a failure.
"""

import base64
import os
import re
import shutil
from pathlib import Path

import pytest
from conftest import MODELS

from modelcost import load_spec
from modelcost.ir.graph import Phase, Workload
from modelcost.lowering.validate import for_phase
from modelcost.publish.site import build_site
from modelcost.render.formats import render_html
from modelcost.roofline.compile import compile_report
from modelcost.targets.hardware import load_hardware

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
    reports = [compile_report(spec, hw, for_phase(Workload(p, 1, 2048, 2048)))
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
    from modelcost.analyses.sweeps import sweep
    from modelcost.render.sweep_format import render_sweep

    spec = load_spec(MODELS / "llama3-70b.model")
    s = sweep([spec], [load_hardware("h200")], [Phase.decode], [1, 4, 16, 64],
              context=[4096, 131072], layout={"tp": [4, 8]})  # fmt: skip
    path = tmp_path / "sweep.html"
    path.write_text(render_sweep(s, "html"), encoding="utf-8")
    page, errors = open_page(browser, path)
    charts = page.locator("svg.line-chart")
    # the fronts, then a small multiple per layout (tp 4, tp 8) of each of two charts
    assert charts.count() == 1 + 2 * 2
    names = [charts.nth(i).get_attribute("data-chart") for i in range(5)]
    assert names == ["pareto", "throughput", "throughput", "memory", "memory"]
    assert page.locator("figure.facet figcaption").all_text_contents() == [
        "llama3_70b h200 tp 4 (2 contexts)", "llama3_70b h200 tp 8 (2 contexts)",
        "llama3_70b h200 tp 4 (4 batches)", "llama3_70b h200 tp 8 (4 batches)",
    ]  # fmt: skip
    # tokens/s against batch: one line per context in each layout's chart, 4 points each
    throughput = page.locator('svg[data-chart="throughput"]').first
    assert throughput.locator("polyline.series").count() == 2
    assert throughput.locator("circle.pt").count() == 2 * 4
    assert throughput.locator("text.x-axis").text_content() == "batch"
    assert throughput.locator("text.y-axis").text_content() == "tokens/s"
    # the small multiples share their axes: the same ticks in both layouts' charts
    ticks = [page.locator('svg[data-chart="throughput"]').nth(i).locator("text.tick")
             .all_text_contents() for i in range(2)]  # fmt: skip
    assert ticks[0] == ticks[1]
    # memory against context: one line per batch and the capacity line
    memory = page.locator('svg[data-chart="memory"]').first
    assert memory.locator("polyline.series").count() == 4
    # 140 GiB: 143771 MiB, the total nvidia-smi reports for an H200 (specs/hardware/h200.hw)
    assert "140 GiB" in memory.locator("text.roof-label").text_content()
    assert page.locator("table.sweep tbody tr").count() == len(s.rows) == 16
    assert errors == []


def _synthetic(n: int):
    """A sweep of `n` made-up decode rows over 5 targets × 4 layouts × 11 batches and as
    many contexts as it takes (the page's scale, not its numbers, is under test)."""
    from modelcost.analyses.sweeps import Sweep, SweepRow

    rows, batches = [], [2**k for k in range(11)]
    contexts = max(1, n // 220)
    for hw in ("h100", "h200", "b200", "mi300x", "mi355x"):
        for tp in (1, 2, 4, 8):
            for c in range(1, contexts + 1):
                for b in batches:
                    step = 1 + b * 0.01 + 128 * c * 1e-5
                    rows.append(SweepRow.trusted(
                        model="m", hardware=hw, phase="decode", batch=b, seq=1,
                        context=128 * c, prefix=0, chunk=0, prompt=0, layout=f"tp {tp}",
                        devices=tp, step_ms=step, ms_per_token=step / b,
                        tokens_per_s=b / step * 1e3, tokens_per_s_device=b / step * 1e3 / tp,
                        bound="memory", mfu_bound=0.1, memory=1e9 * (1 + b * c / 1e3),
                        capacity=8e10, fits=b * c < 8e4, estimate_ms=None,
                    ))  # fmt: skip
    return Sweep.trusted(rows=tuple(rows[:n]))


@pytest.mark.parametrize("n", [1_000, 100_000])
def test_a_large_sweep_page_stays_readable(browser, tmp_path: Path, n: int) -> None:
    # every chart keeps to the palette's colours (none repeated), at most 64 points a
    # line; the table lists its first 2,000 rows and says so; the page stays a few MB
    from modelcost.render.charts import PALETTE
    from modelcost.render.sweep_format import render_sweep

    s = _synthetic(n)
    path = tmp_path / "big.html"
    path.write_text(render_sweep(s, "html"), encoding="utf-8")
    assert path.stat().st_size < 4_000_000  # 3.2 MB at 100,000 rows (0.7 MB at 1,000)
    page, errors = open_page(browser, path)
    assert errors == []
    assert page.locator("svg.line-chart").count() == 1 + 2 * 20  # the fronts, 2 × 20 facets
    per_chart = page.eval_on_selector_all(
        "svg.line-chart",
        "svgs => svgs.map(s => Array.from(s.querySelectorAll('polyline.series'))"
        ".map(p => [p.getAttribute('stroke'), p.getAttribute('points').split(' ').length]))",
    )
    for lines in per_chart:
        colours = [c for c, _ in lines]
        assert len(colours) == len(set(colours)) <= len(PALETTE)
        assert max(n for _, n in lines) <= 64
    rows = page.locator("table.sweep tbody tr").count()
    assert rows == min(len(s.rows), 2_000)
    if len(s.rows) > 2_000:
        assert f"The first 2,000 of {len(s.rows):,} rows" in page.locator("p.note").text_content()


def test_serving_search_page_charts_each_layouts_curve(browser, tmp_path: Path) -> None:
    from modelcost.analyses.serving_search import search
    from modelcost.render.serving_format import render_search

    spec = load_spec(MODELS / "llama3.1-405b-fp8.model")
    found = search(spec, load_hardware("h200"), 2048, 256, tpot=0.050)
    path = tmp_path / "serve.html"
    path.write_text(render_search(found, "html"), encoding="utf-8")
    page, errors = open_page(browser, path)
    charts = page.locator("svg.line-chart")
    assert [charts.nth(i).get_attribute("data-chart") for i in range(charts.count())] == [
        "front",
        "tpot",
        "ttft",
    ]
    # the Pareto front's chart: a point for each point tried, the chosen one again
    front = page.locator('svg[data-chart="front"]')
    assert front.locator("circle.pt").count() == len(found.points) + 1
    tpot = page.locator('svg[data-chart="tpot"]')
    # one line per layout tried (tp 4, tp 8, and tp 8 filling H200's scale-up domain
    # in 2 and 4 pipeline stages), one point per concurrency on its curve
    assert tpot.locator("polyline.series").count() == len(found.tried) == 4
    points = sum(len(s.curve) for s in found.tried)
    assert tpot.locator("circle.pt").count() == points
    assert tpot.locator("text.x-axis").text_content() == "output tokens/s per device"
    assert tpot.locator("text.roof-label").text_content() == "TPOT target 50 ms"
    assert page.locator("table.sweep tbody tr").count() == 4
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
    from modelcost.analyses.diff import diff
    from modelcost.render.formats import render_diff

    hw = load_hardware("mi355x")
    ds = load_spec(MODELS / "deepseek-v3.model")
    reports = [compile_report(ds, hw, for_phase(Workload(p, 1, 2048, 2048)))
               for p in (Phase.prefill, Phase.decode)]  # fmt: skip
    llama = load_spec(MODELS / "llama3-70b.model")
    other = [compile_report(llama, hw, for_phase(Workload(p, 1, 2048, 2048)))
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


# Issue 20, item 1: the SVG files written beside Markdown (`-o page.md`, the site, the
# MkDocs plugin) carry their own style: each, shown alone as an image (as GitHub and
# MkDocs show it), looks as it does inline in the HTML page, its plot area light, its
# roofs drawn and every label inside its box.
PIXELS = """async ([alone, inline, at]) => {
  const decode = src => new Promise((ok, no) => {
    const i = new Image();
    i.onload = () => {
      const c = document.createElement('canvas');
      c.width = i.width; c.height = i.height;
      const g = c.getContext('2d');
      g.drawImage(i, 0, 0);
      ok(g.getImageData(0, 0, i.width, i.height));
    };
    i.onerror = no;
    i.src = src;
  });
  const a = await decode(alone), b = await decode(inline);
  let differ = 0;
  if (a.width === b.width && a.height === b.height) {
    for (let k = 0; k < a.data.length; k += 4) {
      const d = Math.max(...[0, 1, 2].map(c => Math.abs(a.data[k + c] - b.data[k + c])));
      if (d > 64) differ++;
    }
  } else differ = -1;
  const px = ([x, y]) => [0, 1, 2].map(c => a.data[(y * a.width + x) * 4 + c]);
  return {differ, size: [a.width, a.height], inline: [b.width, b.height], at: at.map(px)};
}"""
NATURAL_SIZE = """() => document.querySelectorAll(".chart svg").forEach(s => {
  s.style.width = s.getAttribute('width') + 'px'; s.style.maxWidth = 'none';
})"""
BOXES = """() => {
  const box = document.documentElement.viewBox.baseVal;
  return [...document.querySelectorAll('text')].map(t => {
    const r = t.getBoundingClientRect();
    return {text: t.textContent, left: r.left, top: r.top, right: r.right, bottom: r.bottom,
            inside: r.left >= box.x - 0.5 && r.top >= box.y - 0.5
                    && r.right <= box.x + box.width + 0.5 && r.bottom <= box.y + box.height + 0.5};
  });
}"""


def _written(tmp_path: Path) -> list[tuple[Path, list[Path]]]:
    """Each HTML page with the SVG files its Markdown twin writes, in the page's order."""
    from modelcost.analyses.diff import diff
    from modelcost.render.formats import diff_markdown_files, markdown_files, render_diff

    hw = load_hardware("h200")  # its roof label is the one that ran off: matrix bf16 989 TFLOP/s
    small, big = (load_spec(MODELS / f"{n}.model") for n in ("llama3-8b", "llama3-70b"))
    a, b = ([compile_report(s, hw, for_phase(Workload(p, 1, 2048, 2048)))
             for p in (Phase.prefill, Phase.decode)] for s in (small, big))  # fmt: skip
    d = diff(a, b)
    site = build_site([("llama3-8b", small), ("llama3-70b", big)], [hw], [])
    pages = {
        "report": (render_html(a), markdown_files(a, "report.md")),
        "diff": (
            render_diff(d, "html", sides=(a, b)),
            diff_markdown_files(d, "diff.md", sides=(a, b)),
        ),
        "site": (site["index.html"], {k: v for k, v in site.items() if k.startswith("index-")}),
    }
    out = []
    for name, (html, files) in pages.items():
        (tmp_path / f"{name}.html").write_text(html, encoding="utf-8")
        svgs = []
        for rel, text in files.items():
            if rel.endswith(".svg"):
                (tmp_path / rel).parent.mkdir(exist_ok=True)
                (tmp_path / rel).write_text(text, encoding="utf-8")
                svgs.append(tmp_path / rel)
        out.append((tmp_path / f"{name}.html", svgs))
    return out


def _png(data: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(data).decode()


def _numbers(text: str) -> list[float]:
    return [float(v) for v in re.findall(r"-?[0-9.]+", text)]


def test_chart_files_alone_look_as_they_do_inline(browser, tmp_path: Path) -> None:
    written = _written(tmp_path)
    # 3 charts a phase of a report, 4 a phase of a diff, the site's grid
    assert [len(svgs) for _, svgs in written] == [6, 8, 1]
    for html, svgs in written:
        for i, svg in enumerate(svgs):
            text = svg.read_text(encoding="utf-8")
            w, h = (int(v) for v in re.search(r'width="(\d+)" height="(\d+)"', text).groups())
            # inline: the chart in its page, at its own size (pages stretch it to their width)
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(html.as_uri())
            page.evaluate(NATURAL_SIZE)
            chart = page.locator(".chart svg").nth(i)
            chart.scroll_into_view_if_needed()
            box = chart.bounding_box()
            assert box is not None and (box["width"], box["height"]) == (w, h)
            clip = {"x": round(box["x"]), "y": round(box["y"]), "width": w, "height": h}
            inline = page.screenshot(clip=clip)  # the page's y may be off a whole pixel
            # alone: the file as an image, as GitHub and MkDocs show it
            alone_page = tmp_path / "alone.html"
            alone_page.write_text(f'<!DOCTYPE html><body style="margin:0"><img src="{svg.name}">',
                                  encoding="utf-8")  # fmt: skip
            alone_page.replace(svg.parent / "alone.html")
            page.goto((svg.parent / "alone.html").as_uri())
            alone = page.locator("img").screenshot()
            # pixels to look at: a grid over the plot area, and along each roof's flat part
            plot = re.search(r'<rect x="([\d.]+)" y="([\d.]+)" width="([\d.]+)" '
                             r'height="([\d.]+)" class="plot"/>', text)  # fmt: skip
            at: list[list[int]] = []
            if plot:
                x, y, pw, ph = (float(v) for v in plot.groups())
                at += [[int(x + pw * (i + 0.5) / 20), int(y + ph * (j + 0.5) / 20)]
                       for i in range(20) for j in range(20)]  # fmt: skip
            roofs = [_numbers(p) for p in re.findall(r'<polyline points="([^"]+)" class="roof"/>',
                                                     text)]  # fmt: skip
            flats = [(pts[-4], pts[-2], pts[-1]) for pts in roofs]  # (x from, x to, y)
            for x0, x1, y in flats:  # the rows a 1.5 px line at y covers, 9 places along it
                at += [[round(x0 + (x1 - x0) * k / 10), int(y) + dy]
                       for k in range(1, 10) for dy in (-1, 0, 1)]  # fmt: skip
            result = page.evaluate(PIXELS, [_png(alone), _png(inline), at])
            assert result["size"] == [w, h], svg
            # the same picture: at most 1% of its pixels differ (text antialiasing)
            assert 0 <= result["differ"] <= w * h // 100, (svg, result["differ"], result["inline"])
            colours = [tuple(c) for c in result["at"]]
            if plot:
                grid, colours = colours[:400], colours[400:]
                # the plot area is its light fill (#fbfcfe) where nothing is drawn, not black
                assert max(set(grid), key=grid.count) == (251, 252, 254), svg
                assert sum(max(c) < 64 for c in grid) < 20, svg
            for k in range(len(flats)):  # each roof a dark grey line (#333) across the plot
                line = [min(colours[27 * k + 3 * j : 27 * k + 3 * j + 3]) for j in range(9)]
                assert sum(max(c) < 140 and max(c) - min(c) < 24 for c in line) >= 6, (svg, line)
            # every label inside the chart's box, measured where the file is the document
            page.goto(svg.as_uri())
            outside = [b for b in page.evaluate(BOXES) if not b["inside"]]
            assert outside == [], (svg, outside)
            page.close()


@pytest.fixture(scope="module")
def docs_site(tmp_path_factory) -> Path:
    """The project's MkDocs site, built from the checkout into a temporary folder (as
    tests/test_reference.py builds it)."""
    import subprocess
    import sys

    import yaml
    from conftest import ROOT

    out = tmp_path_factory.mktemp("docs")
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    config["docs_dir"], config["site_dir"] = str(ROOT / "docs"), str(out / "site")
    plugin = next(p for p in config["plugins"] if isinstance(p, dict) and "modelcost" in p)
    plugin["modelcost"]["specs"] = [str(ROOT / s) for s in plugin["modelcost"]["specs"]]
    plugin["modelcost"]["cache"] = str(out / "cache")
    (out / "mkdocs.yml").write_text(yaml.safe_dump(config))
    subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f",
                    str(out / "mkdocs.yml")], check=True, capture_output=True)  # fmt: skip
    return out / "site"


@pytest.mark.parametrize("width", [1400, 800])
def test_the_docs_site_reads_at_any_width(browser, docs_site: Path, width: int) -> None:
    # a generated reference page, a zoo page (modelcost's own plugin), the accuracy page:
    # each loads with no error and no request off the machine, and nothing widens the
    # page past the window (wide tables scroll inside their own box)
    for rel, title in (("reference/language.html", "Layer kinds"),
                       ("zoo/llama3-70b-mi355x.html", "Llama 3 70B on AMD Instinct MI355X"),
                       ("accuracy.html", "Accuracy")):  # fmt: skip
        page = browser.new_page(viewport={"width": width, "height": 900})
        errors: list[str] = []
        page.on("console", lambda m, e=errors: e.append(m.text) if m.type == "error" else None)
        page.on("request", lambda r, e=errors: e.append(f"network: {r.url}")
                if not r.url.startswith(("file:", "data:")) else None)  # fmt: skip
        page.goto((docs_site / rel).as_uri())
        page.wait_for_load_state("load")
        assert page.locator("h1").first.text_content().rstrip("¶") == title
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        assert errors == []
        page.close()


# ---- issue 38, item 13: a report's contents, its roofline's labels, the plugin's pages


def test_the_contents_keep_each_section_with_its_entries(browser, tmp_path: Path) -> None:
    spec = load_spec(MODELS / "llama3-8b.model")
    reports = [compile_report(spec, load_hardware("h100"), p) for p in ("prefill", "decode")]
    path = tmp_path / "report.html"
    path.write_text(render_html(reports), encoding="utf-8")
    page, errors = open_page(browser, path)
    boxes = page.eval_on_selector_all(
        "nav.toc > ul > li",
        """items => items.map(li => {
        const head = li.querySelector(':scope > a').getBoundingClientRect();
        return [head.left, head.bottom, ...[...li.querySelectorAll('li')].map(
          s => [s.getBoundingClientRect().left, s.getBoundingClientRect().top])];
    })""",
    )
    assert len(boxes) == 4  # summary, per token, prefill, decode
    for left, bottom, *entries in boxes:
        for x, y in entries:  # in its heading's column, below it: never split off
            assert left <= x < left + 60 and y >= bottom - 1
    assert sum(len(b) - 2 for b in boxes) == 12  # 2 phases × 6 sections
    assert errors == []


def test_no_roofline_label_is_drawn_over_another(browser, tmp_path: Path) -> None:
    for name, hw in (("llama3-8b", "h100"), ("deepseek-v3", "mi355x"), ("gpt2", "h200")):
        reports = [compile_report(load_spec(MODELS / f"{name}.model"), load_hardware(hw), p)
                   for p in ("prefill", "decode")]  # fmt: skip
        path = tmp_path / f"{name}.html"
        path.write_text(render_html(reports), encoding="utf-8")
        page, errors = open_page(browser, path)
        overlaps = page.eval_on_selector_all(
            "svg.roofline",
            """charts => charts.map(svg => {
            const boxes = [...svg.querySelectorAll('text.op-label, text.ridge-label')]
              .map(t => [t.textContent, t.getBoundingClientRect()]);
            const hit = [];
            boxes.forEach(([a, p], i) => boxes.slice(i + 1).forEach(([b, q]) => {
              if (p.left < q.right - 1 && q.left < p.right - 1 && p.top < q.bottom - 1
                  && q.top < p.bottom - 1) hit.push(a + ' / ' + b);
            }));
            return hit;
        })""",
        )
        assert overlaps == [[], []], name
        assert errors == []


def test_the_plugins_pages_are_laid_out_in_mkdocs_default_theme(browser, tmp_path: Path) -> None:
    from test_mkdocs import build, make_site

    extra = "use_directory_urls: false\ntheme:\n  name: mkdocs\n  highlightjs: false\n"
    root = make_site(tmp_path, extra=extra)
    build(root)
    page, _ = open_page(browser, root / "site" / "costs" / "gpt2-h200.html")
    # (the theme's own script throws on file://, its search modal: not ours to judge)
    looks = page.evaluate("""() => {
        const cell = document.querySelector('.modelcost-page ~ table td');
        const head = document.querySelector('.modelcost-page ~ h2');
        const s = getComputedStyle(cell), h = getComputedStyle(head);
        const ours = x => (x.href || '').endsWith('costs/modelcost.css');
        return {sheet: [...document.styleSheets].some(ours),
                pad: parseFloat(s.paddingLeft), rule: s.borderBottomStyle,
                gap: parseFloat(h.marginTop)};
    }""")
    assert looks["sheet"]
    assert looks["pad"] >= 8 and looks["rule"] == "solid"  # cells apart, rows ruled
    assert looks["gap"] >= 16  # a heading apart from the table above it


def test_the_serving_curve_chart_shows_tips_and_hides_series(browser, tmp_path: Path) -> None:
    from modelcost.analyses.curve import BenchLoad, curves
    from modelcost.analyses.serving_records import Engine
    from modelcost.ir.graph import Parallel
    from modelcost.render.curve_format import render_curves

    found = curves(MODELS / "llama3-8b.model", "h100", 256, 64, [1, 4], BenchLoad(prompts=20),
                   [Parallel(), Parallel(tp=2)], Engine(2048))  # fmt: skip
    path = tmp_path / "curve.html"
    path.write_text(render_curves(found, "html"))
    page, errors = open_page(browser, path)
    tip = page.locator("#chart-tip")
    assert tip.is_hidden()
    # the front is drawn last, over the points it joins: a user's pointer meets its circle
    point = page.locator('g.series-group[data-series="Pareto front"] circle').last
    point.hover()
    assert tip.is_visible()
    said = tip.inner_text().splitlines()
    assert said[0].startswith("tp ") and " at concurrency " in said[0]
    assert said[3].startswith("TTFT mean ") and said[4].startswith("TPOT mean ")
    page.mouse.move(5, 5)
    assert tip.is_hidden()
    line = page.locator('g.series-group[data-series="tp 1"]')
    entry = page.locator('g.legend-item[data-series="tp 1"]')
    entry.click()
    assert line.is_hidden() and entry.get_attribute("aria-pressed") == "false"
    assert page.locator('g.series-group[data-series="tp 2 (2 devices)"]').is_visible()
    entry.press("Enter")
    assert line.is_visible() and entry.get_attribute("aria-pressed") == "true"
    assert errors == []
