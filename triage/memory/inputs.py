"""What the memory model knows about one failed start, and the flags it may change.

`MemoryInputs` holds the figures a log gave (each a Quantity with provenance, or None when
the log does not give it) and the failing moment; `Config` is the set of flags the
model can answer about. Both are plain data: the arithmetic is in budget/kv/model, the
reading of a log in from_facts.
"""

from __future__ import annotations

from msgspec import Struct, field
from msgspec.structs import replace

from triage.memory.quantities import DEFAULT, Quantity

DEFAULT_UTIL = 0.9
DEFAULT_BLOCK = 16

# Where the failure happened, as the model needs it: which of vLLM's checks failed.
STARTUP = "startup_free_memory"  # V1 init_device: free < total x utilization
NO_POOL = "kv_pool_positive"  # "No available memory for the cache blocks"
KV_FIT = "kv_fits_max_model_len"  # one max_model_len request does not fit the pool
LOAD = "weights_load"  # OOM while loading the weights
PROFILE = "profile_run"  # OOM in the profiling forward pass (before the KV cache)
OUTSIDE = "outside_budget"  # OOM after the KV cache: graph capture, warm-up, sampler, serving
GRAPHS = "cuda_graph_capture"  # OUTSIDE, during graph capture (enforce-eager removes it)
KERNEL_WARMUP = "kernel_warmup"  # OUTSIDE, scaled by max_num_batched_tokens
SAMPLER_WARMUP = "sampler_warmup"  # OUTSIDE, scaled by max_num_seqs
HOST_SWAP = "host_swap_space"  # V0 "Too large swap space": swap x TP > 0.7 x host RAM
MAMBA = "mamba_blocks"  # hybrid models: max_num_seqs > the state blocks the pool holds (0.2x+)
HOST_RAM = "host_ram"  # the host ran out of RAM; swap space is one thing that holds it
KV_ALLOC = "kv_cache_allocation"  # OOM allocating the pool: the whole budget must fit what the process can hold
SERVING = "serving_batch"  # OUTSIDE, while serving: scaled by the batch (tokens, sequences)


class Config(Struct, frozen=True):
    """Flags of one start. None: what the failed start used (or vLLM's default)."""

    gpu_memory_utilization: float | None = None
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    kv_cache_dtype: str | None = None
    tensor_parallel_size: int | None = None
    enforce_eager: bool | None = None
    kv_cache_memory: int | None = None  # bytes (--kv-cache-memory, vLLM >= 0.11)
    swap_space: float | None = None  # GiB per GPU (--swap-space)
    cpu_offload_gb: float | None = None  # GiB of weights per GPU kept in CPU RAM (--cpu-offload-gb)

    def changed(self, **kw: object) -> Config:
        return replace(self, **kw)


class MemoryInputs(Struct, frozen=True):
    """Figures of one start, per device. Quantities carry provenance and rounding intervals.

    total/free: device memory and what was free at startup (the tightest device);
    weights, activation_peak, non_torch, non_kv: vLLM's profile (non_kv = their sum, printed
    by newer versions); pool: the KV cache memory vLLM computed; kv_tokens / kv_needed /
    gpu_blocks: what it printed about the pool; oom_requested / oom_free: the allocation that
    failed; cuda_graph: the graph memory it reported.
    """

    engine: str | None = None  # "v0" or "v1"
    vllm_version: str | None = None
    failure: str | None = None  # one of the constants above
    total: Quantity | None = None
    free: Quantity | None = None
    util: Quantity = field(default_factory=lambda: Quantity.exact(DEFAULT_UTIL, DEFAULT))
    weights: Quantity | None = None
    activation_peak: Quantity | None = None
    non_torch: Quantity | None = None
    non_kv: Quantity | None = None
    pool: Quantity | None = None
    kv_tokens: int | None = None
    kv_needed: Quantity | None = None
    gpu_blocks: int | None = None
    kv_estimate: int | None = None  # vLLM's printed estimated maximum model length
    block_size: int = DEFAULT_BLOCK
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    batch_given: bool | None = None  # set by the user (an argument dump has it); None: no dump to tell
    batch_follows_len: bool = False  # V0 without chunked prefill: max_num_batched_tokens = max(len, 2048)
    oom_requested: Quantity | None = None
    oom_free: Quantity | None = None
    oom_held: Quantity | None = None  # what this process held at the OOM ("this process has X")
    foreign: Quantity | None = None
    cuda_graph: Quantity | None = None
    graph_estimate: Quantity | None = None  # 0.21+: `Estimated CUDA graph memory`, taken out of the budget
    graph_advice: float | None = None  # vLLM's suggested utilization for the same KV pool as before 0.21
    mamba_blocks: int | None = None  # `exceeds available Mamba cache blocks (M)`: one per running sequence
    tp: int = 1
    pp: int = 1
    gpu_count: int | None = None  # GPUs the log shows on the node, when it shows them
    dtype: str | None = None
    gpu_name: str | None = None  # as nvidia-smi or vLLM names it: vLLM picks some defaults by it
    kv_cache_dtype: str | None = None
    kv_cache_memory: Quantity | None = None
    multimodal: bool = False
    mm_single_seq: bool = False  # V0 clamped the multimodal profile to one sequence
    swap_total: Quantity | None = None  # swap x GPUs per node, as V0 prints it
    cpu_total: Quantity | None = None
    sources: dict[str, str] = field(default_factory=dict)  # provenance of int settings

    def current(self) -> Config:
        """The failed start's own configuration."""
        return Config(
            gpu_memory_utilization=self.util.value,
            max_model_len=self.max_model_len,
            max_num_seqs=self.max_num_seqs,
            max_num_batched_tokens=self.max_num_batched_tokens,
            kv_cache_dtype=self.kv_cache_dtype or "auto",
            tensor_parallel_size=self.tp,
            enforce_eager=False,
            kv_cache_memory=int(self.kv_cache_memory.value) if self.kv_cache_memory else None,
        )

    @property
    def v1(self) -> bool:
        return self.engine != "v0"
