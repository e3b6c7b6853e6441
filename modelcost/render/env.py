"""The jinja2 environments for the templates/ folder: strict; HTML templates autoescape
HTML, Markdown templates escape every inserted value for Markdown (render/escape.py)
unless it is already Markdown (a table we built)."""

from __future__ import annotations

from functools import cache

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

from ..resources import templates_dir
from .escape import md


@cache
def environment(markdown: bool = False) -> Environment:
    return Environment(
        loader=FileSystemLoader(str(templates_dir())),
        autoescape=select_autoescape(enabled_extensions=("html", "html.j2"), default=False),
        undefined=StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=md if markdown else None,
    )


def render(template: str, **context) -> str:
    markdown = template.endswith(".md.j2")
    return environment(markdown).get_template(template).render(**context)
