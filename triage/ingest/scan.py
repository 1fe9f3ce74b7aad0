"""The prefilter at chunk level: one multi-literal search per 1 MiB chunk, Python work only near hits.

Almost every line of a log states nothing (access lines, request and metrics lines, NCCL
chatter). Splitting, decoding and testing each of them in Python costs microseconds per
line, which caps throughput far below what the disk delivers. Here the raw UTF-8 bytes of a
whole chunk are searched once for every anchor word, lines are counted with `bytes.count`,
and only the lines around hits are cut out, decoded and handed on.

The search is a `matcher.Matcher` handed in by the caller (the pipeline passes
`vocabulary.matcher()`: the grammar's anchor literals and the evidence reader's words), so
the scan knows no grammar and the grammar's module never reaches back into the scan. The
engine is Hyperscan where it is installed, else the pure-Python search: each yields the same
lines; only the speed differs.

At each line holding a word, the pipeline's scan first asks its skip policies (`skips.py`:
table rows, repeated links, metrics runs, request lines) whether one takes the line unread;
the stages after the scan speak to it through one `control.ScanControl`.
"""

from __future__ import annotations

import codecs
from bisect import bisect_left, bisect_right
from collections.abc import Generator, Iterable, Iterator
from itertools import chain

from triage.ingest.chains import HEAD, LinkRepeats
from triage.ingest.control import Marked, ScanControl
from triage.ingest.matcher import Matcher
from triage.ingest.periodic import METRICS_WORD, Periodic, QuietSearch
from triage.ingest.read import MAX_LINE_CHARS, InputStats, cut_long, finish_line, last_frame, lines_of
from triage.ingest.repair import SAMPLE_LINES, Repair, detect, repaired
from triage.ingest.reshape import mend_cut_start
from triage.ingest.rows import RowRun
from triage.ingest.skips import NOT_ASKED, MetricsRuns, RepeatedLinks, RequestLines, SkipPolicy, Spot, TableRows
from triage.ingest.stretch import Stretches

SAMPLE_BYTES = 256 << 10  # the wrap test reads at most this much of the input's head

MAX_RUNS = 16  # origins whose metrics runs are followed at once
_LONG_STEP = MAX_LINE_CHARS // 2  # a line longer than MAX_LINE_CHARS bytes covers a whole such stretch
_NONE: frozenset[int] = frozenset()


def iter_marked(
    chunks: Iterable[bytes],
    stats: InputStats,
    matcher: Matcher,
    window: int = 0,
    wrap_sample: int = 0,
    quiet: bool = True,
    control: ScanControl | None = None,
) -> Iterator[Marked]:
    """Each line holding one of `matcher`'s words, and the `window` lines after each line
    holding an anchor word (a hard-wrapped message continues there), as (no, text, grammar,
    evidence). Lines are numbered and cut exactly as `read.iter_lines` numbers and cuts them.

    With `wrap_sample`, that many bytes are read first to tell a paste indented as a block
    or hard-wrapped at one column (`unwrap.py`); its lines are then handed on with the
    indent cut and wrapped lines joined, numbered by their first physical line.

    With `quiet` (the pipeline's way), lines the pipeline would read to no effect are not
    handed on (the skip policies of `skips.py`: request lines, metrics runs, long tables' rows
    as blocks, a deep chain's repeated links).

    `control` is how the stages after the scan tell it that a line was whole (`line_complete`)
    and where the links it skipped are counted."""
    control = control if control is not None else ScanControl()
    chunks = iter(chunks)
    head: list[bytes] = []
    size = 0
    while size < wrap_sample and (chunk := next(chunks, None)) is not None:
        head.append(chunk)
        size += len(chunk)
    repair = repair_of(b"".join(head)) if head else Repair()
    chunks = chain(head, chunks)
    scanner: _Scanner | _RepairScanner
    if repair:
        stats.wrap_width, stats.indent = repair.width, repair.indent
        scanner = _RepairScanner(matcher, stats, window, repair)
    else:
        scanner = _Scanner(matcher, stats, window, quiet, control)
    control.attach(scanner.line_complete)
    return scanner.scan(chunks)


def repair_of(head: bytes) -> Repair:
    """How the input's head (its complete lines) was reshaped by a paste, if it was."""
    sample = head[:SAMPLE_BYTES].decode("utf-8", "replace").replace("\r\n", "\n").split("\n")
    return detect(sample[:SAMPLE_LINES][:-1])


