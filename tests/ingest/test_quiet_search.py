"""The quiet scan's word search (`periodic.QuietSearch`) finds, by each of its ways, the words
the plain way finds: the chunk masked past each request header (`mask_requests`, a `find` and
a regex per line), then searched.

The other ways: the chunk searched as it is and the words in request text dropped one by one
(`_unmasked`, `request_cut`); the headers found by the engine (`Matcher.line_heads`,
`mask_heads`). Held to the plain way line for line, on every engine, with chunk boundaries
anywhere: request lines in vLLM's header and in foreign wrappers, headers quoted inside
prompts, words across the cut, number words ending at it.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from installed_engines import installed_engines

from triage.ingest import matcher as matcher_module
from triage.ingest import periodic, scan
from triage.ingest.control import ScanControl
from triage.ingest.read import InputStats
from triage.parse import stream, vocabulary

ENGINES = [name for name in ("hyperscan", "python") if name in matcher_module._BACKENDS]
KEEP = max(map(len, vocabulary.matcher().words))
HEAD = b"(APIServer pid=1) INFO 10-02 16:20:11 [logger.py:41] Received request "
WAYS = {  # name -> (DENSE_HITS, whether the engine may find the headers)
    "masked by find": (-1, False),  # the plain way: every chunk masked, headers found by `mask_requests`
    "masked by the engine": (-1, True),
    "unmasked": (1 << 40, True),
    "switching": (None, True),  # dense and plain chunks taking turns: ~4 words a chunk is dense, DENSE_RUN 2
}


def _marked(data: bytes, engine: str, chunk: int, way: str, monkeypatch, complete: bool = True) -> tuple:
    dense, heads = WAYS[way]
    m = vocabulary.matcher(engine)
    monkeypatch.setattr(periodic, "DENSE_HITS", dense if dense is not None else (4 << 20) // chunk)
    monkeypatch.setattr(periodic, "DENSE_RUN", 2)
    if not heads:
        monkeypatch.setattr(m, "line_heads", lambda patterns: None)
    stats = InputStats("log")
    control = ScanControl()
    marked = scan.iter_marked(
        iter([data[i : i + chunk] for i in range(0, len(data), chunk)]), stats, m, stream.MAX_JOINS, control=control
    )
    out = []
    for item in marked:
        out.append(item)
        if complete and item[2] and "throughput" in item[1]:
            control.line_complete()  # as the pipeline says of a metrics line
    monkeypatch.undo()
    return out, stats.lines, stats.truncated_lines


def _same_by_every_way(data: bytes, engine: str, chunk: int, monkeypatch) -> None:
    classify = vocabulary.matcher(engine).classify
    for complete in (True, False):
        want = _marked(data, engine, chunk, "masked by find", monkeypatch, complete)
        for _, text, grammar, evidence in want[0]:  # a line's kinds are its whole text's (a window line: none)
            assert "\n" in text or (grammar, evidence) in (classify(text), (False, False)), text
        for way in WAYS:
            assert _marked(data, engine, chunk, way, monkeypatch, complete) == want, way


def _request(prefix: bytes, gap: int, word: bytes, after: bytes = b" rest of the prompt") -> bytes:
    """A request line whose `word` starts `gap` bytes past the header's end (the cut is at KEEP)."""
    return prefix + HEAD + b"chatcmpl-" + (b"a" * max(0, gap - 9))[: max(0, gap - 9)] + word + after


def _fixed_lines() -> list[bytes]:
    lines = [
        b"(APIServer pid=1) INFO 10-02 16:20:10 [api_server.py:1896] vLLM API server version 0.10.2",
        b"(EngineCore_DP0 pid=9) ERROR 10-02 17:00:00 [core.py:710] Traceback (most recent call last):",
        b"(APIServer pid=1) INFO 10-02 16:20:12 [loggers.py:123] Engine 000: Avg prompt throughput: 1.0 "
        b"tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache "
        b"usage: 0.1%, Prefix cache hit rate: 0.0%",
        b"plain continuation",
        b"another plain line",
    ]
    for gap in range(KEEP - 8, KEEP + 3):  # words ending before, at and past the cut
        for word, after in (
            (b"401", b"7 ok"),
            (b"401", b" ok"),
            (b"403", b"x"),
            (b"Error", b" x"),
            (b"CUDA out of memory.", b" x"),
        ):
            lines.append(_request(b"", gap, word, after))
    lines += [
        _request(b"", 0, b"x", b" " * 5),  # nothing past the cut: left as it is
        _request(b"", 3, b"Traceback (most recent call last):", b""),  # a word in the kept bytes only
        _request(b"2025-01-01T10:00:00Z ", 120, b"CUDA out of memory."),  # a foreign wrapper: the full path
        _request(b"api-1  | ", 120, b"RuntimeError: x"),
        b"INFO 10-02 16:20:11 logger.py:37] Received request cmpl-1: prompt: '" + b"y" * 90 + b" OOMKilled'",
        b"(APIServer pid=1) INFO 10-02 16:20:11 [logger.py:41] Generated response cmpl-2: output: '"
        + b"z" * 90
        + b" Traceback (most recent call last):'",
        b"(ErrorWorker pid=1) INFO 10-02 16:20:11 [logger.py:41] Received request x: " + b"w" * 90 + b"Error",
        # a word in the header: the full path, its kinds read from the whole line (here an evidence word)
        b"(ErrorWorker pid=1) INFO 10-02 16:20:11 [logger.py:41] Received request x: " + b"w" * 90 + b"12 MiB",
        b"(APIServer pid=1) WARNING 10-02 16:20:11 [Error.py:41] Received request x: " + b"w" * 90 + b"Error",
        _request(b"", 100, b"INFO 10-02 16:20:11 [logger.py:41] Received request quoted Error"),  # quoted header
        b"(APIServer pid=1) INFO 10-02 16:20:11 [logger.py:41] prompt: Received request " + b"v" * 90 + b"Error",
        b"(APIServer pid=x) INFO 10-02 16:20:11 [logger.py:41] Received request " + b"v" * 90 + b"Error",  # no header
        b"INFO 10-02 16:20 [logger.py:41] Received request " + b"v" * 90 + b"Error",
        b"(APIServer pid=1) INFO 10-02 16:20:11 [a.py:1] Generated response ] Received request "
        + b"u" * 90
        + b"Killed",
        b'(APIServer pid=1) INFO:     10.0.0.7:40123 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
        b'(APIServer pid=1) INFO:     10.0.0.7:34013 - "POST /v1/chat/completions HTTP/1.1" 403 Forbidden',
        b"\xff\xfe not utf-8 Error",
        b"",
    ]
    return lines


