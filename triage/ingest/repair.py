"""Pastes a person reshaped: indented as a block, or hard-wrapped at one column. Undone first.

A log pasted as a Markdown or Stack Overflow code block carries four spaces (or a tab)
before every line, which hides every prefix the line reader peels. A log copied out of a
terminal (tmux or screen copy mode, a fixed-width console, `fold`) carries a newline
wherever a line reached the right edge, so "CUDA out of memory" can arrive as
"CUDA out of mem" + "ory"; the word-level scan cannot see a phrase split like that.

Both show themselves in a sample of the input: the same whitespace before every line; or
many lines of exactly the same, largest, length W, each followed by a line that starts no
log record. The indent is then cut from each line, and each W-long line is joined with
the next; a joined line keeps the number of its first physical line (evidence cites where
the message starts in the user's file).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Iterator

from msgspec import Struct

from triage.ingest.lines import opens_record, starts_record
from triage.patterns import LazyPattern

SAMPLE_LINES = 4000
MIN_WIDTH, MAX_WIDTH = 60, 400  # terminal widths worth considering
MIN_WRAPPED = 3  # W-long lines needed in the sample (one long message cut three times will do)
MAX_SEGMENTS = 200  # a joined line holds at most this many physical lines
# `torch.OutOfMemoryError: ...` at the start of an indented line: an exception, a record of its
# own (starts_record leaves a lowercase start out: a wrap can cut "to|rch.OutOfMemoryError")
_EXCEPTION = LazyPattern(r"(?:[a-z_]\w*\.)+[A-Z]\w*(?:Error|Exception)(?::|$)")
SHORT_PASTE_LINES = 40  # a paste this short is read for one wrapped line at a usual terminal width
TERMINAL_WIDTHS = frozenset({80, 100, 120, 132, 160, 200})
MIN_DISTINCT = 8  # characters a cut message holds at least (a rule of `====` is no message)


def detect_width(sample: list[str]) -> int | None:
    """The column W at which these lines were hard-wrapped, or None for a log as printed.

    W must be the commonest length among long lines and the largest but for a few; at
    least MIN_WRAPPED and a 25th of the long lines must have it (at a wide W few lines
    reach it), and most of them must be
    followed by a line that starts no record, and the pairs (W-long line, next line) must
    mostly differ (a repeated banner is one pair again and again)."""
    width = _common_width(sample)
    return width if width is not None else _short_paste_width(sample)


def _common_width(sample: list[str]) -> int | None:
    long = [len(line) for line in sample if len(line) >= MIN_WIDTH]
    if len(long) < MIN_WRAPPED:
        return None
    width, count = Counter(long).most_common(1)[0]
    if width > MAX_WIDTH or count < max(MIN_WRAPPED, len(long) // 25):
        return None
    if sum(1 for n in long if n > width) > max(2, len(long) // 50):
        return None
    at = [i for i, line in enumerate(sample[:-1]) if len(line) == width]
    if len({(sample[i], sample[i + 1]) for i in at}) < max(2, (len(at) + 1) // 2):
        return None  # one line and its follower, repeated (a banner, a bar): not wrapping
    return width if _mostly_continued(sample, at, 0.6) else None


def _short_paste_width(sample: list[str]) -> int | None:
    """A paste of a few lines (one error, the end of a traceback) has too few lines to show a
    common length; a line exactly as long as a usual terminal, the longest of the paste, and
    followed by a line that starts no record and no indented code, was cut by that terminal
    (one space before the follower is the space the cut fell on; code is indented further)."""
    if len(sample) > SHORT_PASTE_LINES:
        return None
    longest = max((len(line) for line in sample), default=0)
    for i, line in enumerate(sample[:-1]):
        nxt = sample[i + 1]
        if (
            len(line) == longest
            and longest in TERMINAL_WIDTHS
            and nxt.strip()
            and not nxt[: 2 if nxt[0] == " " else 1].isspace()
            and len(set(line)) >= MIN_DISTINCT
            and (not starts_record(nxt) or cut_in_a_word(line, nxt))
        ):
            return longest
    return None


def _mostly_continued(sample: list[str], at: list[int], share: float) -> bool:
    """Whether at least `share` of the lines after those at `at` start no record; decided as
    soon as the lines left cannot change the answer (each test peels a line: a log whose lines
    share a length, NCCL chatter, would test thousands)."""
    need = share * len(at)
    continued = 0
    for seen, i in enumerate(at, 1):
        continued += not starts_record(sample[i + 1])
        if continued >= need:
            return True
        if continued + len(at) - seen < need:
            return False
    return continued >= need


def cut_in_a_word(line: str, nxt: str) -> bool:
    """A cut that fell inside a word or a number ("...partition=4" + "096 (not ..."): the follower
    continues the line even where its start reads like a prefix, unless its own words open a record."""
    return line[-1:].isalnum() and nxt[:1].isalnum() and not opens_record(nxt)


def join_wrapped(lines: Iterable[tuple[int, str]], width: int) -> Iterator[tuple[int, str]]:
    """(number of the first physical line, joined text) from (number, physical line)."""
    held_no, parts = 0, list[str]()
    for no, line in lines:
        if parts and ((starts_record(line) and not cut_in_a_word(parts[-1], line)) or len(parts) >= MAX_SEGMENTS):
            yield held_no, "".join(parts)
            parts = []
        if not parts:
            held_no = no
        parts.append(line)
        if len(line) != width:
            yield held_no, "".join(parts)
            parts = []
    if parts:
        yield held_no, "".join(parts)


class Repair(Struct, frozen=True):
    """How a paste was reshaped: the indent before every line, the column lines were cut at."""

    indent: str = ""
    width: int | None = None

    def __bool__(self) -> bool:
        return bool(self.indent) or self.width is not None


def detect_indent(sample: list[str]) -> str:
    """The whitespace every non-empty line starts with, when cutting it leaves a log: a
    tenth of the lines then start a record (a wrapped paste has many continuation lines;
    a fragment of traceback frames and source keeps its indentation). A paste of one or two
    lines (a Markdown code line is indented four spaces) is cut only where each then starts one."""
    lines = [line for line in sample if line.strip()]
    if not lines:
        return ""
    prefix = os.path.commonprefix(lines)  # noqa: RUF071 - by character: the leading whitespace
    indent = prefix[: len(prefix) - len(prefix.lstrip(" \t"))]
    if not indent:
        return ""
    starts = sum(
        1 for line in lines[:500] if starts_record(line[len(indent) :]) or _EXCEPTION.match(line[len(indent) :])
    )
    if len(lines) < 3:
        first = lines[0][len(indent) :]
        return indent if starts_record(first) or _EXCEPTION.match(first) else ""
    return indent if starts >= 0.1 * min(len(lines), 500) else ""


def detect(sample: list[str]) -> Repair:
    indent = detect_indent(sample)
    if indent:
        sample = [line[len(indent) :] if line.startswith(indent) else line.lstrip(" \t") for line in sample]
    return Repair(indent, detect_width(sample))


def repaired(lines: Iterable[tuple[int, str]], repair: Repair) -> Iterator[tuple[int, str]]:
    """(number of the first physical line, text) with the indent cut and wrapped lines joined."""
    if repair.indent:
        cut = len(repair.indent)
        lines = ((no, line[cut:] if line.startswith(repair.indent) else line.lstrip(" \t")) for no, line in lines)
    if repair.width is not None:
        lines = join_wrapped(lines, repair.width)
    return iter(lines)
