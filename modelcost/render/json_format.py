"""The JSON format of reports and diffs: the models as they are, through pydantic's
serializer. Its own module so that `--format json` loads neither the templates nor
the table code."""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelcost.ir.report import Report, ReportSet

if TYPE_CHECKING:
    from modelcost.analyses.diff import DiffReport


def render_json(reports: list[Report]) -> str:
    """`{"schema_version": 2, "reports": [Report, ...]}` for any number of phases (its
    JSON Schema: `modelcost schema --report`)."""
    rs = ReportSet.trusted(reports=tuple(reports))
    # what model_dump_json writes, the newline added to the bytes: one copy of a large
    # report (50 MB for 1,000 distinct layers) fewer than adding it to the decoded text
    return (rs.__pydantic_serializer__.to_json(rs, indent=2) + b"\n").decode()


def render_diff_json(d: DiffReport) -> str:
    return d.model_dump_json(indent=2) + "\n"
