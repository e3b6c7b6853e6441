"""The jinja2 environments for the templates/ folder: strict; HTML templates autoescape
HTML after cleaning every inserted value (render/escape.clean: no control, bidi or
XML-invalid character) unless it is markup we built (a chart); Markdown templates
escape every inserted value for Markdown (render/escape.md) unless it is already
Markdown (a table we built). `href` percent-encodes a link once (escape.safe_href)."""

from __future__ import annotations

from functools import cache

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from modelcost.base.resources import templates_dir

from .charts import FONT, INK
from .escape import clean, md, safe_href


def _html(value: object) -> object:
    """A value as an HTML template inserts it: cleaned, unless it is our markup."""
    return value if isinstance(value, Markup | int | float) or value is None else clean(value)


@cache
def environment(markdown: bool = False) -> Environment:
    env = Environment(
        loader=FileSystemLoader(str(templates_dir())),
        autoescape=select_autoescape(enabled_extensions=("html", "html.j2"), default=False),
        undefined=StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=md if markdown else _html,
    )
    env.filters["href"] = safe_href
    env.globals.update(ink=INK, font=FONT)  # the page style's, the charts' own
    return env


def render(template: str, **context) -> str:
    markdown = template.endswith(".md.j2")
    return environment(markdown).get_template(template).render(**context)
