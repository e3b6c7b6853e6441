"""An answer as data for scripts: its JSON (the pydantic model), or its rows as CSV
(tabular.Tabular). One rule for every answer that has both: sweeps, serving figures,
searches, mixes, arrival runs and disaggregated answers."""

from __future__ import annotations

from typing import Protocol


class _Answer(Protocol):
    def model_dump_json(self, *, indent: int) -> str: ...

    def to_csv(self) -> str: ...


def as_data(answer: _Answer, fmt: str) -> str | None:
    """`answer` in `fmt` when that is `json` or `csv`; None for the other formats."""
    if fmt == "json":
        return answer.model_dump_json(indent=2) + "\n"
    if fmt == "csv":
        return answer.to_csv()
    return None
