"""The grammar: each message family, in every wording the formats catalogue lists."""

import re

import pytest

from triage.ingest.lines import peel
from triage.parse import grammar, parse
from triage.parse.parse import parse_line
from triage.parse.vocabulary import prefilter
from triage.units import GiB, MiB


def events(text):
    return parse_line(peel(text, 1))


def one(text, kind):
    found = [e for e in events(text) if e.kind == kind]
    assert found, f"no {kind} in {[e.kind for e in events(text)]}"
    return found[0]


NEW_OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.96 GiB. GPU 0 has a total capacity of "
    "79.15 GiB of which 1.06 GiB is free. Process 2381 has 41.20 GiB memory in use. Including non-PyTorch "
    "memory, this process has 36.87 GiB memory in use. Of the allocated memory 34.10 GiB is allocated by "
    "PyTorch, with 512.00 MiB allocated in private pools (e.g., CUDA Graphs), and 1.44 GiB is reserved by "
    "PyTorch but unallocated. If reserved but unallocated memory is large try setting "
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory "
    "Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
)


def test_new_oom_format_all_clauses():
    oom = one(NEW_OOM, "torch_oom")
    assert oom.requested == round(1.96 * GiB)
    assert oom.total == round(79.15 * GiB) and oom.free == round(1.06 * GiB)
    assert [(p.pid, p.bytes) for p in oom.processes] == [(2381, round(41.20 * GiB))]
    assert oom.this_process == round(36.87 * GiB)
    assert oom.allocated == round(34.10 * GiB) and oom.private_pools == 512 * MiB
    assert oom.reserved_unallocated == round(1.44 * GiB)
    assert not oom.truncated


def test_oom_cut_short_keeps_what_was_read():
    oom = one(NEW_OOM[:330], "torch_oom")  # cut inside "Of the allocated memory ..."
    assert oom.total == round(79.15 * GiB) and oom.this_process == round(36.87 * GiB)
    assert oom.reserved_unallocated is None


def test_old_oom_format_and_typo():
    oom = one(
        "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 79.15 GiB total capacty; "
        "77.80 GiB already allocated; 11.81 MiB free; 78.33 GiB reserved in total by PyTorch) If reserved "
        "memory is >> allocated memory try setting max_split_size_mb",
        "torch_oom",
    )
    assert oom.requested == 20 * MiB and oom.free == round(11.81 * MiB) and oom.reserved_total == round(78.33 * GiB)


def test_capacty_typo_new_format_and_missing_gpu_index():
    oom = one(
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 MiB. GPU  has a total "
        "capacty of 10.75 GiB of which 1.62 MiB is free.",
        "torch_oom",
    )
    assert oom.total == round(10.75 * GiB) and oom.gpu_index is None


def test_hip_oom_has_no_process_clauses():
    oom = one(
        "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 1.75 GiB. GPU 0 has a total capacity "
        "of 191.98 GiB of which 912.00 MiB is free. Of the allocated memory 188.20 GiB is allocated by "
        "PyTorch, and 1.20 GiB is reserved by PyTorch but unallocated.",
        "torch_oom",
    )
    assert oom.device == "HIP" and oom.processes == ()


def test_oom_embedded_in_vllm_wrapper():
    evs = events(
        "ERROR 01-10 10:00:03 [gpu_model_runner.py:3605] Failed to load model - not enough GPU memory. "
        "Try lowering --gpu-memory-utilization. (original error: CUDA out of memory. Tried to allocate "
        "1.96 GiB. GPU 0 has a total capacity of 15.47 GiB of which 20.00 MiB is free.)"
    )
    assert {"load_model_oom", "torch_oom"} <= {e.kind for e in evs}