@pytest.mark.parametrize("engine", installed_engines())
def test_every_way_finds_the_words_of_the_plain_way(engine, monkeypatch):
    lines = _fixed_lines()
    data = b"\n".join(lines) + b"\n"
    long_request = HEAD + b"q" * (70 * 1024) + b" Error"  # too long to mask: the cut-line path
    quiet = b"(APIServer pid=1) INFO 10-02 16:20:11 [async_llm.py:321] Added request chatcmpl-1.\n" * 40
    for body in (
        data,
        data.replace(b"\n", b"\r\n"),
        data + long_request + b"\n" + data,
        data[:-1],
        quiet + data[:3000] + quiet + data + quiet,
    ):
        for chunk in (64, 1000, 4096, 1 << 20):
            _same_by_every_way(body, engine, chunk, monkeypatch)


_PIECES = st.sampled_from(
    [
        b"\n",
        b"\r\n",
        b" ",
        HEAD,
        b"(APIServer pid=1) INFO 10-02 16:20:11 [logger.py:41] Generated response ",
        b"INFO 10-02 16:20:11 logger.py:37] Received request ",
        b"(APIServer pid=1) ",
        b"ERROR 10-02 16:20:11 [x.py:1] ",
        b"Error",
        b"401",
        b"4013",
        b"7",
        b"F",
        b"_",
        b"MiB",
        b"CUDA out of memory.",
        b"Traceback (most recent call last):",
        b"Avg prompt throughput: 1.0 tokens/s",
        b"chatcmpl-" + b"0123456789abcdef" * 2,
        b"a" * 37,
        b"b" * 61,
        b"\xe2\x96\x88",
        b"\xff",
    ]
)


@pytest.mark.parametrize("engine", installed_engines())
@settings(max_examples=80, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(_PIECES, max_size=120), chunk=st.integers(min_value=16, max_value=2000))
def test_every_way_finds_the_words_of_the_plain_way_on_random_logs(engine, pieces, chunk, monkeypatch):
    _same_by_every_way(b"".join(pieces), engine, chunk, monkeypatch)


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES, max_size=60))
def test_request_cut_and_mask_heads_agree_with_mask_requests(pieces):
    """Line by line, `request_cut` says where `mask_requests` masks; with the headers Hyperscan
    finds, `mask_heads` masks what `mask_requests` masks."""
    data = b"x\n" + b"".join(pieces) + b"\n"
    start, end = 2, len(data)
    want = bytes(periodic.mask_requests(data, start, end, KEEP))
    ends = {i for i in range(start, end) if data[i] == 10 and want[i - 1] == 0}  # the pieces hold no NUL
    got = bytearray(data)
    pos = start
    while pos < end:
        line_end = data.index(b"\n", pos)
        cut = periodic.request_cut(data, pos, line_end, KEEP)
        assert (cut is not None) == (line_end in ends)
        if cut is not None:
            got[cut:line_end] = bytes(line_end - cut)
        pos = line_end + 1
    assert bytes(got) == want
    try:
        heads = vocabulary.matcher("hyperscan").line_heads([periodic.REQUEST_HEAD])
    except ImportError:
        return
    assert bytes(periodic.mask_heads(data, start, end, KEEP, heads.spans(data))) == want


@pytest.mark.parametrize("engine", installed_engines())
def test_only_request_lines_in_vllms_header_are_left_out(engine, monkeypatch):
    """A prompt quoting errors is left out in vLLM's own header; in a foreign wrapper (a timestamp,
    a compose prefix) or after other text the line takes the full path, however the chunks cut
    it; a header quoted inside a prompt changes nothing. (A line that a chunk boundary cuts is
    pieced together and handed on whatever it is: the pipeline drops a request line itself.)"""
    quoting = b"chatcmpl-1: prompt: '" + b"p" * 60 + b" torch.OutOfMemoryError: CUDA out of memory.'"
    left_out = [HEAD + quoting, HEAD + b"chatcmpl-2: prompt: '" + b"p" * 60 + b" " + HEAD + b"Traceback'"]
    kept = [
        b"2025-01-01T10:00:00.123Z " + HEAD + quoting,
        b"api-1  | " + HEAD + quoting,
        b"user wrote: " + HEAD + quoting,
    ]
    data = b"\n".join([b"start", *left_out, *kept, b"end"]) + b"\n"  # `end`: in the window after an anchor line
    for way in WAYS:
        for chunk in (7, 100, 1 << 20):
            texts = [text.encode() for _, text, _, _ in _marked(data, engine, chunk, way, monkeypatch)[0]]
            assert texts == [*kept, b"end"] if chunk > len(data) else set(kept) <= set(texts), (way, chunk)
