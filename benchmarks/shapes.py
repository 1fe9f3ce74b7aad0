"""Log shapes that once made the tool slow or its report huge, generated for the benchmark.

Each writer takes a path and a target size (some ignore it: their shape is a count) and
writes a seeded log, so every run measures the same bytes:

  longserve   ~35 h of serving at ~2 requests a second: a metrics line every 10 s
              (12k of them), request-logger lines whose prompts quote errors densely
  metrics     nothing but the engine's periodic metrics lines (V1 and V0 wording)
  restarts    500 identical startup attempts, each failing the same way (a restart loop)
  smi         a startup that fails for want of free memory, then an nvidia-smi CSV of
              100 000 processes holding GPU memory
  chains      10 000 exceptions chained by "During handling of the above exception ..."
"""

from __future__ import annotations

import random
from pathlib import Path

from logs import API, CORE, SITE, Clock, _head, engine_death, metrics_line, serving_lines, startup_section, write_until

# Prompts as a request logger prints them (the repr of the user's text: one line, `\n`
# escaped): users who paste whole error reports, tracebacks and nvidia-smi tables.
QUOTING_PROMPTS = [
    'My vLLM server crashed with this:\\nTraceback (most recent call last):\\n  File \\"/app/serve.py\\", line 12, '
    "in <module>\\n    llm = LLM(model)\\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
    "GPU 0 has a total capacity of 79.19 GiB of which 1.05 GiB is free.\\nRuntimeError: CUDA error: out of memory"
    "\\nValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`.\\nWhat now?",
    "Explain this NCCL failure: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, "
    "unhandled system error, NCCL version 2.21.5\\nncclSystemError: System call (e.g. socket, malloc) failed."
    "\\nOSError: [Errno 98] Address already in use\\nRuntimeError: Engine core initialization failed.",
    "nvidia-smi shows\\n| NVIDIA-SMI 570.133.20   Driver Version: 570.133.20   CUDA Version: 12.8 |\\n|   0  NVIDIA "
    "H100 80GB HBM3   On  | 00000000:18:00.0 Off |\\n| N/A 36C P0 118W / 700W | 81000MiB / 81559MiB | 100% Default |"
    "\\n|    0   N/A  N/A   2977   C   /usr/bin/python3   80992MiB |\\nwhy is it full? ValueError: To serve at least "
    "one request with the models's max seq len (131072), (5.00 GiB KV cache is needed",
    "Fix my Dockerfile, the container prints Killed and OOMKilled, Exit Code: 137, then huggingface_hub.errors."
    "GatedRepoError: 401 Client Error. Cannot access gated repo for url https://huggingface.co/meta-llama/x.\\n"
    "Also: ERROR: Error while finding module specification; ImportError: libcudart.so.12: cannot open shared "
    "object file: No such file or directory\\nTraceback (most recent call last):",
]


def longserve(path: Path, size: int, seed: int = 11) -> None:
    """A long, slow serving log: few requests a second, most prompts pasting error reports."""
    rng = random.Random(seed)
    clock = Clock()
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        fh.write("\n".join(startup_section(clock)) + "\n")
        budget = size - fh.tell() - 6000
        write_until(
            fh, serving_lines(clock, rng, request_logging=True, rate=1.9, prompts=(QUOTING_PROMPTS, 0.7)), budget
        )
        fh.write("\n".join(engine_death(clock)) + "\n")


def _v0_metrics(clock: Clock, rng: random.Random) -> str:
    """V0's stats line (vllm/engine/metrics.py), which has no origin prefix."""
    return (
        f"INFO {clock.stamp()} metrics.py:351] Avg prompt throughput: {rng.uniform(0, 900):.1f} tokens/s, "
        f"Avg generation throughput: {rng.uniform(0, 400):.1f} tokens/s, Running: {rng.randint(0, 30)} reqs, "
        f"Swapped: 0 reqs, Pending: {rng.randint(0, 9)} reqs, GPU KV cache usage: {rng.uniform(0, 99):.1f}%, "
        f"CPU KV cache usage: 0.0%."
    )


def metrics(path: Path, size: int, seed: int = 12) -> None:
    """Only metrics lines, one every 10 s (a log cut down to them by `grep throughput`)."""
    rng = random.Random(seed)
    clock = Clock()
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        while fh.tell() < size:
            batch = []
            for _ in range(5000):
                clock.tick(10)
                batch.append(metrics_line(clock, rng) if rng.random() < 0.8 else _v0_metrics(clock, rng))
            fh.write("\n".join(batch) + "\n")


