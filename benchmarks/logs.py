"""Generated vLLM logs for the benchmark: startups, hours of serving, a failure at the end.

Each generator is seeded, so a log of a given name and size is the same on every machine.
The serving logs follow vLLM 0.10's V1 output (formats in ../shared/formats.md): the API
server's and the engine core's prefixes, the request logger, uvicorn's access lines and the
engine's metrics line every 10 s.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

API = "(APIServer pid=1) "
CORE = "(EngineCore_DP0 pid=311) "
SITE = "/usr/local/lib/python3.12/dist-packages"


class Clock:
    """A log clock: vLLM's `MM-DD HH:MM:SS`, advanced in seconds (`t` never wraps: serving
    code schedules the next metrics line by it)."""

    def __init__(self) -> None:
        self.t = 16 * 3600 + 20 * 60 + 11

    def tick(self, seconds: float) -> None:
        self.t += seconds

    def stamp(self) -> str:
        t = int(self.t)
        day = 2 + t // 86400
        return f"10-{day:02d} {t // 3600 % 24:02d}:{t // 60 % 60:02d}:{t % 60:02d}"


def _head(prefix: str, level: str, clock: Clock, source: str) -> str:
    return f"{prefix}{level} {clock.stamp()} [{source}] "


def startup_section(clock: Clock, tp: int = 1) -> list[str]:
    """A V1 `vllm serve` startup that reaches readiness (Qwen2.5-7B on an H100)."""
    h = lambda p, lv, src: _head(p, lv, clock, src)  # noqa: E731
    lines = [
        f"INFO {clock.stamp()} [__init__.py:216] Automatically detected platform cuda.",
        h(API, "INFO", "api_server.py:1896") + "vLLM API server version 0.10.2",
        h(API, "INFO", "utils.py:328") + "non-default args: {'model_tag': 'Qwen/Qwen2.5-7B-Instruct', "
        "'model': 'Qwen/Qwen2.5-7B-Instruct', 'max_model_len': 32768, 'gpu_memory_utilization': 0.9, "
        f"'tensor_parallel_size': {tp}, 'enable_log_requests': True}}",
        h(API, "INFO", "__init__.py:742") + "Resolved architecture: Qwen2ForCausalLM",
        h(API, "INFO", "__init__.py:1815") + "Using max model len 32768",
        h(API, "INFO", "scheduler.py:222") + "Chunked prefill is enabled with max_num_batched_tokens=8192.",
        h(CORE, "INFO", "core.py:76") + "Initializing a V1 LLM engine (v0.10.2) with config: "
        "model='Qwen/Qwen2.5-7B-Instruct', speculative_config=None, tokenizer='Qwen/Qwen2.5-7B-Instruct', "
        "skip_tokenizer_init=False, tokenizer_mode=auto, revision=None, trust_remote_code=False, "
        "dtype=torch.bfloat16, max_seq_len=32768, download_dir=None, load_format=auto, "
        f"tensor_parallel_size={tp}, pipeline_parallel_size=1, data_parallel_size=1, "
        "disable_custom_all_reduce=False, quantization=None, enforce_eager=False, kv_cache_dtype=auto, "
        "device_config=cuda, seed=0, served_model_name=Qwen/Qwen2.5-7B-Instruct, enable_prefix_caching=True",
        h(CORE, "INFO", "parallel_state.py:1165") + "rank 0 in world size 1 is assigned as DP rank 0, PP rank 0, "
        "TP rank 0, EP rank 0",
        h(CORE, "INFO", "gpu_model_runner.py:2338") + "Starting to load model Qwen/Qwen2.5-7B-Instruct...",
        h(CORE, "INFO", "cuda.py:362") + "Using Flash Attention backend on V1 engine.",
        f"{CORE}Loading safetensors checkpoint shards:   0% Completed | 0/4 [00:00<?, ?it/s]",
        f"{CORE}Loading safetensors checkpoint shards: 100% Completed | 4/4 [00:03<00:00,  1.21it/s]",
        h(CORE, "INFO", "default_loader.py:268") + "Loading weights took 3.41 seconds",
        h(CORE, "INFO", "gpu_model_runner.py:2392") + "Model loading took 14.2474 GiB and 4.102 seconds",
        h(CORE, "INFO", "backends.py:550") + "Dynamo bytecode transform time: 6.12 s",
        h(CORE, "INFO", "monitor.py:34") + "torch.compile takes 24.41 s in total",
        h(CORE, "INFO", "gpu_worker.py:298") + "Available KV cache memory: 53.11 GiB",
        h(CORE, "INFO", "kv_cache_utils.py:864") + "GPU KV cache size: 994,512 tokens",
        h(CORE, "INFO", "kv_cache_utils.py:868") + "Maximum concurrency for 32,768 tokens per request: 30.35x",
        f"{CORE}Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|██████████| 67/67 "
        "[00:05<00:00, 12.87it/s]",
        h(CORE, "INFO", "gpu_model_runner.py:3118") + "Graph capturing finished in 6 secs, took 0.61 GiB",
        h(CORE, "INFO", "core.py:218") + "init engine (profile, create kv cache, warmup model) took 41.07 seconds",
        h(API, "INFO", "loggers.py:142") + "Engine 000: vllm cache_config_info with initialization after "
        "num_gpu_blocks is: 62157",
        h(API, "INFO", "api_server.py:1971") + "Starting vLLM API server 0 on http://0.0.0.0:8000",
        h(API, "INFO", "launcher.py:44") + "Route: /v1/chat/completions, Methods: POST",
        f"{API}INFO:     Started server process [1]",
        f"{API}INFO:     Waiting for application startup.",
        f"{API}INFO:     Application startup complete.",
    ]
    return lines


_PROMPTS = [
    "Summarize the following meeting notes in three bullet points: the team agreed to ship on Friday",
    "Translate to French: The weather is lovely today and we should go for a walk by the river.",
    "Write a haiku about autumn leaves falling on a quiet pond.",
    "What is the capital of Australia, and why was it chosen over Sydney and Melbourne?",
    "Explain the difference between a process and a thread, with an example of each.",
    "Classify the sentiment of this review: the battery life is great but the screen is dim.",
    "Draft a polite reply declining the invitation to speak at the conference next month.",
    "List five vegetarian dinner ideas that take less than thirty minutes to cook.",
]
# Some users paste errors into their prompts: these lines hold anchor words but state nothing.
_CODE_PROMPTS = [
    "Why does my code raise ValueError: invalid literal for int() with base 10? Here is the Traceback",
    "Refactor this function to avoid the TimeoutError: def fetch(url): return requests.get(url)",
    "My training loop prints CUDA out of memory. Tried to allocate 2.00 GiB - what should I change?",
]
_ROUTES = ["/v1/chat/completions"] * 8 + ["/v1/completions", "/health", "/metrics", "/v1/models"]


def _request_id(rng: random.Random) -> str:
    return f"chatcmpl-{rng.getrandbits(128):032x}"


def metrics_line(clock: Clock, rng: random.Random) -> str:
    """The V1 engine's periodic stats line (vllm/v1/metrics/loggers.py)."""
    return (
        _head(API, "INFO", clock, "loggers.py:123") + "Engine 000: Avg prompt throughput: "
        f"{rng.uniform(100, 2000):.1f} tokens/s, Avg generation throughput: {rng.uniform(50, 900):.1f} "
        f"tokens/s, Running: {rng.randint(0, 40)} reqs, Waiting: {rng.randint(0, 5)} reqs, GPU KV cache "
        f"usage: {rng.uniform(0, 90):.1f}%, Prefix cache hit rate: {rng.uniform(0, 60):.1f}%"
    )


