"""Which cause (taxonomy v3 id) each template names: overrides, then wording, then place.

Order of evidence, first that answers wins:
1. ``OVERRIDES``: hand-written, keyed by the source file and a fragment of the template
   (vLLM's or a layer's text, never a log's), for templates the general rules place wrong.
2. ``CLASS_RULES``: the exception class alone decides (huggingface_hub's error classes,
   ImportError).
3. ``WORDING``: what the message is about, in vLLM's own words (a KV cache too small, a
   compute capability, a parallel size, a missing package) - the taxonomy's tie-breaks.
4. ``PLACES``: where it is raised (vLLM's config classes and argument parsing reject
   arguments; the model registry refuses architectures; the weight loaders read files).
Nothing answers: ``unknown_failure`` (it counts against coverage).
"""

from __future__ import annotations

import re

# (file regex, template fragment) -> cause.  The fragment is part of the source's template
# text (as `render` writes it, fields as {expr}); never a log's wording.
OVERRIDES: list[tuple[str, str, str]] = [
    (r"vllm/v1/engine/core_client\.py", "Engine core initialization failed", "unknown_failure"),
    (r"vllm/v1/engine/utils\.py", "Engine core initialization failed", "unknown_failure"),
    # a wrapper: it names the worker method that raised, never why (the error follows it)
    (r"vllm/.*", "Error executing method", "unknown_failure"),
    (r"vllm/.*", "Timed out waiting for engine core processes to start", "startup_timeout"),
    (r"vllm/.*", "Did not receive response from front-end process", "startup_timeout"),
    (r"vllm/worker/.*|vllm/v1/worker/.*", "Error in memory profiling", "foreign_gpu_processes"),
    (r"vllm/.*worker.*", "Free memory on device", "gpu_memory_utilization_too_high"),
    (r"vllm/.*", "exceeds available Mamba cache blocks", "kv_cache_insufficient"),
    (r"vllm/.*", "Failed to load model - not enough GPU memory", "weights_exceed_memory"),
    (r"vllm/.*", "is not supported in-tree anymore", "unsupported_architecture"),
    (r"torch/cuda/__init__\.py", "Torch not compiled with CUDA enabled", "package_version_mismatch"),
    (r"torch/cuda/__init__\.py", "Found no NVIDIA driver", "gpu_not_visible"),
]

# exception class -> cause (all files)
CLASS_RULES: dict[str, str] = {
    "RepositoryNotFoundError": "model_not_found",
    "GatedRepoError": "hf_auth_required",
    "RevisionNotFoundError": "invalid_arguments",
    "EntryNotFoundError": "model_files_corrupt",
    "RemoteEntryNotFoundError": "model_files_corrupt",
    "LocalEntryNotFoundError": "hub_unreachable",
    "OfflineModeIsEnabled": "hub_unreachable",
    "HFValidationError": "model_not_found",
    "SafetensorError": "model_files_corrupt",
    "HeaderTooLarge": "model_files_corrupt",
    "OutOfMemoryError": "gpu_out_of_memory",
    "ModuleNotFoundError": "dependency_missing",
}

_I = re.IGNORECASE
# (cause, class regex or None, message regex): the first whose class and message match.
WORDING: list[tuple[str, str | None, re.Pattern]] = [
    (
        "dependency_missing",
        None,
        re.compile(
            r"pip install|please install|is not installed|not installed|No module named|"
            r"requires? (the )?[`'\"]?[\w.-]+[`'\"]? (package|library) |to be installed|install(ed)? (it|them) |"
            r"CUDA_HOME|could not find .*(compiler|executable)|"
            r"\b(nvcc|ffmpeg|numactl)\b.{0,40}(not found|not installed|not available|install)",
            _I,
        ),
    ),
    ("dependency_missing", r"ImportError", re.compile(r".")),
    ("gpu_runtime_fault", None, re.compile(r"illegal memory access|device-side assert", _I)),
    ("startup_timeout", None, re.compile(r"timed out|timeout|did not receive response|deadline", _I)),
    ("port_in_use", None, re.compile(r"address already in use|port \{?\w*\}? is (already )?in use", _I)),
    ("disk_space_exhausted", None, re.compile(r"no space left on device|disk space", _I)),
    ("cache_dir_not_writable", None, re.compile(r"permission denied|not writable|read-only file", _I)),
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
            r"repo id must|does not appear to have a file named config|can't load the configuration|"
            r"(model|path|directory|folder) .*does not exist|no such (model|file or directory)",
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
            r"no cuda gpus|failed to infer device type|no (gpus?|devices?|accelerators?) (are |is )?"
            r"(found|available|detected)|cuda is not available|is_available\(\)",
            _I,
        ),
    ),
    (
        "dtype_unsupported",
        None,
        re.compile(
            r"compute capability|bfloat16|\bbf16\b|capability|\bsm_?\d\d|hopper|ampere|blackwell|volta|turing|"
            r"(dtype|data type|precision) .*not supported|does not support .*dtype|not supported on (this|the current|your) "  # noqa: E501 - one regex alternation a line
            r"(gpu|device|hardware)",
            _I,
        ),
    ),
    (
        "unsupported_architecture",
        None,
        re.compile(
            r"architectures?\b.*(not supported|unsupported|not recogni|failed to be inspected)|model type|"
            r"not supported (in|by) vllm|is not supported for now|model class|"
            r"(not supported|unsupported) .*architecture",
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
            r"is too old|incompatible version",
            _I,
        ),
    ),
    (
        "model_files_corrupt",
        None,
        re.compile(
            r"safetensors|checkpoint|\bshards?\b|weights? files?|\.bin\b|load key|header|incomplete|corrupt|"
            r"model weights|not initialized from|unexpected key|missing key|index file",
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
            r"deprecated|no longer supported|has been removed|block.size",
            _I,
        ),
    ),
]