@pytest.mark.parametrize(
    "text,kind,field,value",
    [
        (
            "the current vLLM instance can use total_gpu_memory (79.15GiB) x gpu_memory_utilization (0.90) = 71.24GiB",
            "memory_budget",
            "utilization",
            0.9,
        ),
        (
            "model weights take 14.99GiB; non_torch_memory takes 0.87GiB; PyTorch activation peak memory takes 1.41GiB; "
            "the rest of the memory reserved for KV Cache is -0.85GiB.",
            "memory_profile",
            "kv_cache",
            -round(0.85 * GiB),
        ),
        ("Available KV cache memory: -0.72 GiB", "kv_cache_memory", "bytes", -round(0.72 * GiB)),
        ("GPU KV cache size: 444,688 tokens", "kv_cache_tokens", "tokens", 444688),
        (
            "GPU KV cache size: 29,056 tokens, Maximum concurrency for 2,048 tokens per request: 14.19x",
            "max_concurrency",
            "factor",
            14.19,
        ),
        ("# GPU blocks: 27296, # CPU blocks: 2048", "cache_blocks", "gpu_blocks", 27296),
        ("# cuda blocks: 0, # CPU blocks: 4681", "cache_blocks", "gpu_blocks", 0),
        ("Loading model weights took 14.9889 GB", "weights_loaded", "bytes", round(14.9889 * GiB)),
        ("Model loading took 14.99 GiB memory and 5.123456 seconds", "weights_loaded", "seconds", 5.123456),
        (
            "ValueError: Free memory on device cuda:0 (10.53/79.19 GiB) on startup is less than desired GPU memory "
            "utilization (0.9, 71.27 GiB). Decrease GPU memory utilization",
            "startup_free_memory",
            "free",
            round(10.53 * GiB),
        ),
        (
            "Free memory on device (78.6/79.19 GiB) on startup. Desired GPU memory utilization is (0.9, 71.27 GiB). "
            "Actual usage is 14.99 GiB for weight",
            "startup_free_memory",
            "is_error",
            False,
        ),
        (
            "ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be stored "
            "in KV cache (21456). Try increasing",
            "kv_too_small",
            "kv_tokens",
            21456,
        ),
        (
            "ValueError: To serve at least one request with the models's max seq len (131072), (16.00 GiB KV cache is "
            "needed, which is larger than the available KV cache memory (9.87 GiB). Based on the available memory, the "
            "estimated maximum model length is 80848. Try increasing",
            "kv_needed",
            "estimated_max_len",
            80848,
        ),
        (
            "ValueError: To serve at least one request with the models's max seq len (40960), (10.00 GB KV cache is "
            "needed, which is larger than the available KV cache memory (1.25 GB). Try increasing",
            "kv_needed",
            "available",
            round(1.25 * GiB),
        ),
        ("Graph capturing finished in 12 secs, took 0.85 GiB", "graph_capture_done", "bytes", round(0.85 * GiB)),
        # vLLM 0.21+ (0.25.0 and 0.33.0 wording, gpu_model_runner / gpu_worker)
        ("Estimated CUDA graph memory: 0.84 GiB total", "cuda_graph_estimate", "bytes", round(0.84 * GiB)),
        (
            "CUDA graph memory profiling is enabled (default since v0.21.0). The current --gpu-memory-utilization=0.9000 is "
            "equivalent to --gpu-memory-utilization=0.8895 without CUDA graph memory profiling. To maintain the same effective "
            "KV cache size as before, increase --gpu-memory-utilization to 0.9105. To disable, set "
            "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0.",
            "cuda_graph_advice",
            "suggested",
            0.9105,
        ),
        (
            "CUDA graph memory profiling is disabled (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0). Without it, CUDA graph "
            "memory is not accounted for during KV cache allocation, which may require lowering --gpu-memory-utilization to "
            "avoid OOM. Consider re-enabling it (the default as of v0.21.0) and increasing --gpu-memory-utilization from "
            "0.9000 to 0.9105.",
            "cuda_graph_advice",
            "profiled",
            False,
        ),
        (
            "CUDA graph pool memory: 1.02 GiB (actual), 0.84 GiB (estimated), difference: 0.18 GiB (17.6%).",
            "cuda_graph_pool",
            "actual",
            round(1.02 * GiB),
        ),
        (
            "rank 3 in world size 4 is assigned as DP rank 0, PP rank 0, TP rank 3, EP rank 3",
            "rank_assigned",
            "tp_rank",
            3,
        ),
        (
            "rank 0 in world size 1 is assigned as DP rank 0, PP rank 0, PCP rank 0, TP rank 0, EP rank N/A, EPLB rank N/A",
            "rank_assigned",
            "world",
            1,
        ),
        ("Starting to load model Qwen/Qwen3-32B...", "phase", "model", "Qwen/Qwen3-32B"),
        (
            "Chunked prefill is enabled with max_num_batched_tokens=8192.",
            "scheduler_batch",
            "max_num_batched_tokens",
            8192,
        ),
        (
            "RuntimeError: CUDA out of memory occurred when warming up sampler with 1024 dummy requests. Please try",
            "sampler_warmup_oom",
            "requests",
            1024,
        ),
        (
            "Possibly too large swap space. 32.00 GiB out of the 62.79 GiB total CPU memory is allocated for the swap space.",
            "swap_space",
            "swap",
            32 * GiB,
        ),
        (
            "Worker proc VllmWorker-0 died unexpectedly (exit code: -9), shutting down executor.",
            "process_died",
            "exit_code",
            -9,
        ),
        ("Worker VllmWorkerProcess pid 4711 died, exit code: -9", "process_died", "exit_code", -9),
        (
            '  File "/usr/lib/python3.10/site-packages/vllm/worker/model_runner.py", line 1395, in capture_model',
            "frame",
            "func",
            "capture_model",
        ),
        (
            "Initializing a V1 LLM engine (v0.8.5) with config: model='Qwen/Qwen2.5-7B-Instruct', dtype=torch.bfloat16, "
            "max_seq_len=32768, tensor_parallel_size=2, quantization=None, enforce_eager=False",
            "engine_config",
            "version",
            "0.8.5",
        ),
    ],
)
def test_families(text, kind, field, value):
    assert getattr(one(text, kind), field) == value