def serving_lines(
    clock: Clock,
    rng: random.Random,
    request_logging: bool,
    rate: float = 25.0,
    prompts: tuple[list[str], float] | None = None,
) -> Iterator[str]:
    """Endless serving traffic: requests, access lines, a metrics line every 10 s, rare errors.

    `rate` is requests a second; `prompts` the prompts that quote errors and the share of
    requests that send one (default: a few short ones, 3%)."""
    quoting, share = prompts or (_CODE_PROMPTS, 0.03)
    next_metrics = clock.t + 10
    next_error = clock.t + rng.uniform(300, 900)
    while True:
        clock.tick(rng.expovariate(rate))
        if clock.t >= next_metrics:
            next_metrics += 10
            yield metrics_line(clock, rng)
        if clock.t >= next_error:
            next_error = clock.t + rng.uniform(300, 900)
            yield from _request_error(clock, rng)
            continue
        route = rng.choice(_ROUTES)
        ip = f"10.0.{rng.randint(0, 9)}.{rng.randint(2, 250)}:{rng.randint(32768, 60999)}"
        if request_logging and route.startswith("/v1/c"):
            rid = _request_id(rng)
            prompt = rng.choice(quoting if rng.random() < share else _PROMPTS)
            yield (
                _head(API, "INFO", clock, "logger.py:41") + f"Received request {rid}: prompt: "
                f"'<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n<|im_start|>user\\n{prompt}"
                "<|im_end|>\\n<|im_start|>assistant\\n', params: SamplingParams(n=1, presence_penalty=0.0, "
                "frequency_penalty=0.0, repetition_penalty=1.05, temperature=0.7, top_p=0.8, top_k=20, "
                f"min_p=0.0, seed=None, stop=[], stop_token_ids=[], bad_words=[], max_tokens={rng.randint(16, 2048)}, "
                "min_tokens=0, logprobs=None, prompt_logprobs=None, skip_special_tokens=True, "
                "spaces_between_special_tokens=True, truncate_prompt_tokens=None, guided_decoding=None, "
                "extra_args=None), prompt_token_ids: None, prompt_embeds shape: None, lora_request: None."
            )
            yield _head(API, "INFO", clock, "async_llm.py:321") + f"Added request {rid}."
        method = "GET" if route in ("/health", "/metrics", "/v1/models") else "POST"
        yield f'{API}INFO:     {ip} - "{method} {route} HTTP/1.1" 200 OK'


