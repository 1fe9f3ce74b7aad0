"""The prefilter at chunk level: one multi-literal search per 1 MiB chunk, Python work only near hits.

Almost every line of a log states nothing (access lines, request and metrics lines, NCCL
chatter). Splitting, decoding and testing each of them in Python costs microseconds per
line, which caps throughput far below what the disk delivers. Here the raw UTF-8 bytes of a
whole chunk are searched once for every anchor word, lines are counted with `bytes.count`,
and only the lines around hits are cut out, decoded and handed on.

The words are the grammar's anchor literals (`parse.prefilter_words()`) and the evidence
reader's (`bundle.WORDS`), so the two prefilters cannot drift apart. The search uses the
fastest engine installed (the `fast` extra): Hyperscan, then the Rust
Aho-Corasick automaton, then a pure-Python search for a few key substrings. Each yields
the same lines; only the speed differs. `VLLM_TRIAGE_MATCHER=python|ahocorasick|hyperscan`
picks one (tests, benchmarks).
"""

from __future__ import annotations

import codecs
import os
from bisect import bisect_left, bisect_right
import threading
from collections.abc import Iterable, Iterator
from itertools import chain
from functools import lru_cache

from .periodic import METRICS_WORD, REQUEST, Periodic
from .read import MAX_LINE_CHARS, InputStats, _finish, _last_frame, cut_long, lines_of
from .reshape import mend_cut_start
from .unwrap import SAMPLE_LINES, Repair, detect, repaired

SAMPLE_BYTES = 256 << 10  # the wrap test reads at most this much of the input's head

# A line is (number, text, holds a grammar anchor word, holds an evidence word).
Marked = tuple[int, str, bool, bool]
MAX_RUNS = 16  # origins whose metrics runs are followed at once
_LONG_STEP = MAX_LINE_CHARS // 2  # a line longer than MAX_LINE_CHARS bytes covers a whole such stretch


class _Hyperscan:
    name = "hyperscan"

    def __init__(self, words: list[bytes]) -> None:
        import hyperscan

        self._sizes = [len(w) for w in words]
        self._make_scratch = hyperscan.Scratch
        self._local = threading.local()  # scratch space serves one scan at a time: one per thread
        self._db = self._cached(hyperscan, words) or self._compile(hyperscan, words)

    def _compile(self, hyperscan, words: list[bytes]):
        db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        exprs = [b"".join(b"%c" % c if chr(c).isalnum() else b"\\x%02x" % c for c in w) for w in words]
        db.compile(expressions=exprs, ids=list(range(len(words))), elements=len(words))
        from . import cache

        try:
            cache.save(_db_name(hyperscan, words), hyperscan.dumpb(db))
        except Exception:  # noqa: BLE001 - a database that cannot be saved is compiled again next run
            pass
        return db

    def _cached(self, hyperscan, words: list[bytes]):
        """The database compiled by an earlier run (compiling costs ~60 ms), if it loads and finds
        every word (a database from another CPU or library version is refused or rebuilt)."""
        from . import cache

        blob = cache.load(_db_name(hyperscan, words))
        if not isinstance(blob, bytes):
            return None
        try:
            self._db = hyperscan.loadb(blob, hyperscan.HS_MODE_BLOCK)
            found = {i for _, i in self.hits(b"\n".join(words))}
        except Exception:  # noqa: BLE001 - damaged or foreign: compile afresh
            return None
        finally:
            self._local = threading.local()
        return self._db if found == set(range(len(words))) else None

    def hits(self, data: bytes) -> list[tuple[int, int]]:
        """(start offset, word index) of every match, overlapping ones included, by end offset."""
        scratch = getattr(self._local, "scratch", None)
        if scratch is None:
            scratch = self._local.scratch = self._make_scratch(self._db)
        out: list[tuple[int, int]] = []
        add, sizes = out.append, self._sizes
        self._db.scan(data, match_event_handler=lambda i, _start, end, _flags, _ctx: add((end - sizes[i], i)),
                      scratch=scratch)
        return out


def _db_name(hyperscan, words: list[bytes]) -> str:
    from .cache import content_name

    return content_name("hyperscan", [*words, str(getattr(hyperscan, "__version__", "")).encode()], ".db")


