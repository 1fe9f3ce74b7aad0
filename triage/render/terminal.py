"""The terminal report (rich): what failed, why, what to type, in ten seconds of reading.

Laid out for a tired engineer at 80 columns: the top cause and its confidence open the
first line; each remedy's command stands on a line of its own that never wraps (a long
one runs past the edge, so a copy from the terminal is still one command); evidence shows
the message, not the logger prefix, with the process it came from in a column of its own;
tabs are expanded so no line is wider than it looks. Text reaches here already redacted.
"""

from __future__ import annotations

import io
import re

from rich.console import Console
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from triage.ingest.lines import peel
from triage.model.report import Diagnosis, Report
from triage.render.common import command_line, facts_line, headline
from triage.render.sanitise import clean

OUTCOME_STYLE = {"failed": "bold red", "healthy": "bold green", "incomplete": "bold yellow", "recovered": "bold yellow"}
TAB = 4
ORIGIN_CHARS = 20


def render(report: Report, width: int = 100, color: bool = False, **_: object) -> str:
    buf = io.StringIO()
    console = Console(
        file=buf,
        width=width,
        force_terminal=color,
        color_system="standard" if color else None,
        highlight=False,
        soft_wrap=False,
        emoji=False,
    )
    style = OUTCOME_STYLE[report.outcome]
    if report.diagnoses:
        top = report.diagnoses[0]
        console.print(Text(f"{top.id} (confidence {top.confidence:.2f}): {_flat(top.title)}", style=style))
        console.print(Text(_flat(headline(report))))
    else:
        console.print(Text(_flat(headline(report)), style=style))
    if report.failure:
        console.print(Text(_clip(_tabs(report.failure.message), 400), style="red"))
        for echo in report.failure.downstream[:3]:
            who = echo.origin or "main process"
            console.print(Text(f"then {who} (line {echo.line}): {_clip(_flat(echo.message), width - 30)}", style="dim"))
    if report.outcome == "failed" and not report.diagnoses:
        console.print("No known cause matched this failure; the evidence is above.")
    for i, d in enumerate(report.diagnoses, 1):
        console.print()
        _diagnosis(console, i, d, width)
    facts = facts_line(report)
    if facts:
        console.print()
        table = Table(show_header=False, box=None, padding=(0, 1))
        for label, value in facts:
            table.add_row(escape(label), escape(_flat(value)))
        console.print(table)
    for note in report.notes:
        console.print(Text(f"note: {_flat(note)}", style="dim"))
    return "\n".join(_inert(line.rstrip()) for line in buf.getvalue().splitlines()) + "\n"


_LEADING_COMMAND = re.compile(r"(?:\s|\x1b\[[0-9;]{0,16}m)*::")  # after spaces and the report's own colours


def _inert(line: str) -> str:
    """A line the layout made start with `::` (a long word folded there) is no runner command."""
    m = _LEADING_COMMAND.match(line) if "::" in line else None
    return line if m is None else line[: m.end() - 2] + ": :" + line[m.end() :]


def _diagnosis(console: Console, i: int, d: Diagnosis, width: int) -> None:
    head = Text.assemble((f"{i}. {d.id}", "bold"), (f" (confidence {d.confidence:.2f})", "dim"))
    console.print(head)
    console.print(Padding(Text(_flat(d.title), style="bold"), (0, 0, 0, 3)))
    if d.explanation:
        console.print(Padding(Text(_flat(d.explanation)), (0, 0, 0, 3)))
    if d.remedies:
        console.print(Text("   What to change:", style="bold"))
        for r in d.remedies:
            cmd = command_line(r)
            said = Text(_flat(r.text))
            if r.check is not None and r.check.text:  # what the memory model checked it against
                said.append(f" ({_flat(r.check.text)})", style="dim")
            if cmd:  # never wrapped: a command copied from the terminal must stay one command
                console.print(
                    Text("     " + _flat(cmd), style="bold cyan"), no_wrap=True, overflow="ignore", crop=False
                )
                console.print(Padding(said, (0, 0, 0, 7)))
            else:
                console.print(Padding(said, (0, 0, 0, 5)))
    if d.evidence:
        console.print(Text("   Evidence:", style="bold"))
        _evidence(console, d, width)


def _evidence(console: Console, d: Diagnosis, width: int) -> None:
    """line │ origin │ message, each row one line: the message is cut at the edge, never wrapped."""
    number_width = max(len(str(e.line)) for e in d.evidence)
    origin_width = max(len(_origin(e.origin)) for e in d.evidence)
    for e in d.evidence:
        message = _flat(clean(peel(e.text, e.line).text) or e.text)  # peeling may bare what was glued
        origin = f"{_origin(e.origin):<{origin_width}} │ " if origin_width else ""
        prefix = f"   {e.line:>{number_width}} │ {origin}"
        row = Text(prefix, style="dim")
        row.append(_clip(message, max(width - len(prefix), 10)))
        console.print(row, no_wrap=True, overflow="ignore", crop=False)


def _origin(origin: str) -> str:
    """The process, without its pid (the line number already points at the line)."""
    short = origin.strip("() ").split(" pid=")[0] if origin else ""
    return short if len(short) <= ORIGIN_CHARS else short[: ORIGIN_CHARS - 1] + "…"


def _tabs(text: str) -> str:
    return text.expandtabs(TAB)


def _flat(text: object) -> str:
    """One line: tabs expanded, other whitespace runs (a newline in a message) one space."""
    return " ".join(_tabs(str(text)).split())


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: max(n - 1, 1)] + "…"
