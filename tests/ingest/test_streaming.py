"""Streaming: a million-line serving log is triaged in bounded memory, and what it holds
(request errors by the thousand, a metrics line every few seconds) does not pile up."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import triage_bytes

ROOT = Path(__file__).resolve().parents[2]
MAX_RSS_MIB = 120

STARTUP = """\
(APIServer pid=1) INFO 10-02 16:20:11 [api_server.py:1896] vLLM API server version 0.10.2
(EngineCore_DP0 pid=311) INFO 10-02 16:20:12 [core.py:76] Initializing a V1 LLM engine (v0.10.2) with config: \
model='Qwen/Qwen2.5-7B-Instruct', dtype=torch.bfloat16, max_seq_len=32768, tensor_parallel_size=1
(EngineCore_DP0 pid=311) INFO 10-02 16:20:20 [gpu_model_runner.py:2392] Model loading took 14.2474 GiB and 4.1 seconds
(EngineCore_DP0 pid=311) INFO 10-02 16:20:30 [gpu_worker.py:298] Available KV cache memory: 53.11 GiB
(EngineCore_DP0 pid=311) INFO 10-02 16:20:30 [kv_cache_utils.py:864] GPU KV cache size: 994,512 tokens
(APIServer pid=1) INFO 10-02 16:20:40 [api_server.py:1971] Starting vLLM API server 0 on http://0.0.0.0:8000
(APIServer pid=1) INFO:     Application startup complete.
"""
ACCESS = '(APIServer pid=1) INFO:     10.0.3.17:{port} - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
METRICS = (
    "(APIServer pid=1) INFO 10-02 17:{m:02d}:11 [loggers.py:123] Engine 000: Avg prompt throughput: 912.3 "
    "tokens/s, Avg generation throughput: 211.5 tokens/s, Running: 12 reqs, Waiting: 0 reqs, GPU KV cache "
    "usage: 31.2%, Prefix cache hit rate: 12.0%\n"
)
REQUEST_ERROR = """\
(APIServer pid=1) ERROR 10-02 17:31:52 [serving_chat.py:222] Error in preprocessing prompt inputs
(APIServer pid=1) ERROR 10-02 17:31:52 [serving_chat.py:222] Traceback (most recent call last):
(APIServer pid=1) ERROR 10-02 17:31:52 [serving_chat.py:222]   File "/x/vllm/entrypoints/openai/serving_engine.py", \
line 569, in _validate_input
(APIServer pid=1) ERROR 10-02 17:31:52 [serving_chat.py:222]     raise ValueError(
(APIServer pid=1) ERROR 10-02 17:31:52 [serving_chat.py:222] ValueError: This model's maximum context length is \
32768 tokens. However, you requested {n} tokens.
"""
DEATH = """\
(EngineCore_DP0 pid=311) ERROR 10-02 19:12:07 [core.py:710] EngineCore encountered a fatal error.
(EngineCore_DP0 pid=311) ERROR 10-02 19:12:07 [core.py:710] Traceback (most recent call last):
(EngineCore_DP0 pid=311) ERROR 10-02 19:12:07 [core.py:710]   File "/x/vllm/v1/worker/gpu_model_runner.py", \
line 2039, in execute_model
(EngineCore_DP0 pid=311) ERROR 10-02 19:12:07 [core.py:710] torch.OutOfMemoryError: CUDA out of memory. Tried to \
allocate 4.64 GiB. GPU 0 has a total capacity of 79.19 GiB of which 2.05 GiB is free.
(APIServer pid=1) ERROR 10-02 19:12:07 [core_client.py:564] Engine core proc EngineCore_DP0 died unexpectedly, \
shutting down client.
"""


def serving_log(lines: int) -> bytes:
    """STARTUP, then access lines with a metrics line every 50 and a request error every 2000."""
    out = [STARTUP]
    for i in range(lines // 50):
        out.append("".join(ACCESS.format(port=32768 + (i * 50 + k) % 28000) for k in range(49)))
        out.append(METRICS.format(m=i % 60))
        if i % 40 == 0:
            out.append(REQUEST_ERROR.format(n=32769 + i))
    out.append(DEATH)
    return "".join(out).encode()


def test_a_million_lines_in_bounded_memory(tmp_path):
    log = tmp_path / "serving.log"
    log.write_bytes(serving_log(1_000_000))
    code = (
        "import json, resource, sys\n"
        "from triage.apps.cli import main\n"
        "import io\n"
        "out = io.StringIO()\n"
        "rc = main(['--format', 'json', sys.argv[1]], stdout=out)\n"
        # VmHWM: this process's own peak (ru_maxrss can report the forking parent's)
        "try:\n"
        "    rss = int(next(l for l in open('/proc/self/status') if l.startswith('VmHWM')).split()[1])\n"
        "except OSError:\n"
        "    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "print(json.dumps({'rc': rc, 'rss_kib': rss, 'report': json.loads(out.getvalue())}))\n"
    )
    p = subprocess.run([sys.executable, "-c", code, str(log)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    result = json.loads(p.stdout)
    report = result["report"]
    assert report["input"]["lines"] > 1_000_000
    assert report["outcome"] == "failed"
    assert report["failure"]["line"] > 1_000_000  # the engine death at the end, not a request error
    assert result["rss_kib"] / 1024 < MAX_RSS_MIB, f"peak RSS {result['rss_kib'] / 1024:.0f} MiB"


def test_kept_state_stays_bounded_and_the_diagnosis_does_not_change():
    """The same failure after 60 000 lines of serving as after none: same outcome, cause and phase,
    with only a bounded number of events, signals and evidence texts kept."""
    from triage.pipeline import MAX_EVIDENCE_LINES
    from triage.timeline import timeline

    short = triage_bytes((STARTUP + DEATH).encode())
    long = triage_bytes(serving_log(60_000))
    assert (long.outcome, long.failure.phase, [d.id for d in long.diagnoses][:1]) == (
        short.outcome,
        short.failure.phase,
        [d.id for d in short.diagnoses][:1],
    )

    from triage.ingest.lines import peel
    from triage.parse.parse import parse_line
    from triage.timeline.timeline import Timeline

    tl = Timeline()
    for no, raw in enumerate(serving_log(200_000).decode().splitlines(), 1):
        if "ERROR" in raw or "Avg prompt" in raw or "startup" in raw:
            tl.feed(peel(raw, no), parse_line(peel(raw, no)))
    tl.finish()
    a = tl.current
    assert a.ready is not None
    assert len(a.events) <= timeline.MAX_EVENTS_PER_ATTEMPT + 2 * timeline.RECENT_EVENTS
    assert len(a.signals) <= timeline.MAX_SIGNALS + timeline.MAX_KEPT_SIGNALS + 2 * timeline.RECENT_SIGNALS
    assert len(a.chains) <= 2 * timeline.RECENT_CHAINS
    assert a.fatal is not None and a.fatal.after_ready
    assert len(tl.lines_in_use()) < MAX_EVIDENCE_LINES
