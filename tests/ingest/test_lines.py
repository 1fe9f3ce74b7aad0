"""Prefix peeling: every wrapper a real log shows comes off, and the origin is kept."""

import pytest

from triage.ingest.lines import peel, strip_ansi

CASES = [
    # (raw line, origin, level, text)
    (
        "(EngineCore_DP0 pid=44265) ERROR 07-26 10:24:28 [core.py:1100] ValueError: x",
        "EngineCore_DP0 pid=44265",
        "ERROR",
        "ValueError: x",
    ),
    (
        "\x1b[1;36m(VllmWorkerProcess pid=2421)\x1b[0;0m INFO 10-14 12:32:47 worker.py:1] hello",
        "VllmWorkerProcess pid=2421",
        "INFO",
        "hello",
    ),
    (
        "[1;36m(VllmWorkerProcess pid=2421)[0;0m INFO 10-14 12:32:47 worker.py:1] hi",
        "VllmWorkerProcess pid=2421",
        "INFO",
        "hi",
    ),
    ("^[[0;36m(APIServer pid=1)^[[0;0m INFO 01-01 00:00:00 [a.py:1] y", "APIServer pid=1", "INFO", "y"),
    ("#033[0;36m(APIServer pid=1)#033[0;0m INFO 01-01 00:00:00 [a.py:1] y", "APIServer pid=1", "INFO", "y"),
    ("(VllmWorker rank=1 pid=7) INFO 01-01 00:00:00 [x.py:2] hi", "VllmWorker rank=1", "INFO", "hi"),
    ("(Worker_TP1 pid=9) WARNING 01-01 00:00:00 [x.py:2] w", "Worker_TP1 pid=9", "WARNING", "w"),
    (
        "(RayWorkerWrapper pid=5127, ip=10.4.0.12) INFO 02-05 09:11:53 model_runner.py:1118] m",
        "RayWorkerWrapper pid=5127",
        "INFO",
        "m",
    ),
    (
        "(EngineCore_0 pid=1) (RayWorkerWrapper pid=2, ip=10.0.0.2) INFO 02-05 09:11:53 [a.py:1] stacked",
        "RayWorkerWrapper pid=2",
        "INFO",
        "stacked",
    ),
    (
        "[rank0]: torch.OutOfMemoryError: CUDA out of memory.",
        "rank0",
        None,
        "torch.OutOfMemoryError: CUDA out of memory.",
    ),
    ("vllm-1  | INFO 01-21 10:00:00 worker.py:266] compose", "", "INFO", "compose"),
    ("2026-02-24T20:21:58.1234567Z INFO 01-01 00:00:00 [a.py:1] gha", "", "INFO", "gha"),
    (
        "[2026-02-24T20:21:58Z] (EngineCore_DP0 pid=6940) ValueError: v",
        "EngineCore_DP0 pid=6940",
        None,
        "ValueError: v",
    ),
    ("Nov 29 10:11:40 gpu-host vllm[1234]: INFO 11-29 10:11:40 [gpu_worker.py:1] journald", "", "INFO", "journald"),
    ("45986 INFO 04-14 21:43:57 [api_server.py:1081] numbered", "", "INFO", "numbered"),
    ("> > [rank0]: quoted", "rank0", None, "quoted"),
    ("0: INFO:     Application startup complete.", "", "INFO", "Application startup complete."),
    (
        '2024-02-20 21:46:23 | ERROR | stderr |   File "/x.py", line 1, in f',
        "",
        "ERROR",
        '  File "/x.py", line 1, in f',
    ),
    (
        "(RayWorkerWrapper pid=5) INFO 02-05 09:08:19 [cuda.py:240] Using Flash Attention. [repeated 6x across cluster]",
        "RayWorkerWrapper pid=5",
        "INFO",
        "Using Flash Attention.",
    ),
    (
        "VllmWorkerProcess pid=214) ERROR 09-27 05:20:38 multiproc_worker_utils.py:233] lost paren",
        "VllmWorkerProcess pid=214",
        "ERROR",
        "lost paren",
    ),
    (
        "(EngineCore pid=4242) INFO 03-29 01:24:36 [gpu_worker.py:272] new style",
        "EngineCore pid=4242",
        "INFO",
        "new style",
    ),
    ("INFO 03-27 08:35:47 llm_engine.py:73] old style", "", "INFO", "old style"),
    # grep -n (N:) and its context lines (N-) before other prefixes
    (
        "43:> torch.cuda.OutOfMemoryError: CUDA out of memory.",
        "",
        None,
        "torch.cuda.OutOfMemoryError: CUDA out of memory.",
    ),
    ("3:svc-local  | 2024-02-20 21:46:23 | ERROR | stderr | boom", "", "ERROR", "boom"),
    (
        "17-(EngineCore_DP0 pid=3) ERROR 01-01 00:00:00 [core.py:1] context line",
        "EngineCore_DP0 pid=3",
        "ERROR",
        "context line",
    ),
    (
        "12:RuntimeError: Engine core initialization failed.",
        "",
        None,
        "RuntimeError: Engine core initialization failed.",
    ),
    # numbers that belong to the message stay
    ("2048-token prompts are fine", "", None, "2048-token prompts are fine"),
]


@pytest.mark.parametrize("raw,origin,level,text", CASES)
def test_peel(raw, origin, level, text):
    line = peel(raw, 7)
    assert (line.origin, line.level, line.text) == (origin, level, text)
    assert line.no == 7


def test_ray_repeat_count_kept():
    assert peel("(RayWorkerWrapper pid=5) INFO 02-05 09:08:19 [a.py:1] x [repeated 30x across cluster]", 1).repeat == 30


def test_message_after_header_is_not_peeled_further():
    assert peel("INFO 01-01 00:00:00 [a.py:1] [rank0]: not a prefix here", 1).text == "[rank0]: not a prefix here"


def test_strip_ansi_keeps_plain_brackets():
    assert strip_ansi("[multiproc_executor.py:492] x") == "[multiproc_executor.py:492] x"
    assert strip_ansi("\x1b[32mINFO\x1b[0m") == "INFO"
