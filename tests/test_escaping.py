"""Strings from a user's files reach no output as live markup (issue 8, items 7 and 8).

A spec and a hardware file whose every string is an attack are rendered to Markdown
(report, diff, site index) and converted as MkDocs does (Python-Markdown with tables)
and as GitHub does (cmark-gfm, through cmarkgfm): no HTML element, no link and no extra
table cell or row may come from user text. The text output carries no control
character; the HTML output escapes everything (jinja autoescape).
"""

import re
from pathlib import Path

import cmarkgfm
import markdown
import pytest
from cmarkgfm.cmark import Options

from modelcost import parse_spec
from modelcost.compile import compile_report
from modelcost.diff import diff, gate
from modelcost.graph import Workload
from modelcost.hardware import parse_hardware
from modelcost.render.escape import md
from modelcost.render.formats import render_diff, render_html, render_markdown
from modelcost.render.text import render_text
from modelcost.site import build_site

ATTACKS = [
    "<img src=x onerror=alert(1)>",
    "[x](javascript:alert(1))",
    "![i](http://e.vil/p.png)",
    "a | b \\| c",
    "line\nbreak\n| x | y |\n|---|---|",
    "`code` ``x``",
    "<script>alert(1)</script>",
    "**bold** _em_ ~~del~~",
    "https://e.vil www.e.vil me@e.vil <http://e.vil>",
    "# heading",
    "- item",
    "1. item",
    "---",
    "&lt;b&gt; &amp;",
    "\x1b[31mred\x1b[0m\a",
]
TITLE = " ".join(a.replace("\n", "\\n").replace('"', "'") for a in ATTACKS)


def _spec(name: str):
    text = (
        f'model {name} {{\n  title = "{TITLE}"\n  d_model = 64\n  vocab = 128\n'
        "  embed(vocab)\n  repeat 2 { rmsnorm\n attention(4)\n residual }\n"
        "  rmsnorm\n  lm_head(vocab)\n}\n"
    )
    return parse_spec(text)


def _hardware():
    hw_title = TITLE.replace("\\n", " ").replace("\x1b", "").replace("\a", "")
    text = (
        f'hardware evil {{\n  title = "{hw_title}"\n  vendor = "<b>v</b>"\n'
        '  arch = "[a](javascript:x)"\n  memory = 80 GB\n  memory_bandwidth = 3 TB/s\n'
        "  scaleup_bandwidth = 900 GB/s\n  compute_units = 132\n  clock = 1.8 GHz\n"
        "  matrix { bf16 = 989 TFLOPS }\n  vector { fp32 = 67 TFLOPS }\n"
        '  achievable { bf16 = 700 TFLOPS\n source = "<img src=y onerror=z> | x" }\n}\n'
    )
    return parse_hardware(text, "evil.hw")


@pytest.fixture(scope="module")
def outputs() -> dict[str, str]:
    a, b, hw = _spec("a"), _spec("b"), _hardware()
    ra = [compile_report(a, hw, Workload(p, 1, 16, 16)) for p in ("prefill", "decode")]
    rb = [compile_report(b, hw, Workload(p, 1, 32, 32)) for p in ("prefill", "decode")]
    site = build_site([("page", a), ("javascript:alert(1)", b)], [hw], [])
    d = diff(ra, rb)
    return {
        "report": render_markdown(ra),
        "diff": render_diff(d, "md"),
        "gfm": render_diff(d, "gfm", gate(d, 5.0)),
        "diff_text": render_diff(d, "text", gate(d, 5.0)),
        "inline": render_markdown(ra, "inline"),
        "index": site["index.md"],
        "text": render_text(ra),
        "html": render_html(ra),
    }


def _python_markdown(text: str) -> str:
    return markdown.markdown(text, extensions=["tables", "toc", "fenced_code"])


def _gfm(text: str) -> str:
    return cmarkgfm.github_flavored_markdown_to_html(text, options=Options.CMARK_OPT_UNSAFE)


