"""Terminal escape sequences in every form a log carries them, and where they sit.

A log copied from a terminal holds colour codes raw (`ESC[1;33m`), pasted as text (`^[[33m`,
`\\033[0m`), or with the ESC byte lost (`[1;33m`). Two stages need them: the line reader drops
them before it reads a message, and the redactor must see a token glued to one
(`ESC[1mhf_...`) as the token it is, so it reads the text with them removed and puts the
rest back where it was (`Stripped`).
"""

from __future__ import annotations

import bisect
import re

from triage.patterns import LazyPattern

ANSI = LazyPattern(
    r"\x1b\[[0-9;?]*[A-Za-z]"  # real escapes
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC titles
    r"|\^\[\[[0-9;]*[A-Za-z]"  # pasted caret form ^[[0;36m
    r"|(?:#033|\\033|\\x1b|\\e|\\u001b)\[[0-9;]*[A-Za-z]"  # escaped forms
    r"|\[\d{1,3}(?:;\d{1,3})*m"  # the ESC byte lost: [1;36m ... [0;0m
)
_ESCLESS = re.compile(r"\[\d{1,3}(?:;\d{1,3})*m")  # the last form of ANSI, alone: one C-level scan


def may_hold_escape(text: str) -> bool:
    """Whether `text` may hold a form `ANSI` removes (plain substring tests: this runs on
    long lines, and most hold none)."""
    if "\x1b" in text:
        return True
    if "[" not in text:
        return False
    return (
        "^[[" in text
        or "033[" in text
        or "x1b[" in text
        or "\\e[" in text
        or "u001b[" in text
        or _ESCLESS.search(text) is not None
    )


def strip_escapes(text: str) -> str:
    """`text` without its escape sequences."""
    return ANSI.sub("", text) if may_hold_escape(text) else text


class Stripped:
    """A text with each escape sequence replaced by `sep` ("" removes it; " " keeps a word
    boundary there), and where each piece came from: an index of the new text maps to the
    original in O(log n).
    """

    __slots__ = ("_escape", "_origins", "_starts", "original", "text")

    def __init__(self, original: str, sep: str = "") -> None:
        self.original = original
        kept: list[str] = []
        starts: list[int] = []  # where each piece starts in the new text
        origins: list[int] = []  # and in the original
        escape: list[int] = []  # the length of the escape a `sep` piece stands for (0: kept text)
        at = size = 0
        for m in ANSI.finditer(original) if may_hold_escape(original) else ():
            if m.start() > at:
                _piece(starts, origins, escape, kept, size, at, 0, original[at : m.start()])
                size += m.start() - at
            if sep:
                _piece(starts, origins, escape, kept, size, m.start(), m.end() - m.start(), sep)
                size += 1
            at = m.end()
        if at < len(original):
            _piece(starts, origins, escape, kept, size, at, 0, original[at:])
        self.text = "".join(kept)
        self._starts, self._origins, self._escape = starts, origins, escape

    @property
    def changed(self) -> bool:
        return self.text != self.original

    def origin(self, i: int) -> int:
        """The index in the original text of the new text's character `i`."""
        k = bisect.bisect_right(self._starts, i) - 1
        return self._origins[k] + (i - self._starts[k] if not self._escape[k] else 0)

    def origin_end(self, i: int) -> int:
        """Where the original text of the new text's character `i` ends."""
        k = bisect.bisect_right(self._starts, i) - 1
        return self._origins[k] + self._escape[k] if self._escape[k] else self._origins[k] + i - self._starts[k] + 1

    def restore(self, spans: list[tuple[int, int, str]]) -> str:
        """The original text with each stripped-text span (start, end, new text) replaced:
        the escape sequences outside the spans stay where they were, those inside go."""
        out, at = [], 0
        for start, end, new in spans:
            if start < end:
                first, last = self.origin(start), self.origin_end(end - 1)
            else:  # an insertion: before the character at `start`, or at the end
                first = last = self.origin(start) if start < len(self.text) else len(self.original)
            out.append(self.original[at:first])
            out.append(new)
            at = last
        out.append(self.original[at:])
        return "".join(out)


def changed_spans(before: str, after: str, marker: str) -> list[tuple[int, int, str]] | None:
    """The spans of `before` that became `marker` in `after`, when every difference is one:
    `after` equals `before` with some runs replaced by `marker` (what redaction does). None
    when the two cannot be aligned so (then the caller keeps `after` whole)."""
    spans: list[tuple[int, int, str]] = []
    i = j = 0
    size = len(marker)
    while j < len(after):
        hit = after.find(marker, j)
        stop = len(after) if hit < 0 else hit
        if before[i : i + stop - j] != after[j:stop]:  # the text up to the next marker is kept as is
            return None
        i, j = i + stop - j, stop
        if hit < 0:
            break
        j = hit + size
        while after.startswith(marker, j):  # markers side by side stand for one run
            j += size
        nxt = after.find(marker, j)
        kept = after[j : len(after) if nxt < 0 else nxt]
        end = (
            (len(before) - len(kept) if nxt < 0 else before.find(kept, i)) if kept else (len(before) if nxt < 0 else -1)
        )
        if end < i or (nxt < 0 and not before.endswith(kept)):
            return None
        spans.append((i, end, after[hit:j]))
        i = end
    return spans if i == len(before) else None


def _piece(
    starts: list[int],
    origins: list[int],
    escape: list[int],
    kept: list[str],
    size: int,
    at: int,
    length: int,
    text: str,
) -> None:
    """One piece of the escape-free text: where it starts in each text, the escape it stands for, itself."""
    starts.append(size)
    origins.append(at)
    escape.append(length)
    kept.append(text)
