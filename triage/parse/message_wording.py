"""What a message's words say it is about: the wording half of `message_causes.py`.

vLLM's (and its layers') own phrasing, read off their source: a KV cache too small, a compute
capability, a parallel size, a missing package, a flag to change. `message_causes.cause_of`
tries these after the hand-written overrides and the exception class, and before the place a
message is raised; the catalogue's build (scripts/catalogue/) and the run-time reading of a
message the catalogue does not hold use the same tables.
"""

from __future__ import annotations

import re

_I = re.IGNORECASE
# errors.md 6.1: `module X has no attribute Y` of a lazy module (torch's, transformers', vLLM's
# own `vllm.envs` and config registry): a caller built against another release
MODULE_ATTRIBUTE = r"^module (\{[^}]+\}|'\w+') has no attribute '?\{"
# (cause, class regex or None, message regex): the first whose class and message match.
WORDING: list[tuple[str, str | None, re.Pattern]] = [
    (
        "dependency_missing",
        None,
        re.compile(
            r"pip install|please install|is not installed|not installed|No module named|"
            r"requires? (the )?[`'\"]?[\w.-]+[`'\"]? (package|library) |to be installed|install(ed)? (it|them) |"
            r"CUDA_HOME|(could not|failed to|unable to) find .*(compiler|executable)|"
            r"(not found|missing)\b.{0,120}\bto install\b|"
            r"\b(nvcc|ffmpeg|numactl|ninja)\b.{0,40}(not found|not installed|not available|install|is required)",
            _I,
        ),
    ),
    # (a kernel that refuses an old GPU by raising ImportError names the GPU, not a package)
    ("dependency_missing", r"ImportError", re.compile(r"^(?!.*compute capability)")),
    # errors.md 6.1: a lazy module (torch's, transformers') lacks a name its caller expects: another release
    ("package_version_mismatch", r"AttributeError", re.compile(MODULE_ATTRIBUTE)),
    ("gpu_runtime_fault", None, re.compile(r"illegal memory access|device-side assert", _I)),
    # taxonomy: "CUDA out of memory occurred when warming up sampler" is warmup_oom
    ("warmup_oom", None, re.compile(r"out of memory occurred when warming up", _I)),
    # taxonomy v3: NCCL / process-group init timeouts stay nccl_failure (a bare start-up
    # barrier's timeout stays startup_timeout: the ranks did not all arrive in time)
    (
        "nccl_failure",
        None,
        re.compile(
            r"(process group|rendezvous|nccl).{0,80}(timed out|timeout)|"
            r"(timed out|timeout).{0,80}(process group|rendezvous|nccl)",
            _I,
        ),
    ),
    ("startup_timeout", None, re.compile(r"timed out|timeout|did not receive response|deadline", _I)),
    ("port_in_use", None, re.compile(r"address already in use|port \{?\w*\}? is (already )?in use", _I)),
    ("disk_space_exhausted", None, re.compile(r"no space left on device|disk space", _I)),
    (
        "cache_dir_not_writable",
        None,
        re.compile(r"permission denied|not writable|read-only file|PermissionError at|cache directory permissions", _I),
    ),
    ("shared_memory_exhausted", None, re.compile(r"/dev/shm", _I)),
    ("hf_auth_required", None, re.compile(r"gated repo|HF_TOKEN|access token|authenticat|\b40[13]\b|unauthori", _I)),
    (
        "hub_unreachable",
        None,
        re.compile(
            r"couldn't connect|could not connect|offline mode|HF_HUB_OFFLINE|TRANSFORMERS_OFFLINE|"
            r"outgoing traffic has been disabled|cannot find the requested files in the local cache|"
            r"connection (error|refused|reset)",
            _I,
        ),
    ),
    (
        "model_not_found",
        None,
        re.compile(
            r"repository not found|not a valid model identifier|invalid repository id|not a local folder|"
            r"repo id must|does not appear to have|can't load the configuration|"
            r"(model|path|directory|folder) .*does not exist|no such (model|file or directory)|unrecognized model in|"
            r"can't load tokenizer for|no supported config format found|no config file found|"
            r"no adapter found",  # a --lora-modules path or hub id that does not resolve
            _I,
        ),
    ),
    (
        "kv_cache_insufficient",
        None,
        re.compile(
            r"(kv[ _]cache|cache blocks|max seq len|num_gpu_blocks|mamba cache).*"
            r"(larger than|greater than|exceeds?|insufficient|not enough|no available memory|is needed|too small)|"
            r"no available memory for the cache blocks|increas\w+ `?gpu_memory_utilization`? or decreas",
            _I,
        ),
    ),
    (
        "gpu_memory_utilization_too_high",
        None,
        re.compile(r"less than desired gpu memory utilization|free memory .*gpu[ _]memory[ _]utilization", _I),
    ),
    ("weights_exceed_memory", None, re.compile(r"not enough gpu memory to load|model weights? .*exceed", _I)),
    ("gpu_out_of_memory", None, re.compile(r"out of memory|OutOfMemory", _I)),
    ("host_memory_exhausted", None, re.compile(r"swap space|cpu memory|host memory|can't allocate memory", _I)),
    (
        "cuda_driver_mismatch",
        None,
        re.compile(
            r"driver (version|on your system)|no kernel image|NVML|insufficient for cuda runtime|"
            r"cuda (runtime|driver) version",
            _I,
        ),
    ),
    (
        "gpu_not_visible",
        None,
        re.compile(
            r"no cuda gpus|failed to infer device type|gpu support is disabled|device .{0,60}\bis not visible\b|"
            r"no (gpus?|devices?|accelerators?) (are |is )?"
            r"(found|available|detected)|cuda is not available|is_available\(\)",
            _I,
        ),
    ),
    (
        "dtype_unsupported",
        None,
        re.compile(
            r"compute capability|bfloat16|\bbf16\b|capability|\bsm_?\d\d|\b(hopper|ampere|blackwell|volta|turing)\b|"
            r"(dtype|data type|precision) .*not supported|does not support .*dtype|"
            r"does not support (fp8|fp4|int8|bf16|bfloat16|float8)\b.{0,40}\bon this (device|gpu)|"
            r"not supported on (this|the current|your) "
            r"(gpu|device|hardware)",
            _I,
        ),
    ),
    (
        "unsupported_architecture",
        None,
        re.compile(
            r"architectures?\b.*(not supported|unsupported|not recogni|failed to be inspected)|model type|"
            r"not supported (in|by) vllm|is not supported for now|model class|is not a registered model|"
            r"has no vllm implementation|implementation (of .{0,80} )?is not compatible with vllm|"
            r"(not supported|unsupported) .*architecture|"
            # the model class has no LoRA support in this release (--enable-lora on it)
            r"^(model )?\{[^}]*\} (does not|doesn't) support lora( yet)?\.?$|"
            r"^model \{[^}]*\} is not supported for lora",
            _I,
        ),
    ),
    (
        "parallelism_mismatch",
        None,
        re.compile(
            r"tensor[_ ]parallel|pipeline[_ ]parallel|data[_ ]parallel|expert[_ ]parallel|context[_ ]parallel|"
            r"\btp[_ ]size|\bpp[_ ]size|\bdp[_ ]size|world[_ ]size|placement group|number of (gpus|devices)|"
            r"(gpus|devices) (are )?available|not enough (gpus|devices)|invalid device ordinal|ray cluster|head node|"
            r"device ordinal .{0,80}out of range|out of (range|bounds) for .{0,60}(physical_gpu_ids|devices\b)|"
            # a weight's per-rank shard vs a quantization block: only the TP size changes the dividend
            r"not divisible by weight quantization block|_per_partition .{0,80}not divisible|"
            r"not enough resources to allocate|"  # Ray cannot place the ranks: too few GPUs
            r"per-rank intermediate sizes? must align|"
            r"\b(tp|pp|dp|ep)\b.*(divisible|must)|divisible by .*(parallel|size)",
            _I,
        ),
    ),
    (
        "nccl_failure",
        None,
        re.compile(
            r"nccl|process ?group|rendezvous|barrier|init_process_group|\bp2p\b|peer[- ]to[- ]peer|all_?reduce|"
            r"distributed (environment|backend)|torch\.distributed|gloo",
            _I,
        ),
    ),
    (
        "package_version_mismatch",
        None,
        re.compile(
            r"please (upgrade|update)|version\s*(>=|>|of at least)|requires? [\w-]+\s*>=|\bor (later|newer)\b|"
            r"is too old|incompatible version|broken build",
            _I,
        ),
    ),
    (
        "model_files_corrupt",
        None,
        re.compile(
            r"safetensors|checkpoint|\bshards?\b|weights? files?|\.bin\b|load key|header|incomplete|corrupt|"
            r"model weights|not initialized from|unexpected key|missing key|index file|not a valid json file|"
            r"weight map|not loaded properly|(gguf|weight|checkpoint) files? not found|could not find .{0,40} file for|"
            r"(does not|doesn't) contain (any )?(tensors|weights)",  # an adapter folder without its weights
            _I,
        ),
    ),
    # last: a message that names a flag, an environment variable or a choice to change
    (
        "invalid_arguments",
        None,
        re.compile(
            r"(?<![\w-])--[a-z][a-z0-9-]+|\bVLLM_[A-Z0-9_]+\b|please (set|pass|use|specify|disable|enable|remove)|"
            r"(is|are) not (currently )?supported (with|when|for|in|by|together)|cannot be (used|combined|enabled|set)|"
            r"mutually exclusive|(must|should) (only )?be (set|one of|a |an |positive|non-negative|greater|less|between|"  # noqa: E501 - one regex alternation a line
            r"at least|at most|divisible|specified|provided|true|false|enabled|disabled)|"
            r"unknown .*(method|backend|mode|type|format|option)|unsupported .*(method|backend|mode|type|format|option)|"  # noqa: E501 - one regex alternation a line
            r"deprecated|no longer supported|has been removed|block.size|"
            # a model or layer that cannot run with a feature vLLM turns on by a flag
            r"(does not|doesn't) (currently )?support (prefix caching|prefetch offloading|chunked prefill|"
            r"sequence[- ]parallel|cuda ?graphs?)|(quantized|fp8) kv cache (is )?not supported",
            _I,
        ),
    ),
]


