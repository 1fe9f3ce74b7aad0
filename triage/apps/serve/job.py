"""The pipeline and the renderer, as a worker process runs them for one request.

Kept apart from the routes so that the worker processes import this and not the server:
`workers` -> `job` -> pipeline, with no way back.
"""

from __future__ import annotations

import io

from triage.diagnose.redaction import SERVER
from triage.pipeline import Options, run
from triage.render import render


def render_answer(report, fmt: str) -> str:
    """The report in one format, laid out from the redacted report as the CLI lays it out: no
    pass over the rendered text (the one policy, diagnose/redaction.py)."""
    if fmt == "json":
        from triage.render.json_format import stamp

        return render(stamp(report), "json")
    return render(report, fmt)


class Answer(str):
    """The rendered report, carrying its outcome and leading cause for the server's metrics.

    A str (everything that sends or compares the text is unchanged); the two attributes
    travel with it through the worker's pipe."""

    outcome: str | None = None
    cause: str | None = None


def analyse_bytes(data: bytes, name: str, fmt: str, rules, limit: int) -> str:
    """In a worker process: the pipeline (redacting, always: the server never un-redacts) and the renderer."""
    report = run(io.BytesIO(data), name, Options(redact=SERVER.on, max_bytes=limit), rules)
    answer = Answer(render_answer(report, fmt))
    answer.outcome = report.outcome
    answer.cause = report.diagnoses[0].id if report.diagnoses else None
    return answer