class _Scanner:
    def __init__(
        self, m: Matcher, stats: InputStats, window: int, quiet: bool = True, control: ScanControl | None = None
    ) -> None:
        self.m, self.stats, self.window = m, stats, window
        self.carry = b""  # the unfinished last line of the chunks so far
        self.skipping = False  # the rest of an over-long line that was already cut and counted
        self.window_left = 0
        periodic = Periodic(m.index(METRICS_WORD)) if quiet else None
        # Request text past its header and the longest word's length is not searched (periodic.py).
        self.search = QuietSearch(m, max(map(len, m.words), default=0)) if quiet else None
        # Runs of metrics lines since the last other line handed on: origin key -> the run's
        # latest line, held back (None: the line handed on last is the run's latest).
        self.runs: dict[bytes, tuple[int, bytes] | None] = {}
        # A long table's rows past its first ones go on as blocks (rows.py), the pipeline's way only.
        self.rows = RowRun(m.kinds([(0, i)]) for i in range(len(m.words))) if quiet else None
        self.at = Spot(periodic)  # the line the policies are asked about
        self.policies: list[SkipPolicy] = []  # in this order; none on the full path
        if self.rows is not None:
            self.policies = [
                TableRows(self, self.rows),
                RepeatedLinks(self, LinkRepeats(m.index(HEAD), control or ScanControl())),
                MetricsRuns(self, Stretches(m.index(METRICS_WORD))),
                RequestLines(self),
            ]
        self.repeated = 0  # copies of a line, right after it, counted unread (`_repeats`)

    def line_complete(self) -> None:
        """The anchor line just handed on holds its whole message (`ScanControl.line_complete`)."""
        self.window_left = 0

    def scan(self, chunks: Iterable[bytes]) -> Iterator[Marked]:
        for chunk in chunks:
            if chunk:
                yield from self.feed(chunk)
        yield from self.close()

    def feed(self, chunk: bytes) -> Iterator[Marked]:
        first = chunk.find(b"\n")
        if first < 0:
            if not self.skipping:
                self.carry += chunk
                yield from self._overflow()
            return
        if self.skipping:
            self.skipping = False
        else:
            yield from self._text((self.carry + chunk[:first]).decode("utf-8", "replace"), None)
        last = chunk.rfind(b"\n")
        if last > first:
            yield from self._body(chunk, first + 1, last)
        self.carry = chunk[last + 1 :]
        yield from self._overflow()

    def close(self) -> Iterator[Marked]:
        if self.carry and not self.skipping:
            yield from self._text(self.carry.decode("utf-8", "replace"), None)
        self.carry = b""
        yield from self._emit(None)

    def _overflow(self) -> Iterator[Marked]:
        """A line still unfinished past MAX_LINE_CHARS: keep its last `\\r` frame, or cut it here."""
        if len(self.carry) <= MAX_LINE_CHARS:
            return
        text, used = codecs.utf_8_decode(self.carry, "replace", False)
        if len(text) <= MAX_LINE_CHARS:
            return
        cut = text.rfind("\r", 0, len(text) - 1)
        if cut >= 0 and len(text) - cut <= MAX_LINE_CHARS:
            self.carry = text[cut + 1 :].encode("utf-8", "replace") + self.carry[used:]
            return
        self.carry, self.skipping = b"", True
        yield from self._text(text, None)

    def _body(self, chunk: bytes, start: int, last: int) -> Iterator[Marked]:
        """The complete lines chunk[start:last + 1]: count them, hand on those near hits (but
        those a skip policy takes: `skips.py`)."""
        if self.search is not None:  # request text left out (periodic.QuietSearch)
            spots, masked = self.search.hits(chunk, start, last + 1)
        else:
            spots, masked = self.m.hits(chunk), _NONE
        spots.sort()
        spots = spots[bisect_left(spots, (start, -1)) : bisect_right(spots, (last, len(self.m.words)))]
        if last - start > MAX_LINE_CHARS:
            spots = sorted(spots + [(off, -1) for off in self._long_lines(chunk, start, last)])
        at, policies = self.at, self.policies
        at.chunk, at.spots, at.last = chunk, spots, last
        pos, k, n = start, 0, len(spots)
        while k < n:
            off = spots[k][0]
            if off < pos:
                k += 1
                continue  # another hit in a line already handed on
            line_start = chunk.rfind(b"\n", 0, off) + 1
            if self.window_left:
                yield from self._skip(chunk, pos, line_start)
            elif pos < line_start:  # as `_skip` counts them, without a generator per line
                self.stats.lines += chunk.count(b"\n", pos, line_start)
            end = chunk.find(b"\n", off)
            j = k + 1  # the hits of this line are spots[k:j]
            if j < n and spots[j][0] < end:
                j = bisect_left(spots, (end, -1), j)
            verdict = None
            if policies:
                at.pos, at.start, at.end, at.k, at.j, at.hits, at.out = pos, line_start, end, k, j, spots[k:j], None
                at.cached_verdict = NOT_ASKED
                taken = False
                for policy in policies:  # in order: the first that takes the line
                    if policy.take(at):
                        taken = True
                        break
                if taken:
                    pos, k = at.pos, at.k
                    if at.out is not None:
                        yield from self._emit(at.out)
                    continue
                verdict = at.verdict()
            hits = spots[k:j]
            k, pos = j, end + 1
            raw = chunk[line_start:end]
            # The words found in the chunk are the line's own when its text is its bytes (ASCII, one
            # frame, not cut) and no request text of it was masked: no second search then.
            kinds = (
                self.m.kinds(hits)
                if raw.isascii() and end - line_start <= MAX_LINE_CHARS and b"\r" not in raw and end not in masked
                else None
            )
            if verdict is None:
                yield from self._text(raw.decode("utf-8", "replace"), True, kinds)
                if self.search is not None and chunk.startswith(raw + b"\n", pos):  # the same line again
                    pos = yield from self._repeats(chunk, raw, pos, last, kinds)
                    k = bisect_left(spots, (pos, -1), k)
            else:  # the first metrics line of its origin since other news: it opens a run
                going = list(self.runs) if len(self.runs) < MAX_RUNS else []
                yield from self._text(raw.decode("utf-8", "replace"), True, kinds)
                self.runs = dict.fromkeys([*going, verdict])  # type: ignore[list-item]  # the held lines went first (_emit)
        yield from self._skip(chunk, pos, last + 1)

    def _repeats(
        self, chunk: bytes, raw: bytes, pos: int, last: int, kinds: tuple[bool, bool] | None
    ) -> Generator[Marked, None, int]:
        """Copies of the line just handed on that follow it (a million `Killed` lines): the
        last one is handed on, those between only counted, so a run costs a comparison a line.
        Returns where the scan goes on."""
        unit, copies = raw + b"\n", 0
        step = len(unit)
        while pos + step <= last + 1 and chunk.startswith(unit, pos):
            pos += step
            copies += 1
        if copies > 1:
            self.stats.lines += copies - 1
            self.repeated += copies - 1
        yield from self._text(raw.decode("utf-8", "replace"), True, kinds)
        return pos

    def _emit(self, marked: Marked | None) -> Iterator[Marked]:
        """Hand on a line (None: only the held ones), the held metrics lines first, in order.
        A line handed on ends every run (a metrics line that starts one re-opens its own)."""
        held = sorted(m for m in self.runs.values() if m is not None)
        self.runs = {}
        for no, line in held:
            text = line.decode("utf-8", "replace")
            yield no, last_frame(text) if "\r" in text else text, True, False  # as `finish_line` cuts it
        if marked is not None:
            yield marked

    def _skip(self, chunk: bytes, pos: int, end: int) -> Iterator[Marked]:
        """Lines without hits: the first few after an anchor line are handed on, the rest only counted."""
        while self.window_left and pos < end:
            nl = chunk.find(b"\n", pos)
            yield from self._text(chunk[pos:nl].decode("utf-8", "replace"), False)
            pos = nl + 1
        if pos < end:
            self.stats.lines += chunk.count(b"\n", pos, end)

    def _long_lines(self, chunk: bytes, start: int, last: int) -> list[int]:
        """Starts of lines that may be longer than MAX_LINE_CHARS (they must be counted as cut)."""
        out = []
        for i in range(start, last, _LONG_STEP):
            if chunk.find(b"\n", i, min(i + _LONG_STEP, last)) < 0:
                out.append(chunk.rfind(b"\n", 0, i) + 1)
        return out

    def _text(self, text: str, hit: bool | None, kinds: tuple[bool, bool] | None = None) -> Iterator[Marked]:
        """One line: cut and reduced to its last frame as `read` does; handed on when it matters.

        `hit` is None when unknown (the line was pieced together across chunks), else whether
        the chunk search found a word in it; `kinds`, when given, is what `classify` would say."""
        in_window = self.window_left > 0
        if in_window:
            self.window_left -= 1
        text = finish_line(text, self.stats)
        if self.stats.lines == 1:
            text = mend_cut_start(text)
            hit, kinds = None if hit is False else hit, None
        grammar = evidence = False
        if kinds is not None:
            grammar, evidence = kinds
        elif hit is not False:
            grammar, evidence = self.m.classify(text)
        if grammar:
            self.window_left = self.window
        if grammar or evidence or in_window:
            if self.rows is not None:
                self.rows.see(text, self.stats.lines, grammar, evidence)
            if self.runs:
                yield from self._emit((self.stats.lines, text, grammar, evidence))
            else:  # no metrics line held: handed on as it is (one generator less per line)
                yield self.stats.lines, text, grammar, evidence


class _RepairScanner:
    """A reshaped paste (`unwrap.detect`): read line by line, each line with its indent cut
    and wrapped lines joined back whole, then tested like any line. Such pastes are small;
    no chunk search, no skip policy."""

    def __init__(self, m: Matcher, stats: InputStats, window: int, repair: Repair) -> None:
        self.m, self.stats, self.window, self.repair = m, stats, window, repair
        self.window_left = 0

    def line_complete(self) -> None:
        """The anchor line just handed on holds its whole message (`ScanControl.line_complete`)."""
        self.window_left = 0

    def scan(self, chunks: Iterable[bytes]) -> Iterator[Marked]:
        physical = ((self.stats.lines, line) for line in lines_of(chunks, self.stats))
        for no, text in repaired(physical, self.repair):
            if no == 1:
                text = mend_cut_start(text)
            if len(text) > MAX_LINE_CHARS:
                text = cut_long(text)
            in_window = self.window_left > 0
            if in_window:
                self.window_left -= 1
            grammar, evidence = self.m.classify(text)
            if grammar:
                self.window_left = self.window
            if grammar or evidence or in_window:
                yield no, text, grammar, evidence
