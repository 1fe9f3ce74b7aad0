"""A long nvidia-smi process table: its rows past the first ones go on as blocks (ingest/rows.py),
read by one pattern (sysinfo.BundleReader.tally); the report is the one reading every row gives.

Logs are generated here (a startup that fails for want of free memory, then a CSV of
processes); the full path is the scan with `quiet=False`, which hands every row on alone.
"""

from __future__ import annotations

import random

import pytest

from triage import pipeline
from triage.diagnose import report_builder
from triage.diagnose.redact import LineRedactor
from triage.ingest import scan
from triage.ingest.rows import HEAD_ROWS
from triage.parse import stream, vocabulary

E = "(EngineCore_DP0 pid=311) ERROR 10-02 16:20:11 [core.py:718] "
HEAD = [
    "(APIServer pid=1) INFO 10-02 16:20:00 [api_server.py:1896] vLLM API server version 0.10.2",
    E + "EngineCore failed to start.",
    E + "Traceback (most recent call last):",
    E + '  File "/x/vllm/v1/worker/gpu_worker.py", line 180, in init_device',
    E + "    raise ValueError(",
    E + "ValueError: Free memory on device (47.31/79.19 GiB) on startup is less than desired GPU memory "
    "utilization (0.9, 71.27 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
    "pid, process_name, used_memory [MiB]",
]


def _rows(n: int, seed: int, name=lambda i: f"/usr/bin/python3 worker_{i % 7}.py") -> list[str]:
    rng = random.Random(seed)
    return [f"{20000 + i}, {name(i)}, {rng.choice((0, 2, 4, 250, 512, 1024))} MiB" for i in range(n)]


def _report(lines: list[str], quiet: bool, chunk: int) -> tuple[dict, int, int]:
    """(report, lines counted, blocks handed on) for a log read in chunks of `chunk` bytes."""
    data = ("\n".join(lines) + "\n").encode()
    stats = scan.InputStats("log")
    chunks = [data[i : i + chunk] for i in range(0, len(data), chunk)]
    marked = list(scan.iter_marked(iter(chunks), stats, vocabulary.matcher(), stream.MAX_JOINS, quiet=quiet))
    timeline, texts = pipeline.Timeline(), {}
    for line, events in stream.line_events(iter(marked), LineRedactor()):
        texts[line.no] = (line.origin, report_builder.evidence_text(line))
        timeline.feed(line, events)
    timeline.finish()
    report = report_builder.build_report(timeline, pipeline.load_rules(), texts, stats).model_dump()
    return report, stats.lines, sum("\n" in m[1] for m in marked)


def _same(lines: list[str], chunk: int = 1 << 20) -> tuple[dict, int]:
    fast, fast_lines, blocks = _report(lines, True, chunk)
    full, full_lines, none = _report(lines, False, chunk)
    assert none == 0
    assert fast == full and fast_lines == full_lines == len(lines)
    return fast, blocks


@pytest.mark.parametrize("chunk", [1 << 20, 4096, 333])
def test_a_long_table_read_as_blocks_gives_the_full_report(chunk):
    report, blocks = _same(HEAD + _rows(400, 1), chunk)
    assert blocks >= 1
    assert report["facts"]["gpu_processes_unlisted"] == 400 - 16
    assert len(report["facts"]["gpu_processes"]) == 16


def test_a_short_table_is_read_row_by_row():
    _, blocks = _same(HEAD + _rows(HEAD_ROWS, 2))
    assert blocks == 0


@pytest.mark.parametrize("odd", ["[N/A]", "x\ry", "python3 (x)", "job: 7", "a|b", "NVIDIA-SMI 1", "CUDA out of memory"])
def test_a_row_the_pattern_does_not_fit_reads_the_block_row_by_row(odd):
    rows = _rows(300, 3)
    rows[150] = f"{30150}, {odd}, 8 MiB"
    rows[200] = f"{30200}, worker, {odd}"
    _same(HEAD + rows)


def test_rows_past_a_line_of_another_shape_or_no_word_are_read_alike():
    rows = _rows(300, 4)
    rows[100:100] = ["", "some other line", "1, 2, 3, 4 MiB", "12345, x, 12 GiB"]
    _same(HEAD + rows + ["(APIServer pid=1) ERROR 10-02 16:20:12 [x.py:1] RuntimeError: later"])


def test_a_secret_in_a_process_name_is_redacted_on_the_fast_path():
    rows = _rows(300, 5, name=lambda i: f"python serve.py --api-key sk-live{i:08d}abcdefghijklmnop")
    rows[250] = "30250, python serve.py --api-key sk-liveabcdefghijklmnop12345678, 70000 MiB"
    report, blocks = _same(HEAD + rows)
    assert blocks >= 1
    assert "sk-live" not in repr(report)
    assert any(p["pid"] == 30250 for p in report["facts"]["gpu_processes"])
