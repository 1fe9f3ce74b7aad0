"""Events about memory: PyTorch and device OOMs, vLLM's memory accounting (budget, profile,
KV cache, blocks, weights) and its KV capacity errors. Quantities are ints in bytes."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from triage.model.events.base import Event


# --- PyTorch and device memory -------------------------------------------------------


class OomProcess(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)
    pid: int
    bytes: int


class TorchOom(Event):
    """PyTorch's caching-allocator OOM (CUDA or HIP), old or new format."""

    kind: Literal["torch_oom"] = "torch_oom"
    device: str = "CUDA"
    requested: int | None = None
    gpu_index: int | None = None
    total: int | None = None
    free: int | None = None
    processes: tuple[OomProcess, ...] = ()
    this_process: int | None = None
    allowed: int | None = None
    allocated: int | None = None  # allocated by PyTorch (new) / already allocated (old)
    private_pools: int | None = None
    reserved_unallocated: int | None = None
    reserved_total: int | None = None  # old format only
    wrapped: str | None = None  # "original error" when vLLM's load-OOM wrapper carries it


class CudaErrorOom(Event):
    """`CUDA error: out of memory` from a kernel launch or graph capture: no figures."""

    kind: Literal["cuda_error_oom"] = "cuda_error_oom"
    device: str = "CUDA"


class CpuAllocFailed(Event):
    """PyTorch's CPU allocator could not get host RAM."""

    kind: Literal["cpu_alloc_failed"] = "cpu_alloc_failed"
    requested: int | None = None


# --- vLLM memory accounting -----------------------------------------------------------


class MemoryBudget(Event):
    """`total_gpu_memory (X) x gpu_memory_utilization (U) = Y` (V0) or its 0.6.4 one-liner."""

    kind: Literal["memory_budget"] = "memory_budget"
    total: int
    utilization: float
    budget: int | None = None


class MemoryProfile(Event):
    """The split of the budget after profiling: weights, non-torch, activation peak, KV rest."""

    kind: Literal["memory_profile"] = "memory_profile"
    weights: int | None = None
    non_torch: int | None = None
    activation_peak: int | None = None
    kv_cache: int | None = None
    non_kv_total: int | None = None
    seconds: float | None = None


class KvCacheMemory(Event):
    """`Available KV cache memory: X GiB` (V1); negative when the budget is overdrawn."""

    kind: Literal["kv_cache_memory"] = "kv_cache_memory"
    bytes: int


class KvCachePinned(Event):
    """`Initial free memory F, reserved X memory for KV Cache as specified by kv_cache_memory_bytes config`."""

    kind: Literal["kv_cache_pinned"] = "kv_cache_pinned"
    free: int
    bytes: int


class KvCacheTokens(Event):
    """`GPU KV cache size: N tokens` (V1)."""

    kind: Literal["kv_cache_tokens"] = "kv_cache_tokens"
    tokens: int
    device: str = "GPU"


class MaxConcurrency(Event):
    """`Maximum concurrency for N tokens per request: X.XXx`."""

    kind: Literal["max_concurrency"] = "max_concurrency"
    tokens_per_request: int
    factor: float


class CacheBlocks(Event):
    """`# GPU blocks: N, # CPU blocks: M` (and the `cuda`/`CUDA`/`rocm` spellings)."""

    kind: Literal["cache_blocks"] = "cache_blocks"
    gpu_blocks: int
    cpu_blocks: int | None = None


class WeightsLoaded(Event):
    """`Loading model weights took X GB` / `Model loading took X GiB [memory ]and Y seconds`."""

    kind: Literal["weights_loaded"] = "weights_loaded"
    bytes: int
    seconds: float | None = None


class StartupFreeMemory(Event):
    """`Free memory on device [dev] (F/T GiB) on startup ...`: the error or the INFO advice."""

    kind: Literal["startup_free_memory"] = "startup_free_memory"
    free: int
    total: int
    utilization: float | None = None
    requested: int | None = None
    device: str | None = None
    is_error: bool = False


class ProfilingMismatch(Event):
    """`Error in memory profiling`: free memory changed under vLLM while it profiled."""

    kind: Literal["profiling_mismatch"] = "profiling_mismatch"
    initial: int | None = None
    current: int | None = None
    measure: str = "free"  # "free" or "used"


# --- KV capacity errors ---------------------------------------------------------------


class KvTooSmall(Event):
    """V0: the model's max seq len is larger than what the KV cache can store."""

    kind: Literal["kv_too_small"] = "kv_too_small"
    max_seq_len: int
    kv_tokens: int


class KvNeeded(Event):
    """V1: one request at max_model_len needs more KV cache than is available."""

    kind: Literal["kv_needed"] = "kv_needed"
    max_seq_len: int
    needed: int | None = None  # None when the line was cut before the figures
    available: int | None = None
    estimated_max_len: int | None = None


class NoCacheMemory(Event):
    """`No available memory for the cache blocks.`"""

    kind: Literal["no_cache_memory"] = "no_cache_memory"
