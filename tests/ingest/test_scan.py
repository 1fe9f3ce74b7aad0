"""The chunk-level scanner hands on exactly the lines a line-by-line reader would select.

Reference: `read.iter_lines` (every physical line, decoded and cut) filtered by a plain
substring test of the prefilter words, plus the lines in the join window after an anchor
line. Every search engine installed is held to it, with chunk boundaries in awkward places.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from installed_engines import installed_engines

from triage.ingest import matcher, read, scan
from triage.ingest.control import ScanControl
from triage.ingest.read import InputStats, iter_chunks, iter_lines
from triage.ingest.repair import repaired
from triage.parse import vocabulary
from triage.parse.sysinfo import WORDS
from triage.parse.vocabulary import number_words, prefilter, prefilter_words

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = sorted((ROOT / "fixtures" / "logs").rglob("*.log"))


ENGINES = installed_engines()
NUMBERS = number_words()


def _reference(data: bytes, window: int) -> tuple[list, InputStats]:
    stats = InputStats("ref")
    grammar, evidence = (*prefilter_words(), *vocabulary.LEVEL_WORDS), WORDS
    out, left = [], 0
    lines = enumerate(iter_lines(io.BytesIO(data), stats), 1)
    repair = scan.repair_of(b"".join(iter_chunks(io.BytesIO(data), InputStats("sample"))))
    if repair:  # an indented or hard-wrapped paste: the scan hands on whole (repaired) lines
        lines = ((no, read.cut_long(text)) for no, text in repaired(lines, repair))
    for no, text in lines:
        in_window = left > 0
        if in_window:
            left -= 1
        g = any(w in text for w in grammar if w not in NUMBERS) or any(
            re.search(rf"(?<![0-9A-Za-z_]){w}(?![0-9A-Za-z_])", text) for w in NUMBERS
        )  # `\b` in ASCII
        e = any(w in text for w in evidence)
        if g:
            left = window
        if g or e or in_window:
            out.append((no, text, g, e))
    return out, stats


def _scanned(data: bytes, window: int, engine: str) -> tuple[list, InputStats]:
    stats = InputStats("scan")
    return list(
        scan.iter_marked(
            iter_chunks(io.BytesIO(data), stats),
            stats,
            vocabulary.matcher(engine),
            window,
            wrap_sample=len(data) + 1,
            quiet=False,
        )
    ), stats


def _same(data: bytes, engine: str, window: int = 3) -> None:
    want, want_stats = _reference(data, window)
    got, got_stats = _scanned(data, window, engine)
    assert got == want
    assert (got_stats.lines, got_stats.truncated_lines, got_stats.bytes) == (
        want_stats.lines,
        want_stats.truncated_lines,
        want_stats.bytes,
    )


@pytest.mark.parametrize("engine", ENGINES)
def test_fixture_logs_scan_like_the_line_reader(engine, monkeypatch):
    monkeypatch.setattr(read, "CHUNK_SIZE", 4096)  # many chunk boundaries inside each log
    for path in FIXTURES:
        _same(path.read_bytes(), engine)


@pytest.mark.parametrize("engine", ENGINES)
def test_awkward_inputs_scan_like_the_line_reader(engine, monkeypatch):
    monkeypatch.setattr(read, "CHUNK_SIZE", 1000)
    long_plain = b"x" * 70000
    long_frames = b"\r".join(b"Loading safetensors checkpoint shards: %d%%" % i for i in range(4000))
    cases = [
        b"",
        b"no newline at the end: Traceback (most recent call last):",
        b"Error\nplain\nplain\nplain\nplain\nError\n",
        b'a\r\nTraceback (most recent call last):\r\n  File "x.py", line 1, in f\r\n',
        long_plain + b" Error\nnext line\n" + long_plain + b"\n",
        b"head\n" + long_frames + b"\nafter\n",
        b"bad utf-8 \xff\xfe Error \xe2\x82\nok\n\xe2\x96\x88 version 0.9.1\n",
        "\ufeffINFO Uvicorn running on http://0.0.0.0:8000\n".encode(),
        "ERROR CUDA out of memory. Tried to allocate 2.00 GiB\n".encode("utf-16"),
        b"x" * 200000,
        b"Error" + b"y" * 200000 + b"\nafter\nafter\n",
    ]
    for data in cases:
        _same(data, engine)


_PIECES = st.sampled_from(
    [
        b"\n",
        b"\r",
        b"\r\n",
        b" ",
        b"INFO 10-02 16:20:11 [x.py:1] ",
        b"(EngineCore_DP0 pid=3) ",
        b"Error",
        b"Traceback (most recent call last):",
        b"MiB",
        b"401",
        b"out of memory.",
        b"\xe2\x96\x88 version",
        b"\xff",
        b"\xe2\x96",
        b"plain words",
        b"x" * 997,
        b"7",
        b":54013",
    ]
)


@pytest.mark.parametrize("engine", ENGINES)
@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(_PIECES, max_size=80), chunk=st.integers(min_value=5, max_value=3000))
def test_random_inputs_scan_like_the_line_reader(engine, pieces, chunk, monkeypatch):
    monkeypatch.setattr(read, "CHUNK_SIZE", chunk)
    _same(b"".join(pieces), engine)


@pytest.mark.parametrize("engine", ENGINES)
def test_engines_classify_alike(engine):
    m = vocabulary.matcher(engine)
    for text in (
        "plain",
        "Traceback (most recent call last):",
        "| 0 NVIDIA H100 MiB |",
        "GPU 0: x Error",
        "█ version 0.9.1",
        "",
    ):
        assert m.classify(text) == (any(w in text for w in prefilter_words()), any(w in text for w in WORDS))
        assert prefilter(text) == m.classify(text)[0]
    assert m.classify("10.0.0.7:54013 - 200 OK") == (False, False)
    assert m.classify("403 Client Error") == (True, False)


def test_python_key_cover_holds_every_word():
    words = [w.encode() for w in (*prefilter_words(), *WORDS)]
    keys = matcher._cover(words)
    for w in words:
        assert any(k in w for k, _ in keys)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_complete_line_ends_its_window(engine):
    """After `ScanControl.line_complete()` the lines that follow an anchor line are handed on only when
    they hold a word of their own; the count of lines is unchanged."""
    data = (
        b"INFO x [gpu_worker.py:1] Available KV cache memory: 8.30 GiB\n"
        b"plain one\nplain two\nTraceback (most recent call last):\nplain three\n"
    ) * 3
    stats = InputStats("scan")
    control = ScanControl()
    marked = scan.iter_marked(
        iter_chunks(io.BytesIO(data), stats), stats, vocabulary.matcher(engine), 3, control=control
    )
    seen = []
    for _, text, anchored, _ in marked:
        seen.append(text)
        if anchored:
            control.line_complete()
    assert not any(text.startswith("plain") for text in seen)
    assert seen.count("Traceback (most recent call last):") == 3 and stats.lines == 15
    everything = [m[1] for m in _scanned(data, 3, engine)[0]]
    assert "plain one" in everything and "plain three" in everything


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.sampled_from(
            [
                "out of memory",
                "CUDA out of memory",
                "memory",
                "Error",
                "rror: ",
                "Errno",
                "ErrorError",
                "x",
                " ",
                "\n",
                "4013",
                "401",
                "MiB",
                "█",
            ]
        ),
        max_size=40,
    )
)
def test_python_engine_finds_every_occurrence(pieces):
    """The fallback reports each occurrence of each word once, overlapping ones included, like a
    brute-force search (and so like the compiled engines)."""
    words = sorted(
        {
            w.encode()
            for w in (
                "out of memory",
                "CUDA out of memory",
                "memory",
                "Error",
                "Errno",
                "ror: ",
                "401",
                "MiB",
                "█",
                "rorE",
            )
        }
    )
    data = "".join(pieces).encode()
    want = sorted((i, k) for k, w in enumerate(words) for i in range(len(data)) if data.startswith(w, i))
    assert matcher._PurePython(words).hits(data) == want