# vLLM's own configuration checks are invalid_arguments (taxonomy v3 tie-break) unless their
# wording names one of these causes (a head count against the TP size, a KV cache too small).
CONFIG_PLACES = re.compile(
    r"vllm/config\.py|vllm/config/.*|vllm/engine/arg_utils\.py|vllm/entrypoints/.*|vllm/envs\.py"
)
CONFIG_WORDING = {
    "dependency_missing",
    "parallelism_mismatch",
    "kv_cache_insufficient",
    "unsupported_architecture",
    "gpu_memory_utilization_too_high",
    "model_not_found",
}


# Signs the taxonomy names for a cause that vLLM raises from its configuration checks: these
# win over the v3 tie-break that makes the rest of those checks invalid_arguments.
CONFIG_SIGNS: list[tuple[str, re.Pattern]] = [
    ("dtype_unsupported", re.compile(r"(minimum|compute) capability|not supported (for|on) the current gpu", _I)),
    ("gpu_not_visible", re.compile(r"failed to infer device type|no cuda gpus", _I)),
    ("host_memory_exhausted", re.compile(r"too large swap space|swap space .{0,80}(cpu|host) memory", _I)),
    ("package_version_mismatch", re.compile(MODULE_ATTRIBUTE)),  # vllm.envs' lazy attributes
]


# In vLLM's configuration checks, parallel wording names parallelism_mismatch only where a size
# does not fit the model or the GPUs (a head count, the devices there are); a check of how the
# parallel flags combine ("enable_expert_parallel must be True to use EPLB", "data_parallel_size_local
# must be <= data_parallel_size", EP on a model without experts) is invalid_arguments (v3 tie-break).
CONFIG_PARALLEL_FIT = re.compile(
    r"divisible|number of (gpus|devices)|(gpus|devices) (are )?available|not enough (gpus|devices)|world[_ ]size|"
    r"placement group|invalid device ordinal|ray cluster|head node|out of (range|bounds)|homogen|resources|"
    r"heads\b|for this model|architectures",
    _I,
)


# (file regex, cause, message regex): wording that means a cause only where it is raised.
PLACE_WORDING: list[tuple[str, str, str]] = [
    # a KV connector's transfer library (NIXL, Mooncake, MoRIIO) imported in a try and named when absent
    (r"vllm/distributed/(kv|ec)_transfer/.*", "dependency_missing", r"^[\w-]+ is not available\b"),
]
