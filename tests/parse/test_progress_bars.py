"""Progress-bar updates: the first line of a bar is read, its updates are skipped unread,
and a bar after other news (a new phase, a restarted attempt) is read again."""

from __future__ import annotations

import io

from triage import pipeline
from triage.ingest.control import ScanControl
from triage.ingest.read import InputStats, iter_chunks
from triage.ingest.scan import iter_marked
from triage.parse import stream
from triage.parse.vocabulary import matcher


def events_of(text: str) -> list:
    stats = InputStats("t")
    control = ScanControl()
    marked = iter_marked(
        iter_chunks(io.BytesIO(text.encode()), stats), stats, matcher(), stream.MAX_JOINS, control=control
    )
    return [(line.no, e) for line, events in stream.line_events(marked, None, control) for e in events]


def bar(worker: int, done: int, total: int = 30) -> str:
    pct = done * 100 // total
    return (
        f"(VllmWorker TP{worker} pid={100 + worker}) Loading safetensors checkpoint shards: "
        f"{pct:3d}% Completed | {done}/{total} [00:{done:02d}<00:10,  1.33s/it]"
    )


BANNER = (
    "INFO 08-22 11:46:52 [core.py:74] Initializing a V1 LLM engine (v0.10.1) with config: "
    "model='Qwen/Qwen2.5-7B-Instruct', dtype=torch.bfloat16, max_seq_len=32768, tensor_parallel_size=2"
)


def test_updates_of_a_bar_are_skipped_per_origin():
    lines = [bar(w, d) for d in range(0, 31) for w in (0, 1)]
    found = events_of("\n".join(lines) + "\n")
    assert [(no, e.kind, e.origin) for no, e in found] == [
        (1, "phase", "VllmWorker TP0 pid=100"),
        (2, "phase", "VllmWorker TP1 pid=101"),
    ]


def test_a_bar_after_other_news_is_read_again():
    attempt = [BANNER] + [bar(0, d) for d in range(0, 31, 10)]
    found = events_of("\n".join(attempt + attempt) + "\n")
    kinds = [(no, e.kind) for no, e in found]
    assert kinds == [(1, "engine_config"), (2, "phase"), (6, "engine_config"), (7, "phase")]


def test_the_diagnosis_of_a_crash_during_the_bar_names_the_phase():
    log = (
        "\n".join(
            [
                BANNER,
                bar(0, 0),
                bar(0, 10),
                bar(0, 16),
                "Traceback (most recent call last):",
                '  File "/usr/lib/python3.12/site-packages/vllm/model_executor/model_loader/utils.py", '
                "line 40, in load_model",
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.02 GiB. GPU 0 has a total "
                "capacity of 23.55 GiB of which 512.00 MiB is free.",
            ]
        )
        + "\n"
    )
    report = pipeline.run(io.BytesIO(log.encode()), "t.log")
    assert report.failure is not None and report.failure.phase == "loading_weights"
