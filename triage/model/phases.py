"""Which startup phase a traceback frame or a phase line belongs to.

vLLM's startup runs the same phases in every version: load the weights, profile a
forward pass, size and allocate the KV cache, capture CUDA graphs, warm up, serve. The
function names on a traceback say where a process was when it died.
"""

from __future__ import annotations

PHASES = ("starting", "loading_weights", "profiling", "kv_cache_allocation", "cuda_graph_capture", "ready")
ORDER = {p: i for i, p in enumerate(PHASES)}

FRAME_PHASES: dict[str, str] = {
    # loading weights
    "load_model": "loading_weights",
    "get_model": "loading_weights",
    "load_weights": "loading_weights",
    "create_weights": "loading_weights",
    "_initialize_model": "loading_weights",
    "initialize_model": "loading_weights",
    "weight_loader": "loading_weights",
    "_load_weights": "loading_weights",
    "load_weights_and_postprocess": "loading_weights",
    "_prepare_weights": "loading_weights",
    "_get_weights_iterator": "loading_weights",
    "init_model": "starting",
    # profiling and warm-up forward passes
    "profile_run": "profiling",
    "_dummy_run": "profiling",
    "_dummy_sampler_run": "profiling",
    "_dummy_pooler_run": "profiling",
    "determine_num_available_blocks": "profiling",
    "determine_available_memory": "profiling",
    "profile": "profiling",
    "kernel_warmup": "profiling",
    "warmup_kernels": "profiling",
    "flashinfer_autotune": "profiling",
    "_warmup_sampler": "profiling",
    "_profile_multimodal": "profiling",
    "get_dummy_data": "profiling",
    "_execute_dummy_batch": "profiling",
    # KV cache sizing and allocation
    "_initialize_kv_caches": "kv_cache_allocation",
    "initialize_cache": "kv_cache_allocation",
    "_allocate_kv_cache": "kv_cache_allocation",
    "initialize_kv_cache": "kv_cache_allocation",
    "get_kv_cache_config": "kv_cache_allocation",
    "get_kv_cache_configs": "kv_cache_allocation",
    "check_enough_kv_cache_memory": "kv_cache_allocation",
    "_check_enough_kv_cache_memory": "kv_cache_allocation",
    "raise_if_cache_size_invalid": "kv_cache_allocation",
    "_init_cache": "kv_cache_allocation",
    "init_cache_engine": "kv_cache_allocation",
    "initialize_kv_cache_tensors": "kv_cache_allocation",
    "_allocate_kv_cache_tensors": "kv_cache_allocation",
    "_reshape_kv_cache_tensors": "kv_cache_allocation",
    "_init_cache_engine": "kv_cache_allocation",
    # CUDA graph capture
    "capture_model": "cuda_graph_capture",
    "capture": "cuda_graph_capture",
    "capture_end": "cuda_graph_capture",
    "_capture_cudagraphs": "cuda_graph_capture",
    "capture_graph": "cuda_graph_capture",
    "_warm_up_model": "cuda_graph_capture",
    "capture_graphs": "cuda_graph_capture",
    "warm_up_model": "cuda_graph_capture",  # V0: the worker's warm-up is the graph capture
    # process and device start-up
    "init_device": "starting",
    "init_worker_distributed_environment": "starting",
    "_check_if_gpu_supports_dtype": "starting",
    "init_distributed_environment": "starting",
    "ensure_model_parallel_initialized": "starting",
    "create_engine_config": "starting",
    "verify_with_parallel_config": "starting",
    "run_server": "starting",
}
# Files whose frames mean CUDA graph capture whatever the function is called.
# (A CUDA-graph *wrapper* frame, vllm/compilation/cuda_graph.py, is on every forward pass,
# profiling runs included, so it does not count; torch's own graphs.py only runs to capture.)
# torch/utils/_device.py creates tensors under `with torch.device(...)`, which vLLM uses
# while it builds the model before loading weights into it.
# vLLM's V1 sampler runs before ready only in its warm-up (the dummy sampler run, whose caller
# frame a pasted tail often lacks); once serving, a signal is in phase "ready" whatever its frames.
FILE_PHASES = (
    ("torch/cuda/graphs.py", "cuda_graph_capture"),
    ("cudagraph_utils.py", "cuda_graph_capture"),
    ("torch/utils/_device.py", "loading_weights"),
    ("vllm/v1/sample/sampler.py", "profiling"),
)
# A model class's constructor runs only while vLLM builds the model to load weights into
# (vLLM 0.1-0.2 printed no "Loading weights" line: the frames are all that places it).
INIT_PHASES = (("/vllm/model_executor/models/", "loading_weights"),)


# When frames name several phases, the one that frames the others wins: graph capture runs
# dummy forward passes, and KV-cache sizing runs the profiling pass.
PRIORITY = ("cuda_graph_capture", "loading_weights", "profiling", "kv_cache_allocation", "starting")


def phase_of_frames(frames: list[tuple[str, str]]) -> str | None:
    """The phase the frames (file, func; outermost first) show the process was in."""
    named = set()
    for file, func in frames:
        for marker, phase in FILE_PHASES:
            if file.endswith(marker) and func != "__init__":
                named.add(phase)
        for marker, phase in INIT_PHASES:
            if marker in file and func == "__init__":
                named.add(phase)
        if func in FRAME_PHASES:
            named.add(FRAME_PHASES[func])
    return next((p for p in PRIORITY if p in named), None)


def later(a: str | None, b: str | None) -> str | None:
    """The further of two phases (None counts as not started)."""
    if a is None:
        return b
    if b is None:
        return a
    return a if ORDER[a] >= ORDER[b] else b
