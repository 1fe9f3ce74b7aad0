"""Lines a serving vLLM prints over and over: recognised by one compiled pattern, not parsed.

A server that runs for hours prints its engine metrics every few seconds (V0's
`engine/metrics.py`, V1's `v1/metrics/loggers.py`):

    Avg prompt throughput: 1.2 tokens/s, Avg generation throughput: 3.4 tokens/s, Running: 1 reqs,
    Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 0.1%, CPU KV cache usage: 0.0%.
    Engine 000: Avg prompt throughput: ..., Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage:
    0.1%, Prefix cache hit rate: 0.0%

and, with request logging on, each prompt (`Received request ...`) and output. Each
metrics line states one thing (the server is serving: a `ready` event); a request line
states nothing (it is users' text). Sent through the anchor search and the grammar, a
metrics line costs ~100 us, so a 10 MB log of them took seconds.

Two levels use this module:
- the line parser (`metrics_item`): a metrics line in the exact wording gets its event
  from one pattern; a test holds it to the grammar's on every metrics line of the fixtures
  and the corpus and on generated ones;
- the chunk scanner (`Periodic`): on raw bytes in vLLM's own header, a request line is
  dropped before decoding (the pipeline would drop it after peeling), and of a run of
  metrics lines of one origin, with nothing else handed on in between, only the first and
  the last are handed on: the lines between would feed the timeline the same event again;
- the chunk scanner's word search (`QuietSearch`): the words users' prompts quote, past a
  request header, are not handed back (`mask_requests`), by the cheaper of two ways.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Container

from triage.ingest.lines import REQUEST_LOG_PREFIXES
from triage.ingest.matcher import WORD_BYTES, Matcher
from triage.patterns import LazyPattern

METRICS_WORD = "Avg prompt throughput:"  # the grammar's anchor for the line (READY in vllm_log.lark)

# The figures vLLM prints after the throughput, across versions; an unknown field sends the
# line to the grammar (which reads any tail).
_FIELDS = (
    "Avg generation throughput",
    "Running",
    "Swapped",
    "Pending",
    "Waiting",
    "GPU KV cache usage",
    "CPU KV cache usage",
    "Prefix cache hit rate",
    "External prefix cache hit rate",
    "MM cache hit rate",
)
_NUM = r"-?\d+(?:\.\d+)?"
_METRICS = re.compile(
    rf"(?:Engine \d+: )?(?P<head>{re.escape(METRICS_WORD)}) {_NUM} tokens/s"
    rf"(?:, (?:{'|'.join(map(re.escape, _FIELDS))}): {_NUM} ?(?:tokens/s|reqs|%))*\.?"
)

_HTTP_CODE = LazyPattern(r"\b40[13]\b")  # the grammar's HTTP_AUTH


def metrics_item(text: str) -> dict | None:
    """The transformer's item for a normalised line that is exactly a metrics line, else None."""
    m = _METRICS.fullmatch(text)
    if m is None or _HTTP_CODE.search(text):  # a 401/403 figure: the grammar tries its HTTP rule there
        return None
    return {"kind": "ready", "what": m["head"]}


# vLLM's own header on raw bytes, no colours: `(APIServer pid=1) INFO 10-02 16:20:11 [loggers.py:123] `
# (V1) or `INFO 10-02 16:20:11 metrics.py:351] ` (V0). Other wrappers are left to the full path.
_HEAD = (
    rb"(?P<origin>\([A-Za-z][\w\-]*(?: [A-Z]+\d+(?:_[A-Z]+\d+)*)? pid=\d{1,18}\) )?"
    rb"(?P<level>DEBUG|INFO|WARNING) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? (?P<source>\[?[\w.\-]+:\d+\]) "
)
# The request logger's wording is `lines.REQUEST_LOG_PREFIXES` (the parse stage's test, behind any
# wrapper); here on raw bytes, behind vLLM's own header only. Plain words: no escaping needed.
_PREFIXES = tuple(prefix.encode() for prefix in REQUEST_LOG_PREFIXES)
_REQUEST = re.compile(_HEAD + b"(?:" + b"|".join(_PREFIXES) + b")")
_METRICS_RAW = re.compile(_HEAD + rb"(?:Engine \d+: )?" + re.escape(METRICS_WORD.encode()) + rb"[^\n\r]{0,2000}\r?")

