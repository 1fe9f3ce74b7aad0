"""Markdown for a PR comment, a CI job summary or a chat message."""

from __future__ import annotations

from ..report import Report
from .common import command_line, facts_line, headline


def _code(text: str) -> str:
    return "`" + text.replace("`", "'") + "`"


def render(report: Report, **_: object) -> str:
    out = [f"## vllm-triage: {report.outcome}", "", headline(report), ""]
    if report.failure:
        out += ["**Failure**", "", "```", report.failure.message, "```", ""]
        if report.failure.downstream:
            out += ["Then, because of it:", ""]
            out += [f"- line {e.line}, {e.origin or 'main process'}: {_code(e.message[:200])}"
                    for e in report.failure.downstream]
            out.append("")
    if report.outcome == "failed" and not report.diagnoses:
        out += ["No known cause matched; see the failure above.", ""]
    for i, d in enumerate(report.diagnoses, 1):
        out += [f"### {i}. {d.title}", "", f"`{d.id}` · confidence {d.confidence:.2f}", ""]
        if d.explanation:
            out += [d.explanation, ""]
        if d.remedies:
            out += ["**What to change**", ""]
            for r in d.remedies:
                cmd = command_line(r)
                checked = f" ({r.check.text})" if r.check is not None and r.check.text else ""
                out.append(f"- {_code(cmd) + ': ' if cmd else ''}{r.text}{checked}")
            out.append("")
        if d.evidence:
            out += ["<details><summary>Evidence</summary>", "", "```"]
            out += [f"{e.line:>6} | {e.text}" for e in d.evidence]
            out += ["```", "", "</details>", ""]
    facts = facts_line(report)
    if facts:
        out += ["| fact | value |", "|---|---|"] + [f"| {k} | {v} |" for k, v in facts] + [""]
    for note in report.notes:
        out.append(f"> {note}")
    return "\n".join(out).rstrip() + "\n"
