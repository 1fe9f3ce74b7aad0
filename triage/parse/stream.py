"""Marked physical lines to (line, events): the parse stage as a stream.

Joins lines a terminal hard-wrapped, skips progress-bar updates and request-logger lines (user
text), keeps unknown ERROR lines, and hands nvidia-smi/fuser rows to the evidence reader.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Protocol

from triage.ingest.control import Marked, ScanControl
from triage.ingest.lines import REQUEST_LOG_PREFIXES, Line, peel, starts_record
from triage.model import events as ev
from triage.parse.parse import parse_line_detail
from triage.parse.sysinfo import BundleReader

MAX_JOINS = 3
WRAP_MIN_CHARS = 60  # a line shorter than any terminal is wide was not cut by a wrap


# vLLM's request logger: user text, never evidence (ingest/lines.py says what it looks like).


class Redactor(Protocol):
    """What the stage asks of the redactor it is handed (diagnose.redact.LineRedactor): the
    stage masks nothing itself and imports no later stage."""

    def __call__(self, line: str) -> str:
        """A physical line, in the log's order (a redactor may remember an open key block)."""

    def joined(self, text: str) -> str:
        """A text re-joined from wrapped lines (on the side: the line order is unchanged)."""


def line_events(
    marked: Iterable[Marked], clean: Redactor | None = None, control: ScanControl | None = None
) -> Iterator[tuple[Line, list[ev.Event]]]:
    """(line, events) for every line that states something, re-joining hard-wrapped lines.

    `clean` (the redactor) sees each line whole, before it is parsed, joined or cut: every
    text of the report (evidence, messages, facts) comes from what it returns.

    A message that runs into the end of its line followed by a line with no prefix of its
    own was wrapped by a terminal, an editor or a chat box: the two are parsed as one.
    `marked` holds only the lines near anchors (see `scan.iter_marked`); a gap in the line
    numbers stands for lines that hold nothing, and ends any wrap. `control` (the scan's) is
    told each line that holds its whole message (`ScanControl.line_complete`).
    """
    held: tuple[str, Line, list[ev.Event], bool] | None = None  # raw, line, events, ran out
    joins = last = 0
    evidence = BundleReader()
    complete = control.line_complete if control is not None else None
    bars_seen: set[str] = set()
    for no, raw, anchored, bundled in marked:
        if "\n" in raw:  # rows of a long table past its first ones (ingest/rows.py)
            if held is not None and held[2]:
                yield held[1], held[2]
            held, joins, last = None, 0, no + raw.count("\n")
            yield from _table_rows(no, raw.split("\n"), clean, evidence)
            continue
        cut = held is not None and not held[3] and _cut_mid_token(held[0], raw)
        if held is not None and no == last + 1 and (held[3] or cut) and joins < MAX_JOINS and _continues(raw):
            joined = peel(clean.joined(held[0] + raw) if clean else held[0] + raw, held[1].no)
            events, ran_out = parse_line_detail(joined)
            # a message that parsed whole is joined only where the join states more (a family
            # its cut hid); else the follower is a line of its own
            if len(events) > len(held[2]) or (not cut and len(events) == len(held[2]) and events != held[2]):
                held, joins, last = (held[0] + raw, joined, events, ran_out), joins + 1, no
                continue
        last = no
        if held is not None and held[2]:
            yield held[1], held[2]
        held, joins = None, 0
        if not (anchored or bundled):
            continue
        progress = _progress_key(raw) if anchored else None
        if progress is not None and progress in bars_seen:  # the same bar again: it states nothing new
            if complete is not None:
                complete()
            continue
        line = peel(clean(raw) if clean else raw, no)
        if line.text.startswith(REQUEST_LOG_PREFIXES):  # user content: words in it state nothing
            if complete is not None:
                complete()
            continue
        if anchored:
            events, ran_out = parse_line_detail(line)
            events = events or _error_line(line)
            # A long line whose anchor word states nothing may be a phrase a wrap cut in two.
            ran_out = ran_out or (not events and len(line.text) >= WRAP_MIN_CHARS)
            # an exception's message that stops inside a word may go on on the next line (a cut)
            if not ran_out and complete is not None and not _open_ended(raw, events):
                complete()
            if progress is None:
                if events:
                    bars_seen.clear()  # a bar after other news (a new attempt, a new phase) is read again
            elif len(bars_seen) < MAX_BARS:
                bars_seen.add(progress)
            if events or ran_out:
                held = (raw, line, events, ran_out)
                continue
        if bundled:
            found = evidence.read(line)
            if found:
                yield line, found
    if held is not None and held[2]:
        yield held[1], held[2]


