"""Markdown for a PR comment, a CI job summary or a chat message.

Every string taken from the report can hold log text (a model name, a message, a path), so
each one is escaped for where it lands: running text gets a backslash before every
character Markdown or GitHub's HTML sanitiser would read as markup (`<`, `[`, `` ` ``, `|`,
`*`, `&`, ...) and `@` loses its mention; code spans and blocks get a fence longer than any
run of backticks inside them. Only the tool's own headings and emphasis stay markup.
"""

from __future__ import annotations

import re

from triage.model.report import Report
from triage.render.common import command_line, facts_line, headline

_SPECIAL = re.compile(r"([\\`*_\[\]<>#!|~&$])")
_LIST_START = re.compile(r"^(\d+)([.)])(?=\s|$)")  # "1." at the start of a line would begin a list
_BACKTICKS = re.compile(r"`+")
MESSAGE_CHARS = 20_000  # a failure message longer than this is cut (the job summary has a 1 MiB cap)


def text(value: object) -> str:
    """Log-derived text as inert Markdown: one line, markup characters escaped, no @mention."""
    flat = " ".join(str(value).split())
    escaped = _SPECIAL.sub(r"\\\1", flat)
    escaped = _LIST_START.sub(r"\1\\\2", escaped)
    if escaped[:1] in ("-", "+", "="):  # a list item, a rule or a setext heading
        escaped = "\\" + escaped
    return escaped.replace("@", "@&#8203;")  # a zero-width space: GitHub links no @team


def code(value: object) -> str:
    """An inline code span that holds any text, backticks included."""
    flat = " ".join(str(value).split())
    fence = "`" * (_longest_run(flat) + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") or not flat.strip() else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def block(lines: list[str]) -> list[str]:
    """A fenced code block that no line inside can close."""
    fence = "`" * max(3, max((_longest_run(line) for line in lines), default=0) + 1)
    return [fence, *lines, fence]


def _longest_run(value: str) -> int:
    return max((len(m.group()) for m in _BACKTICKS.finditer(value)), default=0)


def render(report: Report, message_chars: int = MESSAGE_CHARS, **_: object) -> str:
    out = [f"## vllm-triage: {report.outcome}", "", text(headline(report)), ""]
    if report.failure:
        message = report.failure.message
        if len(message) > message_chars:
            message = message[:message_chars] + f"… ({len(message) - message_chars} characters cut)"
        out += ["**Failure**", "", *block(message.splitlines() or [""]), ""]
        if report.failure.downstream:
            out += ["Then, because of it:", ""]
            out += [
                f"- line {e.line}, {text(e.origin or 'main process')}: {code(e.message[:200])}"
                for e in report.failure.downstream
            ]
            out.append("")
    if report.outcome == "failed" and not report.diagnoses:
        out += ["No known cause matched; see the failure above.", ""]
    for i, d in enumerate(report.diagnoses, 1):
        out += [f"### {i}. {text(d.title)}", "", f"{code(d.id)} · confidence {d.confidence:.2f}", ""]
        if d.explanation:
            out += [text(d.explanation), ""]
        if d.remedies:
            out += ["**What to change**", ""]
            for r in d.remedies:
                cmd = command_line(r)
                checked = f" ({r.check.text})" if r.check is not None and r.check.text else ""
                out.append(f"- {code(cmd) + ': ' if cmd else ''}{text(r.text + checked)}")
            out.append("")
        if d.evidence:
            out += ["<details><summary>Evidence</summary>", ""]
            out += block([f"{e.line:>6} | {e.text}" for e in d.evidence])
            out += ["", "</details>", ""]
    facts = facts_line(report)
    if facts:
        out += ["| fact | value |", "|---|---|"] + [f"| {text(k)} | {text(v)} |" for k, v in facts] + [""]
    for note in report.notes:
        out.append(f"> {text(note)}")
    return "\n".join(out).rstrip() + "\n"