REQUEST = "request"
_RECEIVED, _GENERATED = _REQUEST_MARKS = tuple(b"] " + prefix for prefix in _PREFIXES)  # where headers end
# The header as a regex for an engine that finds it (`Matcher.line_heads`): the same, no group names.
REQUEST_HEAD = re.sub(rb"\(\?P<\w+>", b"(?:", _REQUEST.pattern)
_MAX_MASKED = 64 * 1024  # lines longer than this (read.MAX_LINE_CHARS) take the cut-line path unmasked
_NUL = memoryview(bytes(_MAX_MASKED))
_STARTS = (b"(", b"DEBUG ", b"INFO ", b"WARNING ")  # how vLLM's header starts (_HEAD)


def mask_requests(chunk: bytes, start: int, end: int, keep: int) -> bytes | bytearray:
    """`chunk` with the text of each request-logger line in chunk[start:end] after its header's
    first `keep` bytes overwritten by NULs (same length, same offsets), for the word search.

    Profiled on a long serving log whose prompts quote errors: nearly every word found was in
    a prompt, and handing each back from the search cost more than all the rest. With `keep`
    at least the longest word, every word that starts in the header is still found whole, so
    `Periodic.verdict` tells such a line as before; a request line left with no word after its
    header is a plain line (the pipeline reads neither). The headers are found here by `find`
    and a regex per line; `mask_heads` does the same with headers an engine found."""
    out = None
    find, rfind, match = chunk.find, chunk.rfind, _REQUEST.match
    for mark in _REQUEST_MARKS:
        size = len(mark)
        i = find(mark, start, end)
        while i >= 0:
            line_start = rfind(b"\n", 0, i) + 1
            line_end = find(b"\n", i, end)
            if line_end < 0:
                break
            cut = i + size + keep
            if cut < line_end and line_start >= start and line_end - line_start <= _MAX_MASKED:
                m = match(chunk, line_start, i + size)
                if m is not None and m.end() == i + size:
                    if out is None:
                        out = bytearray(chunk)
                    out[cut:line_end] = _NUL[: line_end - cut]
            i = find(mark, line_end, end)
    return chunk if out is None else out


def mask_heads(chunk: bytes, start: int, end: int, keep: int, heads: list[tuple[int, int]]) -> bytes | bytearray:
    """`mask_requests` for request headers already found: (line start, header end) of each line
    whose start matches REQUEST_HEAD, by end offset (a line holds at most one such header: its
    end is the first `] Received request ` or `] Generated response ` of the line)."""
    out = None
    find = chunk.find
    for line_start, head_end in heads:
        if line_start < start:
            continue
        line_end = find(b"\n", head_end, end)
        if line_end < 0:
            break  # the unfinished last line, and no head after it
        cut = head_end + keep
        if cut < line_end and line_end - line_start <= _MAX_MASKED:
            if out is None:
                out = bytearray(chunk)
            out[cut:line_end] = _NUL[: line_end - cut]
    return chunk if out is None else out


def request_cut(chunk: bytes, line_start: int, line_end: int, keep: int) -> int | None:
    """Where `mask_requests` would start masking the line chunk[line_start:line_end] (None: it
    would leave the line as it is). Nothing in the header before its source's `]` holds a `]`:
    a line whose first `]` does not open one of the marks holds no header."""
    if not chunk.startswith(_STARTS, line_start) or line_end - line_start > _MAX_MASKED:
        return None
    i = chunk.find(b"]", line_start, line_end)
    for mark in _REQUEST_MARKS:
        if i >= 0 and chunk.startswith(mark, i):
            head_end = i + len(mark)
            if head_end + keep < line_end:
                m = _REQUEST.match(chunk, line_start, head_end)
                if m is not None and m.end() == head_end:
                    return head_end + keep
            return None
    return None


class Periodic:
    """Verdicts on raw lines for the chunk scanner: drop, hold as the latest of a run, or read."""

    def __init__(self, metrics_id: int | None) -> None:
        self.metrics_id = metrics_id  # the matcher's index of METRICS_WORD (None: not an anchor word)

    def verdict(self, chunk: bytes, start: int, end: int, hits: list[tuple[int, int]]) -> bytes | str | None:
        """REQUEST for a request-logger line whose header holds no word (drop it); for a metrics
        line holding no other word, the key of its run (origin, level and source); else None.

        `hits` are the (offset, word index) of the words found in chunk[start:end], by offset."""
        if chunk.startswith(b"(", start) or chunk.startswith((b"INFO ", b"DEBUG ", b"WARNING "), start):
            if len(hits) == 1 and hits[0][1] == self.metrics_id:
                m = _METRICS_RAW.match(chunk, start, end)
                if m is not None and m.end() == end:
                    origin, level, source = m.group("origin", "level", "source")
                    return b"%s|%s|%s" % (origin or b"", level, source)
            m = _REQUEST.match(chunk, start, end)
            if m is not None and hits[0][0] >= m.end():  # hits come by offset
                return REQUEST
        return None


