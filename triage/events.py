"""The vocabulary: typed facts that a log line can state.

Every event is a frozen pydantic model with a `kind` discriminator, the line number it
came from and the origin (process/rank) that printed it. Every quantity of memory is an
int in bytes; vLLM's "GB" labels are GiB values and are converted as such.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field


class Event(BaseModel):
    """Fields every event shares."""

    # defer_build: a model's validator is built when the first event of its kind is made, not
    # at import; a log states a dozen of the kinds, and start-up time counts for a CLI.
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
    line: int = 0
    origin: str = ""
    pid: int | None = None
    truncated: bool = False  # the line was cut short; what is here was read before the cut


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


# --- phases ---------------------------------------------------------------------------


class PhaseMark(Event):
    """A line that says which startup phase a process is in."""

    kind: Literal["phase"] = "phase"
    phase: str
    what: str = ""


class GraphCaptureDone(Event):
    """`Graph capturing finished in N secs[, took X GiB]`."""

    kind: Literal["graph_capture_done"] = "graph_capture_done"
    seconds: float | None = None
    bytes: int | None = None


class SamplerWarmupOom(Event):
    """`CUDA out of memory occurred when warming up sampler/pooler with N dummy requests`."""

    kind: Literal["sampler_warmup_oom"] = "sampler_warmup_oom"
    requests: int | None = None
    what: str = "sampler"


class LoadModelOom(Event):
    """`Failed to load model - not enough GPU memory.` (0.13 ..), wrapping the torch OOM."""

    kind: Literal["load_model_oom"] = "load_model_oom"


class EncoderCacheBudget(Event):
    """Multimodal encoder profiling: budget tokens and the dummy items used."""

    kind: Literal["encoder_cache_budget"] = "encoder_cache_budget"
    tokens: int | None = None
    items: int | None = None
    modality: str | None = None


class SwapSpace(Event):
    """`(Possibly) too large swap space. X GiB out of the Y GiB total CPU memory`."""

    kind: Literal["swap_space"] = "swap_space"
    swap: int
    cpu_total: int
    is_error: bool = False


class Ready(Event):
    """The server (or offline engine) reached a serving state."""

    kind: Literal["ready"] = "ready"
    what: str


# --- configuration --------------------------------------------------------------------


class EngineConfig(Event):
    """The version banner and any engine arguments it or an argument dump carries."""

    kind: Literal["engine_config"] = "engine_config"
    source: str = "banner"  # banner | args | version | env: a restart prints the same source again
    version: str | None = None
    engine: str | None = None
    settings: dict[str, str | int | float | bool | None] = Field(default_factory=dict)


# --- failures -------------------------------------------------------------------------


class TracebackStart(Event):
    kind: Literal["traceback_start"] = "traceback_start"


class Frame(Event):
    """`File "path", line N, in func`."""

    kind: Literal["frame"] = "frame"
    file: str
    lineno: int | None = None
    func: str = ""


class ChainNote(Event):
    """`The above exception was the direct cause ...` / `During handling ...`."""

    kind: Literal["chain"] = "chain"
    cause: bool = True


class ExceptionRaised(Event):
    """The last line of a traceback, or an error logged without one: `Type: message`."""

    kind: Literal["exception"] = "exception"
    type: str
    message: str = ""


class ProcessDied(Event):
    """A wrapper saying another process died or failed: `Worker proc X died unexpectedly`..."""

    kind: Literal["process_died"] = "process_died"
    name: str | None = None
    exit_code: int | None = None
    wrapper: str = ""
    method: str | None = None  # the worker method that raised, when the wrapper names it


class ErrorLine(Event):
    """A logged ERROR/CRITICAL line that no other event explains (kept as a last resort)."""

    kind: Literal["error_line"] = "error_line"
    message: str


# --- startup failures that are not about GPU memory -----------------------------------


class AddressInUse(Event):
    """`[Errno 98] ... address already in use` (uvicorn's bind, or vLLM's pre-bound socket)."""

    kind: Literal["address_in_use"] = "address_in_use"
    host: str | None = None
    port: int | None = None


class HubAuthError(Event):
    """Hugging Face Hub refused the download: 401/403, a gated or restricted repo."""

    kind: Literal["hub_auth_error"] = "hub_auth_error"
    status: int | None = None
    repo: str | None = None
    gated: bool = False
    token_rejected: bool = False  # "Invalid credentials in Authorization header": a bad or expired token


class RepoNotFound(Event):
    """`Repository Not Found for url` / 404: a typo, or a private repo seen without a token."""

    kind: Literal["repo_not_found"] = "repo_not_found"
    repo: str | None = None
    local: bool = False  # the id is a path (/, ., ~): a folder that is not there, not a Hub typo


class ArchitectureUnsupported(Event):
    """`Model architectures ['X'] are not supported for now` (or failed to be inspected)."""

    kind: Literal["architecture_unsupported"] = "architecture_unsupported"
    architectures: tuple[str, ...] = ()
    listed: bool = False  # the architecture is in the supported list the same message printed
    inspect_failed: bool = False


class NotDivisible(Event):
    """`Total number of attention heads (N) must be divisible by tensor parallel size (M).`"""

    kind: Literal["not_divisible"] = "not_divisible"
    what: str
    total: int
    size: int
    parallel: str = "tensor"


class NotEnoughGpus(Event):
    """More workers than GPUs: placement-group shortfalls, invalid device ordinals, world size."""

    kind: Literal["not_enough_gpus"] = "not_enough_gpus"
    required: int | None = None
    available: int | None = None
    detail: str = ""


class CapabilityTooLow(Event):
    """A dtype or quantization needs a newer GPU (compute capability)."""

    kind: Literal["capability_too_low"] = "capability_too_low"
    feature: str
    gpu: str | None = None
    capability: str | None = None
    required: str | None = None


class DriverProblem(Event):
    """Driver / CUDA runtime / kernel build mismatch."""

    kind: Literal["driver_problem"] = "driver_problem"
    problem: str
    found: str | None = None


class NcclError(Event):
    """NCCL failed: unhandled system/cuda error, internal error, a watchdog timeout."""

    kind: Literal["nccl_error"] = "nccl_error"
    problem: str
    timeout_ms: int | None = None
    op: str | None = None
    seq: int | None = None


class SharedMemoryProblem(Event):
    """/dev/shm too small: NCCL segment errors, no space left, a bus error."""

    kind: Literal["shm_problem"] = "shm_problem"
    problem: str
    path: str | None = None
    size: int | None = None


class HostMemoryProblem(Event):
    """Host RAM ran out: Ray's memory monitor, the OOM killer, a container limit."""

    kind: Literal["host_memory_problem"] = "host_memory_problem"
    problem: str
    used: int | None = None
    total: int | None = None
    threshold: float | None = None
    generic: bool = False  # Ray's list of *possible* causes for a dead worker, not a finding


