"""The pipeline and the renderer, as a worker process runs them for one request.

Kept apart from the routes so that the worker processes import this and not the server:
`workers` -> `job` -> pipeline, with no way back.
"""

from __future__ import annotations

import io
import json

from triage.diagnose.redact import redact_data, redact_text
from triage.pipeline import Options, run
from triage.render import render


def render_answer(report, fmt: str) -> str:
    """The report in one format; the last guard of redaction runs on the final text."""
    if fmt == "json":
        from triage.render.json_format import stamp

        return render(stamp(report), "json")
    if fmt == "markdown":
        return redact_text(render(report, "markdown"))
    return json.dumps(redact_data(json.loads(render(report, "slack"))), ensure_ascii=False)


class Answer(str):
    """The rendered report, carrying its outcome and leading cause for the server's metrics.

    A str (everything that sends or compares the text is unchanged); the two attributes
    travel with it through the worker's pipe."""

    outcome: str | None = None
    cause: str | None = None


def analyse_bytes(data: bytes, name: str, fmt: str, rules, limit: int) -> str:
    """In a worker process: the pipeline (redacting, as always) and the renderer."""
    report = run(io.BytesIO(data), name, Options(max_bytes=limit), rules)
    answer = Answer(render_answer(report, fmt))
    answer.outcome = report.outcome
    answer.cause = report.diagnoses[0].id if report.diagnoses else None
    return answer