ALLOWED_TAGS = {
    "h1",
    "h2",
    "h3",
    "p",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "ul",
    "li",
    "strong",
    "blockquote",
    "hr",
    "a",
    "code",
    "em",
    "details",
    "summary",
    "sub",
}  # fmt: skip  (the PR summary's own)


@pytest.mark.parametrize("convert", [_python_markdown, _gfm], ids=["python-markdown", "gfm"])
@pytest.mark.parametrize("which", ["report", "diff", "index", "gfm"])
def test_markdown_yields_no_markup_from_user_text(outputs, convert, which: str) -> None:
    html = convert(outputs[which])
    tags = set(re.findall(r"<([a-z0-9]+)[\s>]", html))
    # images are ours only: the charts written beside a page, a fixed alt text each
    images = re.findall(r'<img (?:alt="[^"]*" src="([^"]*)"|src="([^"]*)" alt="[^"]*")', html)
    srcs = [a or b for a, b in images]  # attributes in either order (Python-Markdown, GFM)
    assert all(re.fullmatch(r"[\w%-]+-charts/[\w-]+\.svg", src) for src in srcs), srcs
    assert len(images) == html.count("<img")
    tags -= {"img"} if images else set()
    assert tags <= ALLOWED_TAGS, tags - ALLOWED_TAGS  # no script, del, ol, foreign img, ...
    for href in re.findall(r'<a href="([^"]*)"', html):
        # links are ours: kernel pages on GitHub and the site's own relative pages
        assert href.startswith("https://github.com/") or re.fullmatch(r"[\w.%-]+", href), href
    assert "javascript:" not in "".join(re.findall(r'href="([^"]*)"', html))
    # every table row has as many cells as its header
    for table in re.findall(r"<table>.*?</table>", html, re.S):
        head = len(re.findall(r"<th[ >]", table.split("</thead>")[0]))
        for row in re.findall(r"<tr>(.*?)</tr>", table.split("</thead>")[1], re.S):
            assert len(re.findall(r"<td[ >]", row)) == head
    # the user's text is all there, as text
    assert "&lt;img src=x onerror=alert(1)&gt;" in html


def test_user_text_in_markdown_is_escaped_exactly(outputs) -> None:
    for convert in (_python_markdown, _gfm):
        for attack in ATTACKS[:4] + ATTACKS[5:10]:
            html = convert(f"| h |\n|---|\n| {md(attack)} |\n")
            cell = re.search(r"<td>(.*?)</td>", html, re.S).group(1)
            shown = cell.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
            shown = shown.replace("&#124;", "|").replace("&quot;", '"').replace("&#126;", "~")
            assert shown.replace("\u200b", "") == attack  # zero-width spaces stop autolinks


def test_text_output_has_no_control_characters(outputs) -> None:
    for text in (outputs["text"], outputs["diff_text"]):
        assert "\x1b" not in text and "\a" not in text
        assert "[31mred" in text  # the printable rest stays


def test_inline_charts_escape_user_text_inside_their_svg(outputs) -> None:
    # Markdown with inline SVG (for MkDocs): the SVG is ours, every user string in it
    # is escaped, and the rest of the page is as escaped as ever
    page = outputs["inline"]
    for svg in re.findall(r"<svg.*?</svg>", page, re.S):
        assert "<img" not in svg and "<script" not in svg
    outside = re.sub(r'<div class="modelcost-chart">.*?</div>', "", page, flags=re.S)
    html = _python_markdown(outside)
    assert "<img" not in html and "<script" not in html


def test_html_escapes_user_text(outputs) -> None:
    html = outputs["html"]
    assert "<img src=x" not in html and "<script>alert" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html


def test_site_hrefs_are_percent_encoded_relative_pages(outputs, tmp_path: Path) -> None:
    index = outputs["index"]
    assert "(javascript%3Aalert%281%29-evil.md)" in index
    assert not re.search(r"(?<!\\)\]\(javascript:", index)  # only the escaped title has it