def _request_error(clock: Clock, rng: random.Random) -> Iterator[str]:
    """A request-level error the server survives: a prompt longer than max_model_len."""
    h = _head(API, "ERROR", clock, "serving_chat.py:222")
    frames = [
        ("vllm/entrypoints/openai/serving_chat.py", 205, "create_chat_completion", ") = await self._preprocess_chat("),
        (
            "vllm/entrypoints/openai/serving_engine.py",
            837,
            "_preprocess_chat",
            "prompt_inputs = await self._tokenize_prompt_input_async(",
        ),
        ("vllm/entrypoints/openai/serving_engine.py", 569, "_validate_input", "raise ValueError("),
    ]
    yield h + "Error in preprocessing prompt inputs"
    yield h + "Traceback (most recent call last):"
    for path, no, func, src in frames:
        yield h + f'  File "{SITE}/{path}", line {no}, in {func}'
        yield h + f"    {src}"
    asked = rng.randint(32769, 90000)
    yield (
        h + f"ValueError: This model's maximum context length is 32768 tokens. However, you requested {asked} "
        f"tokens ({asked - 4096} in the messages, 4096 in the completion). Please reduce the length of the "
        "messages or completion."
    )
    yield f'{API}INFO:     10.0.3.88:{rng.randint(32768, 60999)} - "POST /v1/chat/completions HTTP/1.1" 400 Bad Request'