class _AhoCorasick:
    name = "ahocorasick"

    def __init__(self, words: list[bytes]) -> None:
        import ahocorasick_rs as acr

        self._ac = acr.BytesAhoCorasick(words, implementation=acr.Implementation.DFA)

    def hits(self, data: bytes) -> list[tuple[int, int]]:
        return [(start, i) for i, start, _end in self._ac.find_matches_as_indexes(data, overlapping=True)]


class _PurePython:
    """Search a few key substrings with `bytes.find` (C speed), then confirm the words in each line."""

    name = "python"

    def __init__(self, words: list[bytes]) -> None:
        self._words = words
        self._keys = _cover(words)

    def hits(self, data: bytes) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        find, rfind, words = data.find, data.rfind, self._words
        for key, owners in self._keys:
            i = find(key)
            while i >= 0:
                start = rfind(b"\n", 0, i) + 1
                end = find(b"\n", i)
                end = len(data) if end < 0 else end
                line = data[start:end]
                for w in owners:
                    j = line.find(words[w])
                    while j >= 0:
                        out.append((start + j, w))
                        j = line.find(words[w], j + 1)
                i = find(key, end)
        out.sort()
        return out


def _cover(words: list[bytes], size: int = 4) -> list[tuple[bytes, list[int]]]:
    """Few key substrings such that every word holds one (greedy set cover over its n-grams)."""
    grams: dict[bytes, set[int]] = {}
    for i, w in enumerate(words):
        for g in {w[j:j + size] for j in range(max(1, len(w) - size + 1))}:
            grams.setdefault(g, set()).add(i)
    left, keys = set(range(len(words))), []
    while left:
        best = max(grams, key=lambda g: (len(grams[g] & left), g))
        owners = sorted(w for w in range(len(words)) if best in words[w])
        keys.append((best, owners))
        left -= set(owners)
    return keys


_BACKENDS = {"hyperscan": _Hyperscan, "ahocorasick": _AhoCorasick, "python": _PurePython}


class Matcher:
    """Every anchor word in a buffer; which of them are the grammar's, which the evidence reader's."""

    def __init__(self, grammar_words: Iterable[str], evidence_words: Iterable[str], backend: str | None = None,
                 numbers: Iterable[str] = ()):
        g, e = set(grammar_words), set(evidence_words)
        self._str_words = sorted(g | e)
        self.words = [w.encode() for w in self._str_words]
        self._grammar = [w in g for w in self._str_words]  # by word index: an anchor word, an evidence word
        self._evidence = [w in e for w in self._str_words]
        # Words that count only as a whole number (`\b401\b`): a port 54013 holds no HTTP 401.
        self._numbers = {i: len(w) for i, w in enumerate(self.words) if w.decode() in set(numbers)}
        self.engine = _engine(self.words, backend)

    def index(self, word: str) -> int | None:
        """The index of a word in `words` (None: not one of them)."""
        try:
            return self._str_words.index(word)
        except ValueError:
            return None

    def hits(self, data: bytes) -> list[tuple[int, int]]:
        """(start, word index) of the words in a buffer (numbers inside longer numbers left out)."""
        found = self.engine.hits(data)
        if not self._numbers:
            return found
        return [(start, i) for start, i in found if i not in self._numbers or self._whole(data, start, i)]

    def _whole(self, data: bytes, start: int, i: int) -> bool:
        end = start + self._numbers[i]
        return not (start > 0 and 48 <= data[start - 1] <= 57) and not (end < len(data) and 48 <= data[end] <= 57)

    def occurrences(self, text: str) -> list[tuple[int, str]]:
        """(position, word) of every grammar word in a line of text, overlapping ones included."""
        words, anchor = self._str_words, self._grammar
        data = text.encode("utf-8", "surrogatepass")
        hits = [(start, i) for start, i in self.hits(data) if anchor[i]]
        if text.isascii():
            return [(start, words[i]) for start, i in hits]
        return [(len(data[:start].decode("utf-8", "surrogatepass")), words[i]) for start, i in hits]

    def classify(self, text: str) -> tuple[bool, bool]:
        """(holds a grammar word, holds an evidence word) for one line of text."""
        grammar = evidence = False
        for _, i in self.hits(text.encode("utf-8", "surrogatepass")):
            grammar = grammar or self._grammar[i]
            evidence = evidence or self._evidence[i]
        return grammar, evidence


