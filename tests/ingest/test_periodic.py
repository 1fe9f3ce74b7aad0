"""The cheap paths for periodic lines give what the full paths give.

- `periodic.metrics_item` (one pattern) gives the grammar's events on every metrics line of
  the fixtures and the corpus, and on generated ones;
- the chunk scanner's quiet mode (request lines dropped, runs of metrics lines cut to their
  first and last) gives the same report as handing every line on, on every fixture log and
  on generated serving logs.
"""

from __future__ import annotations

import functools
import io
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from triage import pipeline
from triage.diagnose import report_builder
from triage.ingest import periodic, scan
from triage.ingest.control import ScanControl
from triage.ingest.lines import peel, starts_record
from triage.ingest.reshape import Unfolded
from triage.parse import parse, stream, vocabulary

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = sorted((ROOT / "fixtures" / "logs").rglob("*.log"))
CORPUS = sorted((ROOT.parent / "shared" / "corpus").glob("*.log"))


def _grammar_events(line):
    """The events the full path (anchor search, grammar) gives, the fast path switched off."""
    saved = parse.metrics_item
    parse.metrics_item = lambda text: None
    try:
        return parse.parse_line_detail(line)
    finally:
        parse.metrics_item = saved


def _metrics_lines(paths: list[Path]) -> list[str]:
    out = []
    for path in paths:
        text = path.read_bytes().decode("utf-8", "replace")
        out += [raw for raw in text.splitlines() if periodic.METRICS_WORD in raw]
    return out


def test_the_metrics_word_is_a_grammar_anchor():
    assert periodic.METRICS_WORD in vocabulary.prefilter_words()


@pytest.mark.parametrize("source", ["fixtures", "corpus"])
def test_fast_metrics_parse_equals_the_grammar_on_real_lines(source):
    lines = _metrics_lines(FIXTURES if source == "fixtures" else CORPUS)
    if not lines:
        pytest.skip(f"no metrics lines in the {source}")
    fast = 0
    for no, raw in enumerate(lines, 1):
        line = peel(raw, no)
        assert parse.parse_line_detail(line) == _grammar_events(line), raw
        fast += periodic.metrics_item(parse.normalise(line.text)) is not None
    assert fast >= len(lines) // 2  # most real lines take the fast path


_NUM = st.one_of(
    st.integers(0, 99999).map(str),
    st.floats(0, 1e5, allow_nan=False).map(lambda f: f"{f:.1f}"),
    st.sampled_from(["401", "403.0", "401.5", "1401.0", "0.0"]),
)  # HTTP codes are anchor words
_FIELD = st.tuples(
    st.sampled_from(periodic._FIELDS + ("Speculative draft acceptance rate", "Killed")),
    _NUM,
    st.sampled_from(["tokens/s", "reqs", "%", " %", ""]),
)


def _metrics_text(engine, first, fields, period):
    body = f"Avg prompt throughput: {first} tokens/s" + "".join(
        f", {name}: {value}{unit if unit.startswith(' ') or not unit else ' ' + unit if unit != '%' else unit}"
        for name, value, unit in fields
    )
    return (f"Engine {engine:03d}: " if engine is not None else "") + body + ("." if period else "")


