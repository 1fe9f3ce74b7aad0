"""Deep exception chains: links that repeat the ones before them are skipped, not parsed.

A script that re-raises inside its handler prints one traceback per level, each joined to
the next by "During handling of the above exception, another exception occurred:". Ten
thousand levels took seconds (each link's frames, source and exception parsed and fed to
the timeline) to say what the first and the last link say. Here, on the scanner's lines
(before peeling or parsing), a chain's links are told apart by their `Traceback` lines;
past the first FIRST_LINKS links of a chain, a link whose shape (its lines with every digit
made `#`) is that of an earlier link of the chain, and that ends in a chain
note, is held back, and only the LAST_LINKS latest such links are handed on (when the chain
ends or a link of a new shape comes). A link of a new shape (another exception, other
frames) is always handed on: the report reads every kind of error the chain holds.

Only a chain whose every line carries the prefix of its `Traceback` line (one process's
logger header; digits may differ) is cut; any other line ends it.

The cut works at two levels, both counted in `ScanControl.links_skipped`: `LinkRepeats`, the
scan's `repeated links` policy, skips on raw bytes the run of links that repeat the one before
within a chunk (the bulk of a deep chain, never decoded); `CutChains` cuts what reaches the
lines (links across chunks, a repaired paste, an unfolded traceback, links that repeat an
earlier one but not the one before). Measured on the benchmark's 10 000-link chain, either
alone changes the report's count of links skipped (9975: 9970 by lines alone; 275: 272 on a
300-link test chain by bytes alone), and lines alone took 4x the time (0.53 s against 0.12 s).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Iterator
from functools import lru_cache

from triage.ingest.control import Marked, ScanControl

FIRST_LINKS = 16  # links of a chain always handed on (a chain's first Chain in the timeline)
LAST_LINKS = 4  # the latest repeated links handed on when the chain ends
MAX_SHAPES = 64  # link shapes remembered per chain
MAX_LINK_LINES = 400  # a link held back is at most this long
HEAD = "Traceback (most recent call last):"
NOTES = ("During handling of the above exception", "The above exception was the direct cause")
_DIGITS = str.maketrans("0123456789", "#" * 10)


class CutChains:
    """`Marked` lines with the repeated middle links of deep chains left out (counted in
    `control.links_skipped`); `control.current` says whether the line handed on last came as
    it came from the scan (a held line's moment has passed: it ends no hard-wrap window)."""

    def __init__(self, marked: Iterable[Marked], control: ScanControl) -> None:
        self._marked = marked
        self._control = control
        self._reset(None)

    def _reset(self, prefix: str | None) -> None:
        self._prefix = prefix  # the shape of the chain's prefix (None: no chain open)
        self._links = 0
        self._shapes: set[str] = set()
        self._link: list[Marked] = []  # the link being read, once past FIRST_LINKS
        self._shape: list[str] = []
        self._noted = False
        self._held: deque[list[Marked]] = deque()

    def __iter__(self) -> Iterator[Marked]:
        for item in self._marked:
            raw = item[1]
            at = raw.find(HEAD)
            if at < 0 and self._prefix is None:  # no chain open: the line goes on
                self._control.current = True
                yield item
                continue
            shape = raw.translate(_DIGITS)
            if self._prefix is not None and not shape.startswith(self._prefix):
                yield from self._end_link()
                yield from self._flush()
                self._reset(None)
            if at >= 0:
                yield from self._link_starts(shape[:at])
            if self._prefix is None or self._links <= FIRST_LINKS:
                if self._prefix is not None:
                    self._shape.append(shape)
                self._control.current = True
                yield item
                continue
            self._link.append(item)
            self._shape.append(shape)
            self._noted = self._noted or NOTES[0] in raw or NOTES[1] in raw
            if len(self._link) > MAX_LINK_LINES:  # too long to hold: handed on, the chain no longer cut
                yield from self._flush()
                yield from self._link
                self._reset(None)
        yield from self._end_link()
        yield from self._flush()

    def _link_starts(self, prefix: str) -> Iterator[Marked]:
        """A `Traceback` line: the link before it ends; a new chain starts unless it goes on."""
        if self._prefix is not None and prefix == self._prefix:
            yield from self._end_link()
        else:
            yield from self._end_link()
            yield from self._flush()
            self._reset(prefix)
        self._links += 1

    def _end_link(self) -> Iterator[Marked]:
        """The link just read: held back when it repeats an earlier one and ends in a note, else
        handed on (after the held ones)."""
        shape, link, noted = "\n".join(self._shape), self._link, self._noted
        self._shape, self._link, self._noted = [], [], False
        if not link:  # one of the first links (already handed on), or nothing yet
            if shape and len(self._shapes) < MAX_SHAPES:
                self._shapes.add(shape)
            return
        if noted and shape in self._shapes:
            self._held.append(link)
            if len(self._held) > LAST_LINKS:
                self._held.popleft()
                self._control.links_skipped += 1
            return
        yield from self._flush()
        if len(self._shapes) < MAX_SHAPES:
            self._shapes.add(shape)
        self._control.current = False
        yield from link

    def _flush(self) -> Iterator[Marked]:
        self._control.current = False
        while self._held:
            yield from self._held.popleft()


MAX_LINK_BYTES = 16 << 10  # a longer link is not compared
_NOTES_RAW = tuple(n.encode() for n in NOTES)
_DIGIT_RUNS = re.compile(rb"(\d+)")


class LinkRepeats:
    """The same cut at chunk level, before a line is decoded: past FIRST_LINKS links of a chain,
    links that repeat the link before them byte for byte (each run of digits aside) are
    counted (in `control.links_skipped`) and skipped, but for the last LAST_LINKS; what is left
    goes on to `CutChains`."""

    def __init__(self, head_id: int | None, control: ScanControl) -> None:
        self.head_id = head_id  # the matcher's index of HEAD (None: not a word of it)
        self._control = control
        self._links = 0
        self._chunk: bytes | None = None
        self._at = -1  # where the last `Traceback` line handed on starts in self._chunk
        self._key_before = b""  # the last link's bytes, each run of digits made one `0`

    def heads(self, hits: list[tuple[int, int]]) -> bool:
        """Whether a line's hits hold HEAD (asked of every line the scan finds a word in: a loop,
        not a generator)."""
        head = self.head_id
        for _, i in hits:  # noqa: SIM110 - a loop: any() and its generator cost more per line
            if i == head:
                return True
        return False

    def skip(self, chunk: bytes, start: int, last: int) -> int:
        """For a `Traceback` line at chunk[start]: the offset past the repeated links to skip
        from there (complete lines up to chunk[last]), or `start` when none is skipped."""
        prev, same = self._at, self._chunk is chunk
        self._chunk, self._at = chunk, start
        if not same or prev < 0 or start - prev > MAX_LINK_BYTES:
            return start
        link = chunk[prev:start]
        if not any(n in link for n in _NOTES_RAW):
            self._links = 1
            return start
        self._links += 1
        if self._links <= FIRST_LINKS:
            return start
        key = _DIGIT_RUNS.sub(b"0", link)
        if key != self._key_before:  # built only for a link that repeats the one before it
            self._key_before = key
            return start
        pattern, ends, p = _link_pattern(key), [], start
        while (m := pattern.match(chunk, p, last + 1)) is not None and m.end() > p:
            p = m.end()
            ends.append(p)
        drop = len(ends) - LAST_LINKS
        if drop <= 0:
            return start
        self._control.links_skipped += drop
        self._at = ends[drop - 2] if drop >= 2 else start  # the last link skipped: the next one repeats it
        return ends[drop - 1]


@lru_cache(maxsize=32)
def _link_pattern(link: bytes) -> re.Pattern[bytes]:
    """A link's bytes with each run of digits (made one `0`) standing for any run of digits."""
    return re.compile(b"".join(rb"\d+" if i % 2 else re.escape(p) for i, p in enumerate(_DIGIT_RUNS.split(link))))