def _engine(words: list[bytes], backend: str | None):
    choice = backend or os.environ.get("VLLM_TRIAGE_MATCHER") or ""
    if choice:
        if choice not in _BACKENDS:
            raise ValueError(f"unknown matcher {choice!r}; must be one of: {', '.join(_BACKENDS)}")
        return _BACKENDS[choice](words)
    for make in (_Hyperscan, _AhoCorasick):
        try:
            return make(words)
        except Exception:  # noqa: BLE001 - not installed, or no wheel for this machine: try the next
            continue
    return _PurePython(words)


_LOCK = threading.Lock()


def matcher(backend: str | None = None) -> Matcher:
    """The process's matcher (built once; a live watch parses from two threads)."""
    with _LOCK:
        return _matcher(backend)


@lru_cache(maxsize=4)
def _matcher(backend: str | None) -> Matcher:
    from .bundle import WORDS
    from .parse import number_words, prefilter_words

    return Matcher((*prefilter_words(), *LEVEL_WORDS), WORDS, backend, number_words())


# A logged ERROR/CRITICAL line states a failure even in words the grammar does not know
# (pipeline._error_line): such lines are handed on too. No grammar anchor starts with them,
# so the parser spends nothing on them.
LEVEL_WORDS = ("ERROR ", "CRITICAL ")


def iter_marked(chunks: Iterable[bytes], stats: InputStats, window: int = 0,
                backend: str | None = None, wrap_sample: int = 0, quiet: bool = True) -> "MarkedLines":
    """Each line holding an anchor or evidence word, and the `window` lines after each line
    holding an anchor word (a hard-wrapped message continues there), as (no, text, grammar,
    evidence). Lines are numbered and cut exactly as `read.iter_lines` numbers and cuts them.

    With `wrap_sample`, that many bytes are read first to tell a paste indented as a block
    or hard-wrapped at one column (`unwrap.py`); its lines are then handed on with the
    indent cut and wrapped lines joined, numbered by their first physical line.

    With `quiet` (the pipeline's way), lines the pipeline would read to no effect are not
    handed on: request-logger lines, and repeated metrics lines (`periodic.py`)."""
    chunks = iter(chunks)
    head: list[bytes] = []
    size = 0
    while size < wrap_sample and (chunk := next(chunks, None)) is not None:
        head.append(chunk)
        size += len(chunk)
    repair = repair_of(b"".join(head)) if head else Repair()
    chunks = chain(head, chunks)
    if repair:
        stats.wrap_width, stats.indent = repair.width, repair.indent
        return MarkedLines(_RepairScanner(matcher(backend), stats, window, repair), chunks)
    return MarkedLines(_Scanner(matcher(backend), stats, window, quiet), chunks)


def repair_of(head: bytes) -> Repair:
    """How the input's head (its complete lines) was reshaped by a paste, if it was."""
    sample = head[:SAMPLE_BYTES].decode("utf-8", "replace").replace("\r\n", "\n").split("\n")
    return detect(sample[:SAMPLE_LINES][:-1])


class MarkedLines:
    """The iterator of `iter_marked`, with a way to say that the last line handed on was whole."""

    def __init__(self, scanner: "_Scanner | _RepairScanner", chunks: Iterable[bytes]) -> None:
        self._scanner = scanner
        self._lines = scanner.scan(chunks)

    def __iter__(self) -> Iterator[Marked]:
        return self._lines

    def line_complete(self) -> None:
        """The anchor line just handed on holds its whole message: the lines after it are not
        its continuation, so only those with words of their own are handed on (on a serving
        log, most anchor lines are metrics lines followed by access lines)."""
        self._scanner.window_left = 0