# (file regex, cause[, class regex]): where a template is raised, when its wording did not decide.
PLACES: list[tuple[str, ...]] = [
    (r"vllm/config\.py|vllm/config/.*", "invalid_arguments"),
    (r"vllm/engine/arg_utils\.py", "invalid_arguments"),
    (r"vllm/entrypoints/.*", "invalid_arguments"),
    (r"vllm/envs\.py", "invalid_arguments"),
    (r"vllm/model_executor/models/registry\.py", "unsupported_architecture"),
    (r"vllm/model_inspection\.py", "unsupported_architecture"),
    (r"vllm/model_executor/models/(config|interfaces|interfaces_base)\.py", "invalid_arguments"),
    (r"vllm/model_executor/layers/quantization/.*", "invalid_arguments"),
    (r"vllm/model_executor/model_loader/.*", "model_files_corrupt"),
    # KV capacity errors are named by their wording; the rest of its ValueErrors refuse a flag combination
    (r"vllm/v1/core/kv_cache_utils\.py", "invalid_arguments", r"ValueError"),
    (r"vllm/multimodal/registry\.py", "invalid_arguments"),
    (
        r"vllm/(attention|v1/attention)/.*",
        "invalid_arguments",
    ),  # a backend that cannot serve this model: choose another
    (r"vllm/platforms/.*", "dtype_unsupported"),
    (
        r"vllm/distributed/(parallel_state|utils)\.py|vllm/distributed/device_communicators/(pynccl.*|custom_all_reduce.*|"
        r"cuda_communicator|shm_broadcast)\.py",
        "nccl_failure",
        r"RuntimeError|ValueError|TimeoutError|AssertionError|logger\..*",
    ),
    (r"vllm/ray/.*|vllm/v1/executor/ray.*|vllm/executor/ray.*", "parallelism_mismatch"),
    (r"vllm/v1/executor/vllm_net_devices\.py", "invalid_arguments"),  # VLLM_GPU_NIC_* settings
    (r"vllm/transformers_utils/.*|vllm/tokenizers/.*", "invalid_arguments"),
    (r"huggingface_hub/.*", "hub_unreachable"),
    (r"transformers/.*", "invalid_arguments"),
    (r"safetensors/.*", "model_files_corrupt"),
    (r"torch/cuda/__init__\.py", "gpu_not_visible", r"RuntimeError|AssertionError|AcceleratorError"),
    (r"torch/distributed/.*", "nccl_failure"),
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


def cause_of(file: str, cls: str, text: str) -> tuple[str, str]:
    """(cause, how it was decided) for one template."""
    for where, fragment, cause in OVERRIDES:
        if re.fullmatch(where, file) and fragment in text:
            return cause, "override"
    if cls in CLASS_RULES:
        return CLASS_RULES[cls], "class"
    config = CONFIG_PLACES.fullmatch(file) is not None
    for cause, cls_re, wording in WORDING:
        if config and cause not in CONFIG_WORDING:
            continue
        if (cls_re is None or re.fullmatch(cls_re, cls)) and wording.search(text):
            return cause, "wording"
    for where, cause, *classes in PLACES:
        if re.fullmatch(where, file) and (not classes or re.fullmatch(classes[0], cls)):
            return cause, "place"
    return "unknown_failure", "none"
