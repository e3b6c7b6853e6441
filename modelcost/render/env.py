"""The jinja2 environment for the templates/ folder: strict, autoescaped for HTML."""

from __future__ import annotations

from functools import cache

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

from ..resources import templates_dir


@cache
def environment() -> Environment:
    return Environment(
        loader=FileSystemLoader(str(templates_dir())),
        autoescape=select_autoescape(enabled_extensions=("html", "html.j2"), default=False),
        undefined=StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render(template: str, **context) -> str:
    return environment().get_template(template).render(**context)
