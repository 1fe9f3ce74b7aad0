"""The terminal report (rich): what failed, why, what to type, in ten seconds of reading."""

from __future__ import annotations

import io

from rich.console import Console
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from ..report import Report
from .common import command_line, facts_line, headline

OUTCOME_STYLE = {"failed": "bold red", "healthy": "bold green", "incomplete": "bold yellow",
                 "recovered": "bold yellow"}


def render(report: Report, width: int = 100, color: bool = False, **_: object) -> str:
    buf = io.StringIO()
    console = Console(file=buf, width=width, force_terminal=color, color_system="standard" if color else None,
                      highlight=False, soft_wrap=False, emoji=False)
    console.print(Text(headline(report), style=OUTCOME_STYLE[report.outcome]))
    if report.failure:
        console.print(Text(_clip(report.failure.message, 400), style="red"))
        for echo in report.failure.downstream[:3]:
            who = echo.origin or "main process"
            console.print(Text(f"then {who} (line {echo.line}): {_clip(echo.message, width - 30)}", style="dim"))
    if report.outcome == "failed" and not report.diagnoses:
        console.print("No known cause matched this failure; the evidence is above.")
    for i, d in enumerate(report.diagnoses, 1):
        console.print()
        console.print(Text.assemble((f"{i}. {d.title}", "bold"), (f"  [{d.id}, confidence {d.confidence:.2f}]", "dim")))
        if d.explanation:
            console.print(Padding(Text(d.explanation), (0, 0, 0, 3)))
        if d.remedies:
            console.print(Text("   What to change:", style="bold"))
            for r in d.remedies:
                cmd = command_line(r)
                line = Text()
                if cmd:
                    line.append(cmd, style="bold cyan")
                    line.append("  ")
                line.append(r.text)
                console.print(Padding(line, (0, 0, 0, 5)))
        if d.evidence:
            console.print(Text("   Evidence:", style="bold"))
            for e in d.evidence:
                console.print(Text(f"   {e.line:>6} │ {_clip(e.text, width - 14)}", style="dim"))
    facts = facts_line(report)
    if facts:
        console.print()
        table = Table(show_header=False, box=None, padding=(0, 1))
        for label, value in facts:
            table.add_row(escape(label), escape(value))
        console.print(table)
    for note in report.notes:
        console.print(Text(f"note: {note}", style="dim"))
    return "\n".join(line.rstrip() for line in buf.getvalue().splitlines()) + "\n"


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: max(n - 1, 1)] + "…"