class UsageError(Event):
    """The command line was refused (`error: unrecognized arguments`, bad values)."""

    kind: Literal["usage_error"] = "usage_error"
    message: str = ""


class RestartCount(Event):
    """A supervisor restarting the server again (systemd's restart counter)."""

    kind: Literal["restart_count"] = "restart_count"
    count: int


class SignalKilled(Event):
    """A bare `Killed` from a shell, or a fatal signal named by Python/Ray."""

    kind: Literal["killed"] = "killed"
    signal: str = "SIGKILL"


class ProcessCrash(Event):
    """A process ended by a fatal signal or a native abort with no Python error to say why
    (`Segmentation fault (core dumped)`, `Fatal Python error: Aborted`, an uncaught native exception, the
    HSA runtime's `Memory access fault by GPU`): the attempt failed even if no rule knows why."""

    kind: Literal["process_crash"] = "process_crash"
    signal: str  # SIGSEGV, SIGABRT, SIGILL, SIGFPE
    detail: str = ""


# --- evidence bundles: nvidia-smi, fuser, collect_env ------------------------------------


class GpuInfo(Event):
    """A GPU as nvidia-smi or collect_env lists it."""

    kind: Literal["gpu_info"] = "gpu_info"
    index: int | None = None
    name: str | None = None
    total: int | None = None
    used: int | None = None
    free: int | None = None


class GpuProcess(Event):
    """A process holding a GPU (nvidia-smi's process table, its CSV, or fuser -v /dev/nvidia*)."""

    kind: Literal["gpu_process"] = "gpu_process"
    pid: int
    name: str | None = None
    bytes: int | None = None
    gpu: int | None = None
    user: str | None = None


class SystemInfo(Event):
    """Driver, CUDA and torch versions (nvidia-smi header, collect_env)."""

    kind: Literal["system_info"] = "system_info"
    driver_version: str | None = None
    cuda_version: str | None = None
    torch_version: str | None = None
    torch_cuda_version: str | None = None
    cuda_runtime_version: str | None = None


AnyEvent = Annotated[
    Union[
        TorchOom, CudaErrorOom, CpuAllocFailed, MemoryBudget, MemoryProfile, KvCacheMemory, KvCachePinned,
        KvCacheTokens, MaxConcurrency, CacheBlocks, WeightsLoaded, StartupFreeMemory,
        ProfilingMismatch, KvTooSmall, KvNeeded, NoCacheMemory, PhaseMark, GraphCaptureDone,
        SamplerWarmupOom, LoadModelOom, EncoderCacheBudget, SwapSpace, Ready, EngineConfig,
        TracebackStart, Frame, ChainNote, ExceptionRaised, ProcessDied, ErrorLine, AddressInUse,
        HubAuthError, RepoNotFound, ArchitectureUnsupported, NotDivisible, NotEnoughGpus, CapabilityTooLow,
        DriverProblem, NcclError, SharedMemoryProblem, HostMemoryProblem, UsageError, SignalKilled,
        GpuInfo, GpuProcess, SystemInfo, RestartCount,
    ],
    Field(discriminator="kind"),
]
