"""The JSON report: the schema_version 1 contract, as the model dumps it."""

from __future__ import annotations

import json

from triage.model.report import Report


def render(report: Report, **_: object) -> str:
    return json.dumps(report.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"
