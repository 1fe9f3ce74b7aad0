"""JUnit XML, the test-report format Jenkins and GitLab read: one test case per diagnosis.

A diagnosis is a failing test case named after its cause id, so a CI page lists *why*
the server did not start; a log without diagnoses is one test case named "startup"
(passing unless the log shows an undiagnosed failure). Built with ElementTree, which
escapes; characters XML 1.0 forbids (NUL, most C0 controls, lone surrogates) are stripped
first, since no escape can carry them.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from triage.model.report import Diagnosis, Report
from triage.render.common import command_line, headline

SUITE = "vllm-triage"
STARTUP_CASE = "startup"
UNKNOWN_CAUSE = "unknown_failure"
MESSAGE_CHARS = 500
_ILLEGAL_XML = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def clean(text: str) -> str:
    """Drop the characters that XML 1.0 cannot hold, even escaped."""
    return _ILLEGAL_XML.sub("", text)


def render(report: Report, **_: object) -> str:
    return document(_testcases(report))


def join(chunks: list[str]) -> str:
    """Several logs: every test case under one <testsuites>, with the counts summed."""
    if len(chunks) == 1:
        return chunks[0]
    return document([case for chunk in chunks for case in ET.fromstring(chunk).iter("testcase")])


def document(cases: list[ET.Element]) -> str:
    failures = sum(1 for case in cases if case.find("failure") is not None)
    counts = {"tests": str(len(cases)), "failures": str(failures), "errors": "0"}
    root = ET.Element("testsuites", {"name": SUITE, **counts, "time": "0"})
    suite = ET.SubElement(root, "testsuite", {"name": SUITE, **counts, "skipped": "0", "time": "0"})
    suite.extend(cases)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _testcases(report: Report) -> list[ET.Element]:
    if report.outcome == "recovered":  # the server came up: a passing case that says what failed first
        case = _case(report, STARTUP_CASE)
        causes = ", ".join(d.id for d in report.diagnoses)
        ET.SubElement(case, "system-out").text = clean(f"{headline(report)}\nthe failed attempt: {causes}")
        return [case]
    if report.diagnoses:
        return [_diagnosis_case(report, d) for d in report.diagnoses]
    case = _case(report, STARTUP_CASE)
    if report.outcome == "failed":
        message = report.failure.message if report.failure else headline(report)
        _failure(case, message, UNKNOWN_CAUSE, [headline(report), "No known cause matched this failure.", "", message])
    else:
        ET.SubElement(case, "system-out").text = clean(headline(report))
    return [case]


def _case(report: Report, name: str) -> ET.Element:
    classname = f"{SUITE}.{report.input.name}"
    return ET.Element("testcase", {"classname": clean(classname), "name": clean(name), "time": "0"})


def _diagnosis_case(report: Report, d: Diagnosis) -> ET.Element:
    case = _case(report, d.id)
    lines = [headline(report), f"cause: {d.id} (confidence {d.confidence:.2f}{', rule ' + d.rule if d.rule else ''})"]
    if d.explanation:
        lines += ["", d.explanation]
    if d.remedies:
        lines += ["", "What to change:"]
        lines += [f"  {command_line(r) or '-'}    {r.text}".rstrip() for r in d.remedies]
    if d.evidence:
        lines += ["", "Evidence:"]
        lines += [f"  {e.line:>6} | {e.text}" for e in d.evidence]
    _failure(case, d.title, d.id, lines)
    return case


def _failure(case: ET.Element, message: str, kind: str, lines: list[str]) -> None:
    message = " ".join(clean(message).split())
    message = message if len(message) <= MESSAGE_CHARS else message[: MESSAGE_CHARS - 1] + "…"
    failure = ET.SubElement(case, "failure", {"message": message, "type": clean(kind)})
    failure.text = clean("\n".join(lines))
