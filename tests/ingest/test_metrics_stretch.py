"""Stretches of metrics lines taken whole (`stretch.py`) hand on exactly what the line-by-line path does.

The reference is the same scanner with its stretches switched off: every metrics line of a
held run then goes through `Periodic.verdict` and the metrics-runs policy one by one. Both are fed the same
chunks (from a few bytes to 1 MiB), on every engine installed, and the reader calls
`ScanControl.line_complete` after the same lines (the pipeline does after a metrics line).
"""

from __future__ import annotations

import io
import random
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from installed_engines import installed_engines

from triage.ingest import scan
from triage.ingest.control import ScanControl
from triage.ingest.read import InputStats, iter_chunks
from triage.ingest.stretch import Stretches
from triage.parse import stream, vocabulary

ENGINES = installed_engines()
V1 = (
    "({who} pid={pid}) {level} 10-02 16:{m:02d}:{s:02d} [loggers.py:123] Engine 000: Avg prompt throughput: "
    "{a}.2 tokens/s, Avg generation throughput: 616.4 tokens/s, Running: {run} reqs, Waiting: 3 reqs, "
    "GPU KV cache usage: 1.0%, Prefix cache hit rate: 22.5%"
)
V0 = (
    "{level} 10-02 16:{m:02d}:{s:02d}.{a} metrics.py:351] Avg prompt throughput: {a}.8 tokens/s, Avg generation "
    "throughput: 245.5 tokens/s, Running: {run} reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 46.0%, "
    "CPU KV cache usage: 0.0%."
)
LINES = {
    "v1": V1,
    "v0": V0,
    "v1_401": V1.replace("{run} reqs", "401 reqs"),  # a figure the grammar's HTTP rule tries
    "v1_field": V1 + ", Frobnicated: 3 reqs",  # an unknown field: still a metrics line to the scanner
    "v1_word": V1 + ", RuntimeError: boom",  # another word: read the full way
    "v1_twice": V1 + ", Avg prompt throughput: 1.0 tokens/s",  # the word twice
    "v1_long": V1 + ", x" * 1100,  # longer than the pattern's tail
    "v1_frame": "Loading: 50%\r" + V1,  # a `\r` frame before the line
    "v1_cr": V1 + "\r",  # a `\r` before its newline
    "request": "(APIServer pid={pid}) INFO 10-02 16:{m:02d}:{s:02d} [logger.py:41] Received request chatcmpl-{a}: "
    "prompt: 'why torch.OutOfMemoryError: CUDA out of memory', params: SamplingParams(n=1)",
    "access": '(APIServer pid={pid}) INFO:     10.0.0.{a}:5000 - "POST /v1/completions HTTP/1.1" 200 OK',
    "error": "(EngineCore_DP0 pid=9) ERROR 10-02 17:00:00 [core.py:710] RuntimeError: CUDA error: out of memory",
    "plain": "plain text {a}",
    "blank": "",
}
_METRICS = ["v1", "v1", "v1", "v1", "v0", "v0"]
_KIND = st.sampled_from(_METRICS * 4 + sorted(LINES))
_WHO = ["APIServer", "APIServer", "EngineCore_DP0", "EngineCore_DP1 TP0", "Worker"]


def _log(kinds: list[tuple[str, int, int]]) -> bytes:
    out = []
    for i, (kind, origin, level) in enumerate(kinds):
        f = {
            "who": _WHO[origin],
            "pid": origin + 1,
            "level": ("INFO", "DEBUG", "WARNING")[level],
            "m": i // 60 % 60,
            "s": i % 60,
            "a": i,
            "run": i % 50,
        }
        out.append(LINES[kind].format(**f))
    return "\n".join(out).encode() + b"\n"


class _Kept(Stretches):
    """The scanner's stretches, kept where the test can read them (or switched off)."""

    made: list[_Kept] = []
    off = False

    def __init__(self, metrics_id) -> None:
        super().__init__(metrics_id)
        _Kept.made.append(self)

    def take(self, *args):
        return None if _Kept.off else super().take(*args)


