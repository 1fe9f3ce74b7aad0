"""The JSON report: the schema_version 1 contract, as the model dumps it.

`tool.generated_at` is the moment the report was written, set by `stamp` where a command
writes a report; $SOURCE_DATE_EPOCH (the reproducible-builds convention) fixes it, so a
pipeline or a test can ask for the same bytes twice. A report never stamped has no such key.
"""

from __future__ import annotations

import json
import os
import time

from triage.model.report import Report


def generated_at() -> str:
    """Now, or $SOURCE_DATE_EPOCH when set, as ISO 8601 UTC (`2026-01-31T12:00:00Z`)."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    when = int(epoch) if epoch.isdigit() else time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when))


def stamp(report: Report) -> Report:
    """The report with its writing time in `tool.generated_at`."""
    return report.model_copy(update={"tool": report.tool.model_copy(update={"generated_at": generated_at()})})


def render(report: Report, **_: object) -> str:
    data = report.model_dump(mode="json")
    if data.get("tool", {}).get("generated_at") is None:
        data["tool"].pop("generated_at", None)
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