class _Scanner:
    def __init__(self, m: Matcher, stats: InputStats, window: int, quiet: bool = True) -> None:
        self.m, self.stats, self.window = m, stats, window
        self.carry = b""  # the unfinished last line of the chunks so far
        self.skipping = False  # the rest of an over-long line that was already cut and counted
        self.window_left = 0
        self.periodic = Periodic(m.index(METRICS_WORD)) if quiet else None
        # Runs of metrics lines since the last other line handed on: origin key -> the run's
        # latest line, held back (None: the line handed on last is the run's latest).
        self.runs: dict[bytes, tuple[int, bytes] | None] = {}

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
        self.carry = chunk[last + 1:]
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
        if 0 <= cut and len(text) - cut <= MAX_LINE_CHARS:
            self.carry = text[cut + 1:].encode("utf-8", "replace") + self.carry[used:]
            return
        self.carry, self.skipping = b"", True
        yield from self._text(text, None)

    def _body(self, chunk: bytes, start: int, last: int) -> Iterator[Marked]:
        """The complete lines chunk[start:last + 1]: count them, hand on those near hits."""
        spots = self.m.hits(chunk)
        spots.sort()
        spots = spots[bisect_left(spots, (start, -1)):bisect_right(spots, (last, len(self.m.words)))]
        if last - start > MAX_LINE_CHARS:
            spots = sorted(spots + [(off, -1) for off in self._long_lines(chunk, start, last)])
        pos, k, n = start, 0, len(spots)
        while k < n:
            off = spots[k][0]
            if off < pos:
                k += 1
                continue  # another hit in a line already handed on
            line_start = chunk.rfind(b"\n", 0, off) + 1
            yield from self._skip(chunk, pos, line_start)
            end = chunk.find(b"\n", off)
            j = k + 1
            while j < n and spots[j][0] < end:
                j += 1
            verdict = self.periodic.verdict(chunk, line_start, end, spots[k:j]) \
                if self.periodic is not None and end - line_start <= MAX_LINE_CHARS else None
            k, pos = j, end + 1
            if verdict is None:
                yield from self._text(chunk[line_start:end].decode("utf-8", "replace"), True)
            elif verdict == REQUEST or verdict in self.runs:
                self._quiet(chunk[line_start:end], verdict)
            else:  # the first metrics line of its origin since other news
                going = list(self.runs) if len(self.runs) < MAX_RUNS else []
                yield from self._text(chunk[line_start:end].decode("utf-8", "replace"), True)
                self.runs = dict.fromkeys([*going, verdict])  # the held lines went first (_emit)
        yield from self._skip(chunk, pos, last + 1)

    def _quiet(self, line: bytes, verdict: bytes | str) -> None:
        """A line the pipeline would read to no effect: a request line (dropped unread) or a
        metrics line of the current run (held as its latest; the one before it is dropped).
        Either ends a hard-wrap window, as the pipeline's `line_complete` would."""
        self.window_left = 0
        if verdict == REQUEST:
            self.stats.lines += 1  # no longer than MAX_LINE_CHARS bytes (see _body): nothing to cut
        else:  # decoded only if handed on; the one it replaces is dropped
            self.stats.lines += 1
            self.runs[verdict] = (self.stats.lines, line)

    def _emit(self, marked: Marked | None) -> Iterator[Marked]:
        """Hand on a line (None: only the held ones), the held metrics lines first, in order.
        A line handed on ends every run (a metrics line that starts one re-opens its own)."""
        held = sorted(m for m in self.runs.values() if m is not None)
        self.runs = {}
        for no, line in held:
            text = line.decode("utf-8", "replace")
            yield no, _last_frame(text) if "\r" in text else text, True, False  # as `_finish` cuts it
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

    def _text(self, text: str, hit: bool | None) -> Iterator[Marked]:
        """One line: cut and reduced to its last frame as `read` does; handed on when it matters.

        `hit` is None when unknown (the line was pieced together across chunks), else whether
        the chunk search found a word in it."""
        in_window = self.window_left > 0
        if in_window:
            self.window_left -= 1
        text = _finish(text, self.stats)
        if self.stats.lines == 1:
            text = mend_cut_start(text)
            hit = None if hit is False else hit
        grammar = evidence = False
        if hit is not False:
            grammar, evidence = self.m.classify(text)
        if grammar:
            self.window_left = self.window
        if grammar or evidence or in_window:
            yield from self._emit((self.stats.lines, text, grammar, evidence))


class _RepairScanner:
    """A reshaped paste (`unwrap.detect`): read line by line, each line with its indent cut
    and wrapped lines joined back whole, then tested like any line. Such pastes are small;
    no chunk search."""

    def __init__(self, m: Matcher, stats: InputStats, window: int, repair: Repair) -> None:
        self.m, self.stats, self.window, self.repair = m, stats, window, repair
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
