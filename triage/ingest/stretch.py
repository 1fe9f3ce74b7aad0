"""A stretch of metrics lines taken whole: one compiled pattern call, not a verdict per line.

The chunk scanner hands on only the first and the last metrics line of a run of one origin
(`periodic.Periodic`); the lines between are counted, each held as its run's latest. Told
one by one (the word search's hit, `Periodic.verdict`, `_Scanner._quiet`, the loop's
bookkeeping) such a line cost ~7 us: a log that is mostly metrics lines went at ~28 MB/s.

Here, once runs are held, the lines from a metrics line on are matched by one pattern built
for the held runs' keys (origin, level, source): one or more whole lines in a row, each a
metrics line in vLLM's own header of one of those keys. A group per key keeps the last line
of that key (Python's `re` keeps a repeated group's last capture), so each run's latest line
and its number come from the match, not from a loop. The stretch is taken only as the
line-by-line path would take it: it ends before the first line holding another word (a
401/403 figure, an error word, a long line's mark), and it must hold exactly one hit a line,
each the metrics word (else nothing is taken; the lines go the line-by-line way). Every
repeat of the pattern is bounded, so a line it takes is one `verdict` would have read.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterable

from triage.ingest.periodic import METRICS_WORD

MAX_KEYS = 4  # held runs a pattern covers at most (more: the lines go one by one)
MAX_KEY = 4096  # a longer key (an absurd header) leaves its lines to the line-by-line path
MAX_PATTERNS = 64  # key sets whose pattern is kept
FREE_BUILDS = 16  # patterns built before each further one must have paid for itself
LINES_PER_BUILD = 256  # lines taken whole per pattern built past FREE_BUILDS (a build costs ~150 us a key)
_WORD = METRICS_WORD.encode()
# `periodic._METRICS_RAW` past the origin and level, with the key's parts fixed and every repeat
# bounded; its tail is any bytes but a newline (a `\r` but before the newline is checked apart:
# `[^\n]` runs at twice the speed of `[^\n\r]`), a byte shorter than the grammar's at most.
_TIME = rb" \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,9})? "
_TAIL = rb" (?:Engine \d{1,9}: )?" + re.escape(_WORD) + rb"[^\n]{0,2000}"
_PATTERNS: dict[tuple[bytes, ...], re.Pattern[bytes]] = {}


def run_pattern(keys: tuple[bytes, ...]) -> re.Pattern[bytes]:
    """One or more whole lines, each a metrics line of one of `keys` (`Periodic.verdict`'s
    `origin|level|source`); group i + 1 holds the last line of keys[i] (its newline left out)."""
    alts = []
    for key in keys:
        origin, level, source = key.split(b"|")
        alts.append(b"(%s%s%s%s%s)" % (re.escape(origin), re.escape(level), _TIME, re.escape(source), _TAIL))
    return re.compile(rb"(?:(?:" + b"|".join(alts) + rb")\n)+")


class Stretches:
    """Takes stretches of held runs' metrics lines for one scanner; knows the chunk's other hits."""

    def __init__(self, metrics_id: int | None) -> None:
        self.metrics_id = metrics_id  # the matcher's index of METRICS_WORD (None: not a word of it)
        self._spots: list[tuple[int, int]] | None = None  # the hit list `_others` was read from
        self._others: list[int] = []  # offsets of the hits that are no metrics word, in order
        self._spent: tuple[bytes | None, int] = (None, -1)  # a stretch whose check failed, not tried again
        self._built = 0
        self._taken = 0

    def take(
        self, chunk: bytes, start: int, last: int, spots: list[tuple[int, int]], k: int, held: Iterable[bytes]
    ) -> tuple[int, int, int, dict[bytes, tuple[int, bytes]]] | None:
        """For the line at chunk[start] whose hits start at spots[k]: the stretch of whole lines
        from there (up to chunk[last]) that the line-by-line path would each hold as the latest
        of a run in `held`, as (its end, the index of the first hit past it, its lines, key ->
        (the 1-based place in the stretch, the bytes) of the key's last line); None: no stretch."""
        if self._spent[0] is chunk and start < self._spent[1]:
            return None
        keys = tuple(sorted(held))
        pattern = self._pattern(keys)
        if pattern is None:
            return None
        if spots is not self._spots:  # once a chunk: where the other words are
            mid = self.metrics_id
            self._spots, self._others = spots, [off for off, i in spots if i != mid]
        m = self._match(pattern, chunk, start, last)
        if m is None:
            return None
        stop, j, lines = self._measure(m, spots, k)
        if j - k != lines or (
            chunk.find(b"\r", start, stop) >= 0 and chunk.count(b"\r", start, stop) != chunk.count(b"\r\n", start, stop)
        ):
            self._mark_odd(chunk, start, stop, spots, k, j)  # odd lines ahead: it ends before the first
            m = self._match(pattern, chunk, start, last)
            if m is None:
                return None
            stop, j, lines = self._measure(m, spots, k)
        if j - k != lines or chunk.count(_WORD, start, stop) != lines:
            self._spent = (chunk, stop)  # not one word found a line: these go one by one
            return None
        latest = {}
        count = chunk.count
        for i, key in enumerate(keys, 1):
            s, e = m.span(i)
            if s >= 0:  # counted from the end: a run's last line lies near it
                latest[key] = (lines - count(b"\n", s, stop) + 1, chunk[s:e])
        self._taken += lines
        return stop, j, lines, latest

    def _match(self, pattern: re.Pattern[bytes], chunk: bytes, start: int, last: int) -> re.Match[bytes] | None:
        """The pattern's match from chunk[start] on, up to the line of the next other word."""
        others = self._others
        at = bisect_left(others, start)
        stop = last + 1 if at == len(others) else chunk.rfind(b"\n", start, others[at]) + 1
        return pattern.match(chunk, start, stop) if stop > start else None

    @staticmethod
    def _measure(m: re.Match[bytes], spots: list[tuple[int, int]], k: int) -> tuple[int, int, int]:
        """A match's end, the index of the first hit past it, and its lines."""
        start, stop = m.span()
        return stop, bisect_left(spots, (stop, -1), k), m.string.count(b"\n", start, stop)

    def _mark_odd(self, chunk: bytes, start: int, stop: int, spots: list[tuple[int, int]], k: int, j: int) -> None:
        """Every line of chunk[start:stop] that the pattern takes but `verdict` would not hold (a
        `\\r` frame: a `\\r` no newline follows; a second word) counts as holding another word,
        all found at once (a stretch cut before each in turn would be matched again each time)."""
        odd, find = [], chunk.find
        at = find(b"\r", start, stop)
        while at >= 0:
            if not chunk.startswith(b"\r\n", at):
                odd.append(at)
            at = find(b"\r", at + 1, stop)
        odd += [spots[b][0] for b in range(k + 1, j) if find(b"\n", spots[b - 1][0], spots[b][0]) < 0]
        self._others = sorted(self._others + odd)

    def _pattern(self, keys: tuple[bytes, ...]) -> re.Pattern[bytes] | None:
        """The pattern for a set of held keys, sorted (kept, or built when builds have paid off)."""
        if len(keys) > MAX_KEYS:
            return None
        pattern = _PATTERNS.get(keys)
        if pattern is None:
            if self._built >= FREE_BUILDS and self._taken < (self._built - FREE_BUILDS + 1) * LINES_PER_BUILD:
                return None  # key sets churn faster than stretches pay for their patterns
            if any(len(key) > MAX_KEY for key in keys):
                return None
            if len(_PATTERNS) >= MAX_PATTERNS:
                _PATTERNS.clear()
            pattern = _PATTERNS[keys] = run_pattern(keys)
            self._built += 1
        return pattern