@pytest.mark.parametrize(
    "text,kind",
    [
        ("zmq.error.ZMQError: Address already in use (addr='tcp://127.0.0.1:5570')", "address_in_use"),
        ("OSError: [Errno 98] Address already in use", "address_in_use"),
        (
            "ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): address already in use",
            "address_in_use",
        ),
        ("AssertionError: 32 is not divisible by 3", "not_divisible"),
        (
            "ValueError: torch.bfloat16 is not supported for quantization method awq. Supported dtypes: [torch.float16]",
            "capability_too_low",
        ),
        ("RuntimeError: No CUDA GPUs are available", "gpu_not_visible"),
        (
            "torch.distributed.DistStoreError: Timed out after 601 seconds waiting for clients. 1/2 clients joined.",
            "nccl_error",
        ),
        ("RuntimeError: unable to write to file </torch_123_456_0>: No space left on device (28)", "shm_problem"),
        (
            "ValueError: The checkpoint you are trying to load has model type `qwen3` but Transformers does not "
            "recognize this architecture.",
            "architecture_unsupported",
        ),
        (
            "ValueError: Ernie4_5_MoeForCausalLM has no vLLM implementation and the Transformers implementation is not "
            "compatible with vLLM.",
            "architecture_unsupported",
        ),
        ("ValueError: World size (4) is larger than the number of available GPUs (2) in this node.", "not_enough_gpus"),
        (
            "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore_0': -7}",
            "process_died",
        ),
        ("vllm-1 exited with code 137", "killed"),
        (
            "Feb 23 16:58:10 host systemd[1648]: vllm.service: Scheduled restart job, restart counter is at 27.",
            "restart_count",
        ),
        ("Feb 23 16:58:05 host systemd[1648]: vllm.service: Main process exited, code=killed, status=9/KILL", "killed"),
        (
            "Feb 23 16:58:05 host systemd[1648]: vllm.service: Main process exited, code=exited, status=1/FAILURE",
            "process_died",
        ),
        (
            "Feb 23 16:58:05 host systemd[1]: vllm.service: A process of this unit has been killed by the OOM killer.",
            "host_memory_problem",
        ),
        ("huggingface_hub.errors.GatedRepoError: 401 Client Error.", "hub_auth_error"),
        ("Repository Not Found for url: https://huggingface.co/api/models/Qwen/Qwen2.5-7B-Instrcut.", "repo_not_found"),
    ],
)
def test_startup_failure_families(text, kind):
    one(text, kind)


def test_settings_from_non_default_args():
    cfg = one(
        "non-default args: {'model_tag': 'x/y', 'model': 'x/y', 'max_model_len': 8192, "
        "'gpu_memory_utilization': 0.85, 'tensor_parallel_size': 2, 'api_key': 'sk-secret'}",
        "engine_config",
    )
    assert cfg.settings == {
        "model": "x/y",
        "max_model_len": 8192,
        "gpu_memory_utilization": 0.85,
        "tensor_parallel_size": 2,
    }


