"""JSON: the report model as it is (its JSON Schema: `modelcost schema --report`)."""

from __future__ import annotations

import json

from ..report import REPORT_SCHEMA_VERSION, Report


def render_json(reports: list[Report]) -> str:
    """One report as an object; several (one per phase) under `reports`."""
    if len(reports) == 1:
        return reports[0].model_dump_json(indent=2) + "\n"
    body = {
        "schema_version": REPORT_SCHEMA_VERSION,
        "reports": [r.model_dump(mode="json") for r in reports],
    }
    return json.dumps(body, indent=2) + "\n"