def _table_rows(
    no: int, rows: list[str], clean: Redactor | None, reader: BundleReader
) -> Iterator[tuple[Line, list[ev.Event]]]:
    """A block of table rows: the largest and the last read whole, the others counted and summed
    by one pattern (`BundleReader.tally`); every row read whole when the pattern does not fit."""
    tally = reader.tally(rows)
    keep, counted, held = tally if tally is not None else (range(len(rows)), 0, 0)
    for i in keep:
        line = peel(clean(rows[i]) if clean else rows[i], no + i)
        found = reader.read(line)
        if counted and i == len(rows) - 1:
            found = [*found, ev.GpuProcessesCounted(line=line.no, origin=line.origin, count=counted, bytes=held)]
        if found:
            yield line, found


# A progress bar's update line (tqdm: "Loading safetensors checkpoint shards:  53% Completed |
# 16/30 [...]", "Capturing CUDA graphs: 45%|████▌ | 30/67 [...]"): its events do not depend on
# the figures, so once a bar's line has been read, its updates are skipped unread.
_PROGRESS = re.compile(r"\d{1,3}%(?: Completed \||\|)")
MAX_BARS = 64


def _progress_key(raw: str) -> str | None:
    """The part of a progress bar's line before its percentage (origin and title), else None."""
    if "%" not in raw:
        return None
    m = _PROGRESS.search(raw, 0, 400)
    return raw[: m.start()].rstrip() if m else None


def _error_line(line: Line) -> list[ev.Event]:
    """A line logged at ERROR/CRITICAL by a logger (its header says so) whose words no rule of
    the grammar knows: kept as an `error_line`, so a failure is seen without known text.
    Pieces of a logged traceback (frames, source, carets, chain notes) are not such lines."""
    text = line.text
    if not line.headed or line.level not in ("ERROR", "CRITICAL") or len(text) < 8 or text[:1] in " \t^~":
        return []
    if text.startswith(("Traceback", "During handling", "The above exception", "Exception in ")):
        return []
    return [ev.ErrorLine(line=line.no, origin=line.origin, pid=line.pid, message=text[:300])]


def _open_ended(raw: str, events: list[ev.Event]) -> bool:
    """An exception line as long as a terminal (prefix and all) that ends on a letter or digit: a
    wrap may have cut it there, so the scan keeps handing on the lines after it (exceptions are few)."""
    return len(raw) >= WRAP_MIN_CHARS and raw[-1:].isalnum() and any(isinstance(e, ev.ExceptionRaised) for e in events)


def _cut_mid_token(held: str, raw: str) -> bool:
    """A wrap that fell inside a word or path ("...with co" + "mpute capability", "...-gnu." +
    "so: undefined symbol"): a long line ending in a non-space, its follower opening with a
    lowercase letter or digit at once. A message that parsed whole may still be cut there."""
    first = raw[:1]
    return len(held) >= WRAP_MIN_CHARS and not held[-1:].isspace() and (first.islower() or first.isdigit())


def _continues(raw: str) -> bool:
    """A physical line that cannot start a message of its own: no prefix, no header, no indent
    (an indented line is a traceback's frame or source, never the rest of a message)."""
    if raw[:1] == " " and raw[1:2] not in ("", " ", "\t"):  # a wrap that fell just before a space
        return not starts_record(raw[1:])
    return bool(raw) and raw[0] not in " \t(" and not starts_record(raw)
