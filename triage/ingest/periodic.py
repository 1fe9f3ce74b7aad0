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
  the last are handed on: the lines between would feed the timeline the same event again.
"""

from __future__ import annotations

import re

METRICS_WORD = "Avg prompt throughput:"  # the grammar's anchor for the line (READY in vllm_log.lark)

# The figures vLLM prints after the throughput, across versions; an unknown field sends the
# line to the grammar (which reads any tail).
_FIELDS = ("Avg generation throughput", "Running", "Swapped", "Pending", "Waiting", "GPU KV cache usage",
           "CPU KV cache usage", "Prefix cache hit rate", "External prefix cache hit rate", "MM cache hit rate")
_NUM = r"-?\d+(?:\.\d+)?"
_METRICS = re.compile(
    rf"(?:Engine \d+: )?(?P<head>{re.escape(METRICS_WORD)}) {_NUM} tokens/s"
    rf"(?:, (?:{'|'.join(map(re.escape, _FIELDS))}): {_NUM} ?(?:tokens/s|reqs|%))*\.?")

_HTTP_CODE = re.compile(r"(?<![0-9])40[13](?![0-9])")


def metrics_item(text: str) -> dict | None:
    """The transformer's item for a normalised line that is exactly a metrics line, else None."""
    m = _METRICS.fullmatch(text)
    if m is None or _HTTP_CODE.search(text):  # a 401/403 figure: the grammar tries its HTTP rule there
        return None
    return {"kind": "ready", "what": m["head"]}


# vLLM's own header on raw bytes, no colours: `(APIServer pid=1) INFO 10-02 16:20:11 [loggers.py:123] `
# (V1) or `INFO 10-02 16:20:11 metrics.py:351] ` (V0). Other wrappers are left to the full path.
_HEAD = (rb"(?P<origin>\([A-Za-z][\w\-]*(?: [A-Z]+\d+(?:_[A-Z]+\d+)*)? pid=\d{1,18}\) )?"
         rb"(?P<level>DEBUG|INFO|WARNING) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? (?P<source>\[?[\w.\-]+:\d+\]) ")
_REQUEST = re.compile(_HEAD + rb"(?:Received request |Generated response )")
_METRICS_RAW = re.compile(_HEAD + rb"(?:Engine \d+: )?" + re.escape(METRICS_WORD.encode()) + rb"[^\n\r]{0,2000}\r?")

REQUEST = "request"
_REQUEST_MARKS = (b"] Received request ", b"] Generated response ")  # where every request header ends
_MAX_MASKED = 64 * 1024  # lines longer than this (read.MAX_LINE_CHARS) take the cut-line path unmasked
_NUL = memoryview(bytes(_MAX_MASKED))


def mask_requests(chunk: bytes, start: int, end: int, keep: int) -> bytes:
    """`chunk` with the text of each request-logger line in chunk[start:end] after its header's
    first `keep` bytes overwritten by NULs (same length, same offsets), for the word search.

    Profiled on a long serving log whose prompts quote errors: nearly every word found was in
    a prompt, and handing each back from the search cost more than all the rest. With `keep`
    at least the longest word, every word that starts in the header is still found whole, so
    `Periodic.verdict` tells such a line as before; a request line left with no word after its
    header is a plain line (the pipeline reads neither)."""
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
                    out[cut:line_end] = _NUL[:line_end - cut]
            i = find(mark, line_end, end)
    return chunk if out is None else bytes(out)


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
                    return b"%s|%s|%s" % (m["origin"] or b"", m["level"], m["source"])
            m = _REQUEST.match(chunk, start, end)
            if m is not None and hits[0][0] >= m.end():  # hits come by offset
                return REQUEST
        return None
