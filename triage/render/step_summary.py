"""The GitHub Actions job summary: the Markdown reports appended to $GITHUB_STEP_SUMMARY, under 1 MiB.

GitHub refuses a step summary over 1 MiB (and shows none of it), so whole reports are
added while they fit; a report too large on its own is shortened (its failure message
cut), and what was left out is named in a closing note.
"""

from __future__ import annotations

import os

LIMIT_BYTES = 1 << 20
MARGIN_BYTES = 8 << 10  # room for the closing note and what other steps' tools add
SHORT_MESSAGE_CHARS = 2_000


def append_step_summary(path: str, reports: list) -> None:
    """Append the reports GitHub shows on the run's page; one line on stderr (exit 2) if it cannot."""
    try:
        used = os.path.getsize(path)
    except OSError:
        used = 0
    from triage.apps.safe_write import append_file

    text = summary_text(reports, LIMIT_BYTES - MARGIN_BYTES - used)
    append_file(path, text, what=f"GITHUB_STEP_SUMMARY {path}")


def summary_text(reports: list, budget: int) -> str:
    """As many whole reports as fit in `budget` bytes (UTF-8), then a note of the ones cut.
    The reports were redacted as the logs were read (the one policy, diagnose/redaction.py),
    so the Markdown is not scanned again, as `-f markdown` is not."""
    from triage.render.markdown import render
    from triage.render.sanitise import clean_data

    chunks, cut, size = [], [], 0
    for report in map(clean_data, reports):
        for options in ({}, {"message_chars": SHORT_MESSAGE_CHARS}):
            text = render(report, **options) + "\n"  # from the redacted report: no pass over the text
            if size + len(text.encode("utf-8")) <= budget:
                chunks.append(text)
                size += len(text.encode("utf-8"))
                break
        else:
            cut.append(report.input.name)
    if cut:
        from triage.render.markdown import text as md_text

        names = ", ".join(md_text(n) for n in cut[:50]) + (", ..." if len(cut) > 50 else "")
        chunks.append(
            f"> vllm-triage: {len(cut)} of {len(reports)} reports left out to keep the step summary "
            f"under GitHub's 1 MiB limit: {names}. Write them all with `-f markdown -o FILE`.\n"
        )
    return "".join(chunks)
