"""The JSON format of reports and diffs: the models as they are, through pydantic's
serializer. Its own module so that `--format json` loads neither the templates nor
the table code."""

from __future__ import annotations

from ..diff import DiffReport
from ..report import Report, ReportSet


def render_json(reports: list[Report]) -> str:
    """`{"schema_version": 2, "reports": [Report, ...]}` for any number of phases (its
    JSON Schema: `modelcost schema --report`)."""
    return ReportSet.trusted(reports=tuple(reports)).model_dump_json(indent=2) + "\n"


def render_diff_json(d: DiffReport) -> str:
    return d.model_dump_json(indent=2) + "\n"
