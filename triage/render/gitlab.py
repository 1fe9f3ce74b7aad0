"""GitLab Code Quality JSON (`--format gitlab`): the merge request widget's findings.

GitLab reads a JSON array of issues (a subset of Code Climate's format): `description`,
`check_name`, `fingerprint`, `severity` (info, minor, major, critical, blocker) and
`location` (`path`, `lines.begin`). One issue per diagnosis, at its first evidence line (the
failure's line when it has none); an undiagnosed failure is one issue; a clean log is none.
The fingerprint hashes the log's name, the cause and the rule, not the line, so GitLab
matches the same finding across pipelines even when the log's length changes.
"""

from __future__ import annotations

import hashlib
import json

from triage.model.report import Diagnosis, Report
from triage.render.common import best_remedy, command_line, headline

DESCRIPTION_CHARS = 1000


def _severity(report: Report, diagnosis: Diagnosis | None) -> str:
    if report.outcome != "failed":
        return "minor"  # the server came up (or the log stops early): worth a look, not a blocker
    if diagnosis is None:
        return "major"
    return "critical" if diagnosis.confidence >= 0.8 else "major"


def _issue(report: Report, check: str, rule: str, text: str, line: int, severity: str) -> dict:
    digest = hashlib.sha256("\0".join((report.input.name, check, rule)).encode("utf-8", "replace")).hexdigest()
    text = " ".join(text.split())
    if len(text) > DESCRIPTION_CHARS:
        text = text[: DESCRIPTION_CHARS - 1] + "…"
    return {
        "type": "issue",
        "check_name": check,
        "description": text,
        "categories": ["Bug Risk"],
        "fingerprint": digest,
        "severity": severity,
        "location": {"path": report.input.name, "lines": {"begin": max(line, 1)}},
    }


def issues(report: Report) -> list[dict]:
    """The report's findings as Code Quality issues."""
    failure_line = report.failure.line if report.failure else 1
    out = []
    for d in report.diagnoses:
        best = best_remedy(d)
        fix = f" Fix: {command_line(best)}." if best else ""
        line = d.evidence[0].line if d.evidence else failure_line
        text = f"vllm-triage: {d.title} [{d.id}, confidence {d.confidence:.2f}].{fix}"
        out.append(_issue(report, d.id, d.rule, text, line, _severity(report, d)))
    if not out and report.outcome == "failed":
        message = report.failure.message if report.failure else ""
        out.append(
            _issue(
                report,
                "unknown_failure",
                "",
                f"vllm-triage: {headline(report)}. No known cause matched: {message}",
                failure_line,
                _severity(report, None),
            )
        )
    return out


def render(report: Report, **_: object) -> str:
    return json.dumps(issues(report), indent=2, ensure_ascii=False) + "\n"


def join(chunks: list[str]) -> str:
    """Several logs: one array holding every log's issues."""
    merged = [issue for chunk in chunks for issue in json.loads(chunk)]
    return json.dumps(merged, indent=2, ensure_ascii=False) + "\n"