def engine_death(clock: Clock) -> list[str]:
    """The engine dies mid-serving of a CUDA OOM; the API server reports the dead engine."""
    e = _head(CORE, "ERROR", clock, "core.py:710")
    a = _head(API, "ERROR", clock, "async_llm.py:480")
    frames = [
        ("vllm/v1/engine/core.py", 701, "run_engine_core", "engine_core.run_busy_loop()"),
        ("vllm/v1/engine/core.py", 728, "run_busy_loop", "self._process_engine_step()"),
        ("vllm/v1/engine/core.py", 754, "_process_engine_step", "outputs, model_executed = self.step_fn()"),
        ("vllm/v1/engine/core.py", 284, "step", "model_output = self.execute_model_with_error_logging("),
        ("vllm/v1/executor/abstract.py", 103, "execute_model", 'output = self.collective_rpc("execute_model",'),
        ("vllm/v1/worker/gpu_worker.py", 447, "execute_model", "output = self.model_runner.execute_model("),
        ("vllm/v1/worker/gpu_model_runner.py", 2039, "execute_model", "hidden_states = self.model("),
        ("vllm/model_executor/layers/logits_processor.py", 61, "forward", "logits = self._get_logits("),
    ]
    out = [e + "EngineCore encountered a fatal error.", e + "Traceback (most recent call last):"]
    for path, no, func, src in frames:
        out += [e + f'  File "{SITE}/{path}", line {no}, in {func}', e + f"    {src}"]
    out.append(
        e + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.64 GiB. GPU 0 has a total "
        "capacity of 79.19 GiB of which 2.05 GiB is free. Including non-PyTorch memory, this process has "
        "77.12 GiB memory in use. Of the allocated memory 73.42 GiB is allocated by PyTorch, and 2.31 GiB is "
        "reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for "
        "Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
    )
    out += [
        a + "AsyncLLM output_handler failed.",
        a + "Traceback (most recent call last):",
        a + f'  File "{SITE}/vllm/v1/engine/async_llm.py", line 439, in output_handler',
        a + "    outputs = await engine_core.get_output_async()",
        a + f'  File "{SITE}/vllm/v1/engine/core_client.py", line 846, in get_output_async',
        a + "    raise self._format_exception(outputs) from None",
        a + "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace "
        "(above) for the root cause.",
        f"{API}ERROR {clock.stamp()} [core_client.py:564] Engine core proc EngineCore_DP0 died unexpectedly, "
        "shutting down client.",
        f'{API}INFO:     10.0.3.17:51234 - "POST /v1/chat/completions HTTP/1.1" 500 Internal Server Error',
        f"{API}INFO:     Shutting down",
        f"{API}INFO:     Finished server process [1]",
    ]
    return out