_HEADS = st.sampled_from(
    [
        "(APIServer pid=1) INFO 10-02 16:20:11 [loggers.py:123] ",
        "INFO 10-02 16:20:11 metrics.py:351] ",
        "INFO 12-28 20:31:40 llm_engine.py:1110] ",
        "3: INFO 10-02 16:20:11 metrics.py:351] ",
        "\x1b[1;36m(APIServer pid=7)\x1b[0;0m INFO 10-02 16:20:11 [loggers.py:123] ",
        "",
        "2025-01-01T10:00:00.123Z (APIServer pid=1) INFO 10-02 16:20:11 [loggers.py:123] ",
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    _HEADS,
    st.one_of(st.none(), st.integers(0, 7)),
    _NUM,
    st.lists(_FIELD, max_size=8),
    st.booleans(),
    st.sampled_from(["", " ", "  trailing words", " Traceback (most recent call last):"]),
)
def test_fast_metrics_parse_equals_the_grammar_on_generated_lines(head, engine, first, fields, period, tail):
    raw = head + _metrics_text(engine, first, fields, period) + tail
    line = peel(raw, 5)
    assert parse.parse_line_detail(line) == _grammar_events(line)


# ---------------------------------------------------------------------------- the quiet scan


def _report(data: bytes, quiet: bool, monkeypatch) -> dict:
    monkeypatch.setattr(pipeline, "iter_marked", functools.partial(scan.iter_marked, quiet=quiet))
    report = pipeline.run(io.BytesIO(data), "log", pipeline.Options())
    return report.model_dump()


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_quiet_scan_gives_the_same_report_on_fixtures(path, monkeypatch):
    data = path.read_bytes()
    assert _report(data, True, monkeypatch) == _report(data, False, monkeypatch)


V1 = (
    "(APIServer pid={pid}) INFO 10-02 16:{m:02d}:{s:02d} [loggers.py:123] Engine 000: Avg prompt throughput: "
    "{a}.0 tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache "
    "usage: 0.{a}%, Prefix cache hit rate: 0.0%"
)
V0 = (
    "INFO 10-02 16:{m:02d}:{s:02d} metrics.py:351] Avg prompt throughput: {a}.0 tokens/s, Avg generation "
    "throughput: 0.0 tokens/s, Running: 0 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 0.0%, "
    "CPU KV cache usage: 0.0%."
)
REQUEST = (
    "(APIServer pid={pid}) INFO 10-02 16:{m:02d}:{s:02d} [logger.py:41] Received request chatcmpl-{a}: "
    "prompt: 'why torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\\nTraceback "
    "(most recent call last):', params: SamplingParams(n=1)"
)
# A prompt whose words all lie past what the scan keeps of a request line (mask_requests).
REQUEST_LONG = (
    "(APIServer pid={pid}) INFO 10-02 16:{m:02d}:{s:02d} [logger.py:41] Received request chatcmpl-{a}: "
    "prompt: '" + "plain words " * 12 + "RuntimeError: CUDA error: out of memory\\nValueError: No "
    "available memory for the cache blocks.', params: SamplingParams(n=1)"
)
ACCESS = '(APIServer pid={pid}) INFO:     10.0.0.{a}:5000 - "POST /v1/completions HTTP/1.1" 200 OK'
START = [
    "(APIServer pid=1) INFO 10-02 16:00:00 [api_server.py:1896] vLLM API server version 0.10.2",
    "(APIServer pid=1) INFO 10-02 16:00:01 [api_server.py:1971] Starting vLLM API server 0 on http://0.0.0.0:8000",
    "(APIServer pid=1) INFO:     Application startup complete.",
]
DEATH = [
    "(EngineCore_DP0 pid=9) ERROR 10-02 17:00:00 [core.py:710] EngineCore encountered a fatal error.",
    "(EngineCore_DP0 pid=9) ERROR 10-02 17:00:00 [core.py:710] Traceback (most recent call last):",
    '(EngineCore_DP0 pid=9) ERROR 10-02 17:00:00 [core.py:710]   File "/x/vllm/v1/engine/core.py", line 701, '
    "in run_engine_core",
    "(EngineCore_DP0 pid=9) ERROR 10-02 17:00:00 [core.py:710] torch.OutOfMemoryError: CUDA out of memory. "
    "Tried to allocate 4.64 GiB. GPU 0 has a total capacity of 79.19 GiB of which 2.05 GiB is free.",
]
_KINDS = st.sampled_from(["v1", "v1", "v1b", "v0", "request", "request_long", "access", "death", "blank"])


@settings(max_examples=60, deadline=None)
@given(st.lists(_KINDS, min_size=1, max_size=60), st.booleans(), st.integers(1, 64))
def test_quiet_scan_gives_the_same_report_on_serving_logs(kinds, crlf, chunk_kib):
    out = list(START)
    for i, kind in enumerate(kinds):
        f = {"pid": 2 if kind == "v1b" else 1, "m": i // 60 % 60, "s": i % 60, "a": i}
        out += (
            DEATH
            if kind == "death"
            else [""]
            if kind == "blank"
            else [
                {"v1": V1, "v1b": V1, "v0": V0, "request": REQUEST, "request_long": REQUEST_LONG, "access": ACCESS}[
                    kind
                ].format(**f)
            ]
        )
    data = ("\r\n" if crlf else "\n").join(out).encode() + b"\n"
    reports = []
    for quiet in (True, False):
        stats = scan.InputStats("log")
        chunks = [data[i : i + chunk_kib * 64] for i in range(0, len(data), chunk_kib * 64)]
        control = ScanControl()
        marked = scan.iter_marked(
            iter(chunks), stats, vocabulary.matcher(), stream.MAX_JOINS, quiet=quiet, control=control
        )
        timeline = pipeline.Timeline()
        texts = {}
        for line, events in stream.line_events(marked, None, control):
            texts[line.no] = (line.origin, report_builder.evidence_text(line))
            timeline.feed(line, events)
        timeline.finish()
        reports.append(
            (report_builder.build_report(timeline, pipeline.load_rules(), texts, stats).model_dump(), stats.lines)
        )
    assert reports[0] == reports[1]


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(["(APIServer pid=1) ", "(APIServer pid=12345) ", ""]),
    st.sampled_from(["INFO", "DEBUG"]),
    st.sampled_from(["[logger.py:41] ", "logger.py:37] ", "[logger.py:71]  "]),
    st.sampled_from(["Received request ", "Generated response ", "Received  request "]),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), max_size=80),
)
def test_request_lines_dropped_by_the_scan_are_those_the_pipeline_drops(origin, level, source, what, rest):
    raw = f"{origin}{level} 10-02 16:20:11 {source}{what}CUDA out of memory {rest}"
    data = raw.encode()
    spots = [(m.start(), 0) for m in re.finditer(re.escape(b"CUDA out of memory"), data)]
    verdict = periodic.Periodic(None).verdict(data, 0, len(data), spots)
    if verdict == periodic.REQUEST:
        assert peel(raw, 1).text.startswith(stream.REQUEST_LOG_PREFIXES)
        assert starts_record(raw)  # so no held line of the pipeline would have been joined to it