def _kv_failure(clock: Clock) -> list[str]:
    e = _head(CORE, "ERROR", clock, "core.py:586")
    return [
        _head(CORE, "INFO", clock, "gpu_worker.py:298") + "Available KV cache memory: 3.11 GiB",
        e + "EngineCore failed to start.",
        e + "Traceback (most recent call last):",
        e + f'  File "{SITE}/vllm/v1/engine/core.py", line 577, in run_engine_core',
        e + "    engine_core = EngineCoreProc(*args, **kwargs)",
        e + f'  File "{SITE}/vllm/v1/engine/core.py", line 404, in __init__',
        e + "    super().__init__(vllm_config, executor_class, log_stats,",
        e + f'  File "{SITE}/vllm/v1/engine/core.py", line 91, in __init__',
        e + "    self._initialize_kv_caches(vllm_config)",
        e + f'  File "{SITE}/vllm/v1/core/kv_cache_utils.py", line 562, in check_enough_kv_cache_memory',
        e + "    raise ValueError(",
        e + "ValueError: To serve at least one request with the models's max seq len (32768), (8.00 GiB KV cache "
        "is needed, which is larger than the available KV cache memory (3.11 GiB). Based on the available "
        "memory, the estimated maximum model length is 12720. Try increasing `gpu_memory_utilization` or "
        "decreasing `max_model_len` when initializing the engine.",
        _head(API, "ERROR", clock, "core_client.py:564") + "RuntimeError: Engine core initialization failed. "
        "See root cause above. Failed core proc(s): {}",
    ]


def restarts(path: Path, size: int, attempts: int = 500) -> None:
    """A supervisor restarting a server that fails the same way every time."""
    clock = Clock()
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        for _ in range(attempts):
            lines = [
                x
                for x in startup_section(clock)
                if "KV cache" not in x
                and "Capturing" not in x
                and "startup" not in x
                and "Starting vLLM" not in x
                and "Route:" not in x
            ]
            cut = next(i for i, x in enumerate(lines) if "torch.compile takes" in x) + 1
            fh.write("\n".join(lines[:cut] + _kv_failure(clock)) + "\n")
            clock.tick(30)


def smi(path: Path, size: int, processes: int = 100_000, seed: int = 13) -> None:
    """Not enough free memory at startup, then `nvidia-smi --query-compute-apps` of many processes."""
    rng = random.Random(seed)
    clock = Clock()
    e = _head(CORE, "ERROR", clock, "core.py:718")
    lines = startup_section(clock)[:9] + [
        e + "EngineCore failed to start.",
        e + "Traceback (most recent call last):",
        e + f'  File "{SITE}/vllm/v1/engine/core.py", line 709, in run_engine_core',
        e + "    engine_core = EngineCoreProc(*args, **kwargs)",
        e + f'  File "{SITE}/vllm/v1/worker/gpu_worker.py", line 180, in init_device',
        e + "    raise ValueError(",
        e + "ValueError: Free memory on device (47.31/79.19 GiB) on startup is less than desired GPU memory "
        "utilization (0.9, 71.27 GiB). Decrease GPU memory utilization or reduce GPU memory used by other "
        "processes.",
        _head(API, "ERROR", clock, "core_client.py:564") + "RuntimeError: Engine core initialization failed. "
        "See root cause above. Failed core proc(s): {}",
        "$ nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv",
        "pid, process_name, used_memory [MiB]",
    ]
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        fh.write("\n".join(lines) + "\n")
        rows = [
            f"{10000 + i}, /usr/bin/python3 worker_{i % 97}.py, {rng.choice((0, 2, 4, 250, 512))} MiB"
            for i in range(processes)
        ]
        fh.write("\n".join(rows) + "\n")


def chains(path: Path, size: int, depth: int = 10_000) -> None:
    """A script that re-raises inside its handler, 10 000 times deep, ending in a CUDA OOM."""
    e = "(EngineCore_DP0 pid=311) ERROR 10-02 16:20:27 [core.py:718] "
    clock = Clock()
    out = startup_section(clock)[:9]
    for i in range(depth):
        out += [
            e + "Traceback (most recent call last):",
            e + f'  File "{SITE}/vllm/v1/worker/gpu_worker.py", line {100 + i % 50}, in retry_{i % 7}',
            e + "    self.model_runner.profile_run()",
            e + f"RuntimeError: attempt {i} failed",
            e,
            e + "During handling of the above exception, another exception occurred:",
            e,
        ]
    out += [
        e + "Traceback (most recent call last):",
        e + f'  File "{SITE}/vllm/v1/worker/gpu_worker.py", line 232, in determine_available_memory',
        e + "    self.model_runner.profile_run()",
        e + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.64 GiB. GPU 0 has a total "
        "capacity of 79.19 GiB of which 2.05 GiB is free. Of the allocated memory 73.42 GiB is allocated "
        "by PyTorch, and 2.31 GiB is reserved by PyTorch but unallocated.",
    ]
    path.write_text("\n".join(out) + "\n", encoding="utf-8")


WRITERS = {"longserve": longserve, "metrics": metrics, "restarts": restarts, "smi": smi, "chains": chains}
