"""Display tables: cells with their text, sort key, link and tooltip; rendered as HTML by
the templates and as Markdown pipe tables here (every cell escaped)."""

from __future__ import annotations

from tabulate import tabulate

from modelcost.base.record import Record

from .escape import Markdown, md, md_link


class Cell(Record, frozen=True):
    text: str
    sort: float | str | None = None  # the value a sortable HTML table sorts by
    href: str | None = None
    title: str | None = None


class Table(Record, frozen=True):
    id: str
    headers: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    numeric: tuple[bool, ...]  # right-aligned columns

    def markdown(self) -> Markdown:
        """A pipe table; every cell escaped for Markdown, links percent-encoded."""

        def cell(c: Cell) -> str:
            return md_link(c.text, c.href) if c.href else md(c.text)

        return Markdown(
            tabulate(
                [[cell(c) for c in row] for row in self.rows],
                headers=[md(h) for h in self.headers],
                tablefmt="pipe",
                colalign=["right" if n else "left" for n in self.numeric],
                disable_numparse=True,
            )
        )


def num(text: str, value: float | None) -> Cell:
    """A numeric cell: its text, sorted by its value."""
    return Cell(text, value)