def test_request_text_is_masked_past_the_header_only():
    """The scan searches request lines only in their header and the first `keep` bytes after it;
    every other byte, and every offset, is unchanged."""
    head = b"(APIServer pid=1) INFO 10-02 16:20:48 [logger.py:41] Received request "
    request = head + b"x" * 10 + b" CUDA out of memory " * 20
    other = b"(APIServer pid=1) INFO 10-02 16:20:48 [core.py:41] prompt: Received request CUDA out of memory"
    long_line = head + b"y" * (70 * 1024)
    data = (
        b"\n".join([other, request, b"ERROR x] Received request CUDA out of memory " * 5, long_line, request]) + b"\n"
    )
    masked = periodic.mask_requests(data, 0, len(data), 16)
    assert len(masked) == len(data)
    lines, kept = masked.split(b"\n"), data.split(b"\n")
    assert lines[0] == kept[0] and lines[2] == kept[2] and lines[3] == kept[3]  # not vLLM's header, or too long
    for i in (1, 4):
        assert lines[i][: len(head) + 16] == kept[i][: len(head) + 16]
        assert set(lines[i][len(head) + 16 :]) == {0}
    start = len(other) + 1  # a line before `start` is not this call's to mask
    assert periodic.mask_requests(data, start + len(request) + 1, len(data), 16).split(b"\n")[1] == request


def test_a_prompt_quoting_a_folded_traceback_is_not_unfolded(monkeypatch):
    """A request line whose prompt pastes a traceback (literal `\\n`s) stays the user's text:
    unfolded, its pieces read as the server's own lines (a gated-repo error diagnosed on a
    healthy server; seen on a long serving log where such a line began a chunk)."""
    prompt = (
        "(APIServer pid=1) INFO 10-02 16:29:40 [logger.py:41] Received request chatcmpl-1: prompt: "
        '\'Fix this:\\nTraceback (most recent call last):\\n  File "/app/x.py", line 3, in <module>\\n'
        "huggingface_hub.errors.GatedRepoError: 401 Client Error. Cannot access gated repo for url "
        "https://huggingface.co/meta-llama/x.\\nTraceback (most recent call last):', params: SamplingParams(n=1)"
    )
    pieces = list(Unfolded([(7, prompt, True, False)], vocabulary.matcher().classify))
    assert pieces == [(7, prompt, True, False)]
    plain = "\n".join(START).encode() + b"\n"
    quoted = "\n".join([*START, prompt]).encode() + b"\n"
    for quiet in (True, False):  # not quiet: the scan hands the line on, as it does a chunk's first line
        got, want = _report(quoted, quiet, monkeypatch), _report(plain, quiet, monkeypatch)
        assert (got["outcome"], got["diagnoses"]) == (want["outcome"], want["diagnoses"])