def test_unknown_lines_are_not_events():
    assert events("INFO 01-01 00:00:00 [a.py:1] nothing to see here") == []


def test_every_event_line_passes_the_prefilter():
    for text, *_ in [(NEW_OOM,), ("# GPU blocks: 1, # CPU blocks: 2",), ("Available KV cache memory: 1.0 GiB",)]:
        assert prefilter(text)


def test_errors_are_located_as_with_lark_own_root_lexer():
    """`grammar._skip_root_lexer` spares the 185-terminal root lexer; errors keep their position."""
    from lark import Lark
    from lark.exceptions import LarkError

    from triage.parse import lark_runtime

    stock = Lark.open_from_package("triage.parse", "vllm_log.lark", parser="lalr", start=list(grammar.START_RULES))
    cases = [
        ("oom", "CUDA out of memory. Tried to allocate 2.00 GiB (GPU zero; 23.65 GiB total capacity)"),
        ("budget", "total_gpu_memory (79.19GiB) x gpu_memory_utilization (0.90) = zz"),
        ("kv_memory", "Available KV cache memory: lots"),
        ("blocks", "# GPU blocks: 12, # CPU blocks: x"),
        ("weights_v1", "Model loading took 16.4474 GiB and CUDA out of memory"),
        ("frame", 'File "/x.py", line'),
    ]
    for rule, text in cases:
        errors = []
        for lark in (stock, grammar.grammar()):
            try:
                lark.parse(text, start=rule)
                errors.append(None)
            except (LarkError, lark_runtime.LarkError) as exc:
                errors.append(parse._error_pos(exc, text))
        assert errors[0] is not None and errors[0] == errors[1], (rule, text, errors)
    assert isinstance(grammar.grammar().parser.lexer.root_lexer, grammar._NoRootLexer)


def test_phase_calls_in_the_grammar_and_in_parse_are_the_same_known_phase_functions():
    from triage.model.phases import FRAME_PHASES

    terminal = next(t for t in grammar.grammar().terminals if t.name == "PHASE_CALL")
    names = set(re.search(r"\(\?:((?:\w+\|)+\w+)\)\\\($", terminal.pattern.value).group(1).split("|"))
    assert names == set(grammar.PHASE_CALLS)
    assert all(name in FRAME_PHASES for name in names)


@pytest.mark.parametrize(
    "source, func",
    [
        ("    self.model_runner.capture_model()", "capture_model"),
        ("    kernel_warmup(self)", "kernel_warmup"),
        ("    hidden_states = self.model_runner._dummy_run(", "_dummy_run"),
        ("    return self.worker.determine_available_memory()", "determine_available_memory"),
        ('    output = self.collective_rpc("profile_run")', None),  # the RPC rule's (a frame of profile_run)
        ("    logits = fp8_fp4_paged_mqa_logits(", ""),
        ("    raise ValueError(", ""),
        ("INFO 09-12 08:14:03 [gpu_worker.py:1] we will call load_model(x) next", ""),
    ],
)
def test_a_source_line_that_calls_a_phase_function_is_a_frame(source, func):
    events = parse_line(peel(f"(VllmWorker TP0 pid=7) ERROR 09-12 08:14:03 [multiproc_executor.py:596] {source}", 1))
    frames = [e for e in events if e.kind == "frame"]
    if func is None:
        assert [(f.file, f.func) for f in frames] == [("<rpc>", "profile_run")]
    elif func:
        assert [(f.file, f.func) for f in frames] == [("<call>", func)]
    else:
        assert frames == []


def test_a_match_the_transformer_rejects_is_not_taken_for_a_line_cut_short():
    # lark wraps a transformer's ValueError in VisitError (a LarkError): it must not be
    # retried as a truncated line and come back as a cut hub error
    from triage.ingest.lines import peel

    line = "requests.exceptions.HTTPError: 401 Client Error: Unauthorized. Retry at http://intranet.local/login"
    events = parse.parse_line(peel(line, 1))
    assert [e.kind for e in events] == ["exception"]
    assert not any(e.truncated for e in events)
