"""Events about memory: PyTorch and device OOMs, vLLM's memory accounting (budget, profile,
KV cache, blocks, weights) and its KV capacity errors. Quantities are ints in bytes."""

from __future__ import annotations

from msgspec import Struct

from triage.model.events.base import Event, FactSink, Role, event

KV_ALLOCATION = "kv_cache_allocation"


# --- PyTorch and device memory -------------------------------------------------------


class OomProcess(Struct, frozen=True, kw_only=True):
    """One `Process P has X memory in use` clause of an OOM message."""

    pid: int
    bytes: int


@event
class TorchOom(Event, frozen=True, kw_only=True):
    """PyTorch's caching-allocator OOM (CUDA, HIP, XPU, MPS, NPU), old or new format, or another
    accelerator's allocator failing (Habana HPU, XLA TPU); a paste may keep only its head."""

    kind = "torch_oom"
    role = Role.CAUSE
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
    via: str | None = None  # "nvml_assert": torch's NVML assert that replaced the OOM message (no figures)


@event
class CudaErrorOom(Event, frozen=True, kw_only=True):
    """`CUDA error: out of memory` from a kernel launch or graph capture: no figures."""

    kind = "cuda_error_oom"
    role = Role.CAUSE
    device: str = "CUDA"


@event
class CpuAllocFailed(Event, frozen=True, kw_only=True):
    """PyTorch's CPU allocator could not get host RAM."""

    kind = "cpu_alloc_failed"
    role = Role.CAUSE
    ends_server = True
    requested: int | None = None


# --- vLLM memory accounting -----------------------------------------------------------


@event
class MemoryBudget(Event, frozen=True, kw_only=True):
    """`total_gpu_memory (X) x gpu_memory_utilization (U) = Y` (V0) or its 0.6.4 one-liner."""

    kind = "memory_budget"
    reached = KV_ALLOCATION
    facts = {"gpu_total_bytes": "total", "gpu_memory_utilization": "utilization", "budget_bytes": "budget"}
    total: int
    utilization: float
    budget: int | None = None


@event
class MemoryProfile(Event, frozen=True, kw_only=True):
    """The split of the budget after profiling: weights, non-torch, activation peak, KV rest."""

    kind = "memory_profile"
    reached = failed_in = KV_ALLOCATION
    facts = {
        "weights_bytes": "weights",
        "non_torch_bytes": "non_torch",
        "activation_peak_bytes": "activation_peak",
        "kv_cache_bytes": "kv_cache",
        "non_kv_bytes": "non_kv_total",
    }
    weights: int | None = None
    non_torch: int | None = None
    activation_peak: int | None = None
    kv_cache: int | None = None
    non_kv_total: int | None = None
    seconds: float | None = None

    def implies_failure(self) -> bool:
        return self.kv_cache is not None and self.kv_cache < 0


@event
class KvCacheMemory(Event, frozen=True, kw_only=True):
    """`Available KV cache memory: X GiB` (V1); negative when the budget is overdrawn."""

    kind = "kv_cache_memory"
    reached = failed_in = KV_ALLOCATION
    facts = {"kv_cache_bytes": "bytes"}
    bytes: int

    def implies_failure(self) -> bool:
        return self.bytes <= 0


@event
class KvCachePinned(Event, frozen=True, kw_only=True):
    """`Initial free memory F, reserved X memory for KV Cache as specified by kv_cache_memory_bytes config`."""

    kind = "kv_cache_pinned"
    facts = {"kv_cache_memory_bytes": "bytes", "kv_cache_bytes": "bytes", "initial_free_bytes": "free"}
    free: int
    bytes: int


@event
class KvCacheTokens(Event, frozen=True, kw_only=True):
    """`GPU KV cache size: N tokens` (V1)."""

    kind = "kv_cache_tokens"
    reached = KV_ALLOCATION
    facts = {"kv_cache_tokens": "tokens"}
    tokens: int
    device: str = "GPU"


@event
class MaxConcurrency(Event, frozen=True, kw_only=True):
    """`Maximum concurrency for N tokens per request: X.XXx`."""

    kind = "max_concurrency"
    failed_in = KV_ALLOCATION
    facts = {"max_model_len": "tokens_per_request", "max_concurrency": "factor"}
    tokens_per_request: int
    factor: float

    def implies_failure(self) -> bool:
        return self.factor < 1.0


