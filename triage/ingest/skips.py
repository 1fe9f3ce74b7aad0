"""The lines the chunk scan takes without reading them: one named policy per kind, one protocol.

The scan (`scan._Scanner`) finds the words of a chunk, then walks its lines that hold one.
At each such line it asks its policies in turn whether they take it; the first that does
says where the scan goes on (the lines it took are counted, and at most one line stands
for them), and the line is not read. A line no policy takes is handed on as it is. The
pipeline's way (`quiet`) uses them all; the full path (tests, `quiet=False`) none:

- table rows: past a long table's first rows, the rows of its shape go on as one block (rows.py);
- repeated links: a deep exception chain's links that repeat the one before (chains.py);
- metrics runs: the engine's metrics lines of a run of one origin, held as its latest, one
  at a time or a stretch at once (periodic.py, stretch.py);
- request lines: the request logger's lines in vLLM's own header, users' text (periodic.py).

Each line reaches a policy only through the `Spot` the scan fills in for it.
"""

from __future__ import annotations

from typing import Protocol

from triage.ingest.chains import LinkRepeats
from triage.ingest.control import Marked
from triage.ingest.periodic import REQUEST, Periodic
from triage.ingest.read import MAX_LINE_CHARS, InputStats
from triage.ingest.rows import RowRun
from triage.ingest.stretch import Stretches


class Scanner(Protocol):
    """What the policies read and move of the chunk scanner's state (`scan._Scanner`)."""

    stats: InputStats  # its line count
    window_left: int  # lines still handed on after an anchor line (a hard wrap's continuation)
    runs: dict[bytes, tuple[int, bytes] | None]  # open metrics runs: key -> the latest line held
    rows: RowRun | None  # the table run (the pipeline's way)


NOT_ASKED = object()  # `Spot.cached_verdict` of a line no policy has asked about yet


class Spot:
    """The line the scan is at: chunk[start:end] (its newline at `end`), among the complete lines
    up to chunk[last], with its hits spots[k:j] (`hits`); the scan stands at `pos` (the start of
    the first line not yet handed on or counted). A policy that takes the line sets `pos` and
    `k` to where the scan goes on, and `out` to the line that stands for those it took, if any."""

    __slots__ = (
        "_periodic",
        "cached_verdict",
        "chunk",
        "end",
        "hits",
        "j",
        "k",
        "last",
        "out",
        "pos",
        "spots",
        "start",
    )

    def __init__(self, periodic: Periodic | None) -> None:
        self._periodic = periodic
        self.chunk = b""
        self.spots: list[tuple[int, int]] = []
        self.hits: list[tuple[int, int]] = []
        self.pos = self.start = self.end = self.last = self.k = self.j = 0
        self.out: Marked | None = None
        self.cached_verdict: object = NOT_ASKED

    def verdict(self) -> bytes | str | None:
        """`Periodic.verdict` on the line (asked once a line, whichever policy asks first)."""
        v = self.cached_verdict
        if v is NOT_ASKED:
            p = self._periodic
            fits = p is not None and self.end - self.start <= MAX_LINE_CHARS
            v = self.cached_verdict = p.verdict(self.chunk, self.start, self.end, self.hits) if fits else None  # type: ignore[union-attr]
        return v  # type: ignore[return-value]


class SkipPolicy(Protocol):
    """A kind of line the scan takes without reading it."""

    name: str

    def take(self, at: Spot) -> bool:
        """Whether the line at `at` is taken (then `at.pos`, `at.k` and `at.out` say what of it)."""
        ...


class TableRows:
    """Past a long table's first rows, the rows that follow in its shape, as one block (rows.py)."""

    name = "table rows"

    def __init__(self, scan: Scanner, rows: RowRun) -> None:
        self.scan, self.rows = scan, rows

    def take(self, at: Spot) -> bool:
        rows, scan = self.rows, self.scan
        if not rows.count or at.start != at.pos or scan.window_left:
            return False
        chunk, pos, stats = at.chunk, at.pos, scan.stats
        stop = rows.block_end(chunk, pos, at.last, at.spots, at.k, stats.lines + 1)
        if stop <= pos:
            return False
        count = chunk.count(b"\n", pos, stop)
        first = stats.lines + 1
        stats.lines += count
        rows.took(count)
        at.out = (first, chunk[pos : stop - 1].decode("utf-8", "replace"), False, True)  # rows joined by `\n`
        at.pos = stop
        return True


class RepeatedLinks:
    """A deep chain's links that repeat the one before, counted unread (`chains.LinkRepeats`):
    the `Traceback` line of the next link comes next."""

    name = "repeated links"

    def __init__(self, scan: Scanner, links: LinkRepeats) -> None:
        self.scan, self.links = scan, links

    def take(self, at: Spot) -> bool:
        links = self.links
        if not links.heads(at.hits):
            return False
        stop = links.skip(at.chunk, at.start, at.last)
        if stop <= at.start:
            return False
        self.scan.stats.lines += at.chunk.count(b"\n", at.start, stop)
        self.scan.window_left = 0
        at.pos, at.k = stop, at.j
        return True


class MetricsRuns:
    """A metrics line of a run already open (one origin's, nothing else handed on since): held as
    the run's latest (periodic.py), or taken with the lines like it that follow (stretch.py)."""

    name = "metrics runs"

    def __init__(self, scan: Scanner, stretches: Stretches) -> None:
        self.scan, self.stretches = scan, stretches

    def take(self, at: Spot) -> bool:
        scan = self.scan
        runs = scan.runs
        if not runs:
            return False
        hits = at.hits
        if len(hits) == 1 and hits[0][1] == self.stretches.metrics_id and not scan.rows.count:  # type: ignore[union-attr]
            took = self.stretches.take(at.chunk, at.start, at.last, at.spots, at.k, runs)
            if took is not None:
                stop, j, lines, latest = took
                base = scan.stats.lines
                for key, (place, line) in latest.items():
                    runs[key] = (base + place, line)
                scan.stats.lines = base + lines
                scan.window_left = 0
                at.pos, at.k = stop, j
                return True
        verdict = at.verdict()
        if verdict is None or verdict not in runs:
            return False
        scan.window_left = 0  # as the pipeline's `line_complete` would
        scan.stats.lines += 1  # decoded only if handed on; the one it replaces is dropped
        runs[verdict] = (scan.stats.lines, at.chunk[at.start : at.end])  # type: ignore[index]
        at.pos, at.k = at.end + 1, at.j
        return True


class RequestLines:
    """A request-logger line in vLLM's own header whose header holds no word: users' text,
    dropped unread (no longer than MAX_LINE_CHARS bytes: nothing to cut)."""

    name = "request lines"

    def __init__(self, scan: Scanner) -> None:
        self.scan = scan

    def take(self, at: Spot) -> bool:
        if at.verdict() != REQUEST:
            return False
        self.scan.window_left = 0  # as the pipeline's `line_complete` would
        self.scan.stats.lines += 1
        at.pos, at.k = at.end + 1, at.j
        return True