def startup_failure_lines(clock: Clock, rng: random.Random, size: int) -> Iterator[str]:
    """A big TP=8 startup: NCCL_DEBUG=INFO chatter from 8 workers, then a KV-cache failure."""
    yield f"INFO {clock.stamp()} [__init__.py:216] Automatically detected platform cuda."
    yield _head(API, "INFO", clock, "api_server.py:1896") + "vLLM API server version 0.10.2"
    yield (
        _head(API, "INFO", clock, "utils.py:328") + "non-default args: {'model_tag': 'meta-llama/Llama-3.1-70B-"
        "Instruct', 'model': 'meta-llama/Llama-3.1-70B-Instruct', 'max_model_len': 131072, 'tensor_parallel_size': 8}"
    )
    yield (
        _head(CORE, "INFO", clock, "core.py:76") + "Initializing a V1 LLM engine (v0.10.2) with config: "
        "model='meta-llama/Llama-3.1-70B-Instruct', tokenizer='meta-llama/Llama-3.1-70B-Instruct', "
        "dtype=torch.bfloat16, max_seq_len=131072, tensor_parallel_size=8, enforce_eager=False"
    )
    written = 0
    while written < size - 20_000:
        rank = rng.randrange(8)
        w = f"(VllmWorker TP{rank} pid={4100 + rank}) "
        choice = rng.random()
        if choice < 0.7:
            line = (
                f"{w}node-a100-{rank // 8}:{4100 + rank}:{4200 + rank} [{rank}] NCCL INFO Channel "
                f"{rng.randrange(24):02d}/24 : 0 1 2 3 4 5 6 7 via P2P/IPC/read"
            )
        elif choice < 0.85:
            line = _head(w, "INFO", clock, "custom_all_reduce.py:136") + "Registering 4515 cuda graph addresses"
        elif choice < 0.95:
            line = (
                _head(w, "WARNING", clock, "fused_moe.py:682") + "Using default MoE config. Performance might "
                "be sub-optimal! Config file not found at /usr/local/lib/python3.12/dist-packages/vllm/"
                "model_executor/layers/fused_moe/configs/E=8,N=3584,device_name=NVIDIA_A100-SXM4-80GB.json"
            )
        else:
            line = (
                f"{w}Loading safetensors checkpoint shards:  {rng.randrange(100):2d}% Completed | "
                f"{rng.randrange(30)}/30 [00:{rng.randrange(60):02d}<00:{rng.randrange(60):02d},  1.02it/s]"
            )
        clock.tick(0.01)
        written += len(line) + 1
        yield line
    w = "(VllmWorker TP0 pid=4100) "
    yield _head(w, "INFO", clock, "gpu_model_runner.py:2392") + "Model loading took 16.4474 GiB and 61.102 seconds"
    yield _head(w, "INFO", clock, "gpu_worker.py:298") + "Available KV cache memory: 3.11 GiB"
    e = _head(CORE, "ERROR", clock, "core.py:586")
    yield e + "EngineCore failed to start."
    yield e + "Traceback (most recent call last):"
    yield e + f'  File "{SITE}/vllm/v1/engine/core.py", line 577, in run_engine_core'
    yield e + f'  File "{SITE}/vllm/v1/core/kv_cache_utils.py", line 562, in check_enough_kv_cache_memory'
    yield (
        e + "ValueError: To serve at least one request with the models's max seq len (131072), (5.00 GiB KV "
        "cache is needed, which is larger than the available KV cache memory (3.11 GiB). Based on the available "
        "memory, the estimated maximum model length is 81520. Try increasing `gpu_memory_utilization` or "
        "decreasing `max_model_len` when initializing the engine."
    )
    yield (
        _head(API, "ERROR", clock, "core_client.py:564") + "RuntimeError: Engine core initialization failed. "
        "See root cause above. Failed core proc(s): {}"
    )


def write_log(name: str, path: Path, size: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    clock = Clock()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        if name.startswith("startup"):
            fh.write("\n".join(startup_failure_lines(clock, rng, size)) + "\n")
            return
        fh.write("\n".join(startup_section(clock)) + "\n")
        tail = engine_death(Clock())
        budget = size - fh.tell() - sum(len(x) + 1 for x in tail) - 200
        write_until(fh, serving_lines(clock, rng, request_logging=not name.startswith("access")), budget)
        fh.write("\n".join(engine_death(clock)) + "\n")


def write_until(fh, lines, budget: int) -> None:
    """Write lines in batches until about `budget` characters are written."""
    batch: list[str] = []
    written = 0
    for line in lines:
        batch.append(line)
        written += len(line) + 1
        if len(batch) >= 20000:
            fh.write("\n".join(batch) + "\n")
            batch.clear()
        if written >= budget:
            break
    fh.write("\n".join(batch) + "\n")


def write_short(path: Path) -> None:
    """The serving logs without their serving section: startup, then the failure."""
    clock = Clock()
    lines = startup_section(clock)
    clock.tick(3 * 3600)
    path.write_text("\n".join(lines + engine_death(clock)) + "\n", encoding="utf-8")