def _scan(chunks, stats: InputStats, engine: str, fast: bool = True, control: ScanControl | None = None):
    """`scan.iter_marked`'s lines and the scan's stretches (switched off unless `fast`)."""
    _Kept.off = not fast
    with mock.patch("triage.ingest.scan.Stretches", _Kept):
        marked = scan.iter_marked(chunks, stats, vocabulary.matcher(engine), stream.MAX_JOINS, control=control)
    return marked, _Kept.made[-1]


def _marked(data: bytes, engine: str, chunk: int, seed: int, fast: bool) -> tuple[list, int, int]:
    """The lines handed on, the lines counted, and the lines taken by stretches."""
    stats = InputStats("log")
    chunks = iter([data[i : i + chunk] for i in range(0, len(data), chunk)])
    control = ScanControl()
    marked, stretches = _scan(chunks, stats, engine, fast, control)
    rng, out = random.Random(seed), []
    for line in marked:
        out.append(line)
        if rng.random() < 0.7:
            control.line_complete()
    return out, stats.lines, stretches._taken


def _same(data: bytes, engine: str, chunk: int, seed: int = 0) -> int:
    fast = _marked(data, engine, chunk, seed, True)
    slow = _marked(data, engine, chunk, seed, False)
    assert fast[:2] == slow[:2]
    assert slow[2] == 0
    return fast[2]


_CHUNK = st.one_of(st.integers(1, 400), st.integers(400, 8192), st.just(1 << 20))


@pytest.mark.parametrize("engine", ENGINES)
@settings(max_examples=120, deadline=None)
@given(
    st.lists(
        st.tuples(_KIND, st.sampled_from([0, 0, 0, 1, 2, 3, 4]), st.sampled_from([0, 0, 0, 1, 2])),
        min_size=1,
        max_size=120,
    ),
    _CHUNK,
    st.integers(0, 3),
)
def test_stretches_hand_on_what_the_line_by_line_path_does(engine, kinds, chunk, seed):
    _same(_log(kinds), engine, chunk, seed)


@pytest.mark.parametrize("engine", ENGINES)
@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(_METRICS), st.sampled_from([0, 1, 2]), st.just(0)), min_size=50, max_size=400),
    st.sampled_from(["\n", "\r\n"]),
    _CHUNK,
)
def test_long_runs_of_few_origins_are_taken_whole(engine, kinds, newline, chunk):
    data = _log(kinds).replace(b"\n", newline.encode())
    taken = _same(data, engine, chunk)
    if chunk >= 8192:
        assert taken > 0


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("odd", ["v1_401", "v1_word", "v1_twice", "v1_long", "v1_frame", "v1_field", "v1_cr"])
def test_a_near_miss_inside_a_run_goes_the_line_by_line_way(engine, odd):
    kinds = [("v1", 0, 0)] * 20 + [(odd, 0, 0)] + [("v1", 0, 0)] * 20
    data = _log(kinds)
    assert _same(data, engine, 1 << 20) > 0  # the lines around it are taken whole
    lines, _, _ = _marked(data, engine, 1 << 20, 0, True)
    handed = {no for no, *_ in lines}
    if odd in ("v1_401", "v1_word", "v1_twice", "v1_long", "v1_frame"):
        assert 21 in handed  # read the full way (the grammar tries it), not held as a run's latest
    else:
        assert 21 not in handed  # still a metrics line of the run: held, and the one after it too
    assert 41 in handed  # the run's last line


@pytest.mark.parametrize("engine", ENGINES)
def test_a_run_held_across_chunks_keeps_its_last_line(engine):
    data = _log([("v1", i % 2, 0) for i in range(3000)])
    for chunk in (1000, 65536, 1 << 20):
        assert _same(data, engine, chunk) > 0
    lines, count, _ = _marked(data, engine, len(data), 0, True)
    assert count == 3000 and [no for no, *_ in lines][-2:] == [2999, 3000]


def test_a_log_of_metrics_lines_is_mostly_taken_whole():
    data = _log([(("v1", "v0")[i % 7 == 0], 0, 0) for i in range(5000)])
    stats = InputStats("log")
    marked, stretches = _scan(iter_chunks(io.BytesIO(data), stats), stats, vocabulary.matcher().engine.name)
    list(marked)
    assert stretches._taken > 4500