@event
class CacheBlocks(Event, frozen=True, kw_only=True):
    """`# GPU blocks: N, # CPU blocks: M` (and the `cuda`/`CUDA`/`rocm` spellings)."""

    kind = "cache_blocks"
    reached = failed_in = KV_ALLOCATION
    facts = {"gpu_blocks": "gpu_blocks"}
    gpu_blocks: int
    cpu_blocks: int | None = None

    def implies_failure(self) -> bool:
        return self.gpu_blocks == 0


@event
class WeightsLoaded(Event, frozen=True, kw_only=True):
    """`Loading model weights took X GB` / `Model loading took X GiB [memory ]and Y seconds`."""

    kind = "weights_loaded"
    reached = "profiling"  # the weights are in: what follows is the profiling pass
    facts = {"weights_bytes": "bytes"}
    bytes: int
    seconds: float | None = None


@event
class StartupFreeMemory(Event, frozen=True, kw_only=True):
    """`Free memory on device [dev] (F/T GiB) on startup ...`: the error or the INFO advice."""

    kind = "startup_free_memory"
    facts = {"gpu_total_bytes": "total", "gpu_memory_utilization": "utilization", "budget_bytes": "requested"}
    free: int
    total: int
    utilization: float | None = None
    requested: int | None = None
    device: str | None = None
    is_error: bool = False

    def states_cause(self) -> bool:
        return self.is_error  # the INFO advice is context, the error a cause

    def add_facts(self, facts: FactSink) -> None:
        if "startup_free_bytes" not in facts or self.free < facts.value("startup_free_bytes"):
            facts.set("startup_free_bytes", self.free, self)  # with several GPUs the tightest one decides


@event
class ProfilingMismatch(Event, frozen=True, kw_only=True):
    """`Error in memory profiling`: free memory changed under vLLM while it profiled."""

    kind = "profiling_mismatch"
    role = Role.CAUSE
    initial: int | None = None
    current: int | None = None
    measure: str = "free"  # "free" or "used"


# --- KV capacity errors ---------------------------------------------------------------


@event
class KvTooSmall(Event, frozen=True, kw_only=True):
    """V0: the model's max seq len is larger than what the KV cache can store."""

    kind = "kv_too_small"
    role = Role.CAUSE
    failed_in = KV_ALLOCATION
    facts = {"max_model_len": "max_seq_len", "kv_cache_tokens": "kv_tokens"}
    max_seq_len: int
    kv_tokens: int | None = None  # None when a paste was cut before the figure


@event
class KvNeeded(Event, frozen=True, kw_only=True):
    """V1: one request at max_model_len needs more KV cache than is available."""

    kind = "kv_needed"
    role = Role.CAUSE
    failed_in = KV_ALLOCATION
    # the failing request's length is the configured one; the estimate is vLLM's own, on exact figures
    facts = {
        "max_model_len": "max_seq_len",
        "kv_cache_bytes": "available",
        "kv_needed_bytes": "needed",
        "kv_estimated_max_len": "estimated_max_len",
    }
    max_seq_len: int
    needed: int | None = None  # None when the line was cut before the figures
    available: int | None = None
    estimated_max_len: int | None = None


@event
class MambaBlocksShort(Event, frozen=True, kw_only=True):
    """`max_num_seqs (N) exceeds available Mamba cache blocks (M)`: a hybrid model keeps one
    state block per sequence, and the pool holds fewer than max_num_seqs."""

    kind = "mamba_blocks_short"
    role = Role.CAUSE
    failed_in = KV_ALLOCATION
    facts = {"mamba_blocks": "blocks", "max_num_seqs": "max_num_seqs"}  # the memory model's Mamba answers
    max_num_seqs: int
    blocks: int


@event
class NoCacheMemory(Event, frozen=True, kw_only=True):
    """`No available memory for the cache blocks.`"""

    kind = "no_cache_memory"
    role = Role.CAUSE
    failed_in = KV_ALLOCATION
