"""Writing reports: render several in one format, pick a width for a terminal, write to a file
or a stream. Shared by the main command (`cli.py`) and the watches (`live.py`)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import IO

NO_REDACT_WARNING = (
    "vllm-triage: warning: --no-redact shows secrets from the log unmasked; keep this report local, never paste it\n"
)


def render_all(reports: list, fmt: str, **render_options) -> str:
    """Render each report in one format.

    No redaction here (the one policy, diagnose/redaction.py): the pipeline redacted every log
    line whole before anything was cut, so the report holds no secret; a pass over the
    laid-out text would mask the tool's own words and break lines the layout already measured.
    """
    from triage.render import render
    from triage.render.sanitise import clean_data

    reports = [clean_data(r) for r in reports]  # every format, the one-line and the many-log ones too
    if fmt == "quiet":
        from triage.render.common import one_line

        return "".join(one_line(r) + "\n" for r in reports)
    if fmt == "json":
        from triage.render.json_format import stamp

        reports = [stamp(r) for r in reports]
    if fmt == "github" and len(reports) > 1:
        from triage.render.github import render_many

        return render_many(reports)
    return _join([render(report, fmt, **render_options) for report in reports], fmt)


def write(text: str, out: str | None, stdout: IO[str], inputs: Iterable[str] = ()) -> None:
    """`text` to the file `out`, or to `stdout` when `out` is None; a file error is a usage error.
    A file is written without following links and never over one of `inputs` (safe_write.py)."""
    if out is None:
        stdout.write(text)
        return
    from triage.apps.safe_write import write_file

    write_file(out, text, inputs)


def _join(chunks: list[str], fmt: str) -> str:
    if fmt == "json" and len(chunks) > 1:  # several logs: one JSON object per line (JSON Lines)
        import json

        return "".join(json.dumps(json.loads(c), ensure_ascii=False) + "\n" for c in chunks)
    from triage.render import join

    return join(chunks, fmt)


def terminal_width() -> int:
    """The terminal's width, kept within 60..160 (100 when there is no terminal)."""
    try:
        return max(60, min(os.get_terminal_size().columns, 160))
    except OSError:
        return 100


def emit(
    report,
    fmt: str | None,
    out: str | None,
    stream: IO[str],
    color_mode: str = "auto",
    width: int | None = None,
) -> None:
    """Write one report as a watch does: the format and colour chosen for `stream`, then flush."""
    from triage.apps.conventions import color_wanted, default_format

    tty = out is None and isatty(stream)
    fmt = fmt or default_format(tty)
    color = color_wanted(color_mode, tty)
    text = render_all([report], fmt, width=width or (terminal_width() if tty else 100), color=color)
    write(text, out, stream)
    stream.flush()


def isatty(stream) -> bool:
    """Is the stream a terminal? (False for closed streams and objects without `isatty`.)"""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
