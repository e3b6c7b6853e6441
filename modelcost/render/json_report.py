"""JSON: the reports as they are, one layout for any number of phases:
`{"schema_version": 2, "reports": [Report, ...]}` (its JSON Schema: `modelcost schema
--report`)."""

from __future__ import annotations

from ..report import Report, ReportSet


def render_json(reports: list[Report]) -> str:
    return ReportSet(reports=tuple(reports)).model_dump_json(indent=2) + "\n"