_NONE: frozenset[int] = frozenset()
DENSE_HITS = 2048  # words found per MiB of a chunk past which its request text is masked before the search
DENSE_RUN = 16  # chunks masked, once one was dense, before the plain search is tried again


class QuietSearch:
    """The quiet scan's word search: the words in a chunk, less those `mask_requests` would hide
    (request-logger text past its header and `keep` bytes), and which lines it would mask.

    Two ways, the same words: a chunk is searched as it is and the few words in request text
    are dropped one by one (a serving log whose prompts seldom quote errors: no work per
    request line); once a chunk holds many words, the next chunks are masked first (prompts
    that quote errors densely: one word search would hand back each of their words), with the
    headers found by the engine when it can (`Matcher.line_heads`), else by `mask_requests`.
    The pure-Python engine always masks first (`Matcher.raw_hits`)."""

    def __init__(self, m: Matcher, keep: int) -> None:
        self.m, self.keep = m, keep
        self._dense = 0  # chunks left to mask without trying the plain search

    def hits(self, chunk: bytes, start: int, end: int) -> tuple[list[tuple[int, int]], Container[int]]:
        """The words (offset, word index) found in the complete lines chunk[start:end] as in
        the chunk masked, and the offsets of the newlines ending the lines masked (or of lines
        ending in a NUL: their words found are their own all the same)."""
        if not self._dense:
            found = self.m.raw_hits(chunk, len(chunk) * DENSE_HITS >> 20)
            if found is not None:
                return self._unmasked(chunk, start, end, found)
            self._dense = DENSE_RUN
        self._dense -= 1
        if chunk.find(_RECEIVED, start, end) < 0 and chunk.find(_GENERATED, start, end) < 0:
            return self.m.hits(chunk), _NONE  # dense, but no request line (a table, a deep chain)
        heads = self.m.line_heads([REQUEST_HEAD])  # compiled on the first dense chunk holding requests
        if heads is not None:
            searched = mask_heads(chunk, start, end, self.keep, heads.spans(chunk))
        else:
            searched = mask_requests(chunk, start, end, self.keep)
        return self.m.hits(searched), _NulEnds(searched) if searched is not chunk else _NONE  # type: ignore[arg-type]

    def _unmasked(
        self, chunk: bytes, start: int, end: int, found: list[tuple[int, int]]
    ) -> tuple[list[tuple[int, int]], set[int]]:
        """The words found in the chunk as it is, less those masking would have hidden: a word
        that does not end before its line's cut. A number word counts as `Matcher.hits` counts
        it, but when it ends at the cut (the NUL after it is no word byte)."""
        found.sort()
        out: list[tuple[int, int]] = []
        ends: set[int] = set()
        add, sizes, numbers, keep = out.append, self.m.sizes, self.m.numbers, self.keep
        find, rfind = chunk.find, chunk.rfind
        line_end, cut = -1, None
        for off, i in found[bisect_left(found, (start, -1)) : bisect_left(found, (end, -1))]:
            stop = off + sizes[i]
            joined_after = False
            if i in numbers:  # a body line's word has a byte after it (its line's newline at least)
                if off and chunk[off - 1] in WORD_BYTES:
                    continue
                joined_after = chunk[stop] in WORD_BYTES
                if joined_after and not (
                    chunk.startswith(_RECEIVED, stop - keep - len(_RECEIVED))
                    or chunk.startswith(_GENERATED, stop - keep - len(_GENERATED))
                ):
                    continue  # it would count only if it ended at a cut: `keep` bytes past a mark
            if off > line_end:  # the first word of a line that needs its cut
                line_end = find(b"\n", off, end)
                cut = request_cut(chunk, rfind(b"\n", 0, off) + 1, line_end, keep)
                if cut is not None:
                    ends.add(line_end)
            if cut is not None and stop > cut:
                continue  # in the text masked
            if joined_after and stop != cut:
                continue  # inside a longer number or word
            add((off, i))
        return out, ends


class _NulEnds:
    """The lines a masked buffer holds masked: their last byte is a NUL (`in` takes a line's newline offset)."""

    __slots__ = ("_buffer",)

    def __init__(self, buffer: bytes | bytearray) -> None:
        self._buffer = buffer

    def __contains__(self, end: object) -> bool:
        return isinstance(end, int) and end > 0 and self._buffer[end - 1] == 0
