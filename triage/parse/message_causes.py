"""Which cause (taxonomy v3 id) a message names: overrides, then wording, then place.

One home for this knowledge, read by two users: the catalogue's build (scripts/catalogue/build.py
decides each template of vLLM's source with it) and, at run time, the reading of an exception
the catalogue does not hold (`diagnose/catalogue_sign.py`: a release or a part of vLLM the
catalogue does not cover), with the file and function of its innermost frame as its place.

Order of evidence, first that answers wins:
1. ``OVERRIDES``: hand-written, keyed by the source file and a fragment of the template
   (vLLM's or a layer's text, never a log's), for templates the general rules place wrong
   (wrappers that only say a step failed). Then ``BENIGN`` (a message that says the program
   carries on is no failure).
2. ``CLASS_RULES``: the exception class alone decides (huggingface_hub's error classes,
   ImportError). Then ``REQUEST_TIME`` (a function that serves a request, renders a chat or
   parses tool calls: an error there cannot stop a start).
3. ``WORDING``: what the message is about, in vLLM's own words (a KV cache too small, a
   compute capability, a parallel size, a missing package) - the taxonomy's tie-breaks.
   Then ``internal``: a programming error that place must not speak for (a misuse class of
   a layer vLLM calls, or wording about the code's own state: "should only be called when",
   "is not initialized", "{type(x)}").
4. ``PLACES``: where it is raised (vLLM's config classes and argument parsing reject
   arguments; the model registry refuses architectures; the weight loaders read files).
Benign, request-time and internal templates name no cause and are not counted among the
user-facing startup messages (COVERAGE.txt lists them apart).
Nothing answers: ``unknown_failure`` (it counts against coverage).
"""

from __future__ import annotations

import re

from triage.parse.message_wording import (
    CONFIG_PARALLEL_FIT,
    CONFIG_PLACES,
    CONFIG_SIGNS,
    CONFIG_WORDING,
    PLACE_WORDING,
    WORDING,
)

WEIGHT_CACHE: tuple[str, ...] = (
    "does not support EPLB",
    "Invalid weight cache mode",
    "requires a token",
    "pre-processed weights",
)
WEIGHT_CACHE += ("WeightCacheKey mismatch on fields", "check the socket path / GPU mapping")
# ... a second daemon for a socket that one already owns, a draft/target loader given the other's cache
WEIGHT_CACHE += ("Another weight cache daemon already owns", "Weight cache role mismatch")
# (file regex, template fragment) -> cause.  The fragment is part of the source's template
# text (as `render` writes it, fields as {expr}); never a log's wording.
OVERRIDES: list[tuple[str, str, str]] = [
    (r"vllm/v1/engine/core_client\.py", "Engine core initialization failed", "unknown_failure"),
    (r"vllm/v1/engine/utils\.py", "Engine core initialization failed", "unknown_failure"),
    # a wrapper: it names the worker method that raised, never why (the error follows it)
    (r"vllm/.*", "Error executing method", "unknown_failure"),
    # torch.compile's wrappers: the inner error they carry (printed after them) says why
    (r"torch/_inductor/exc\.py", "raised:", "unknown_failure"),
    # a Triton kernel's tiles need more on-chip shared memory than this GPU has: no cause of the
    # taxonomy says so (shared_memory_exhausted is /dev/shm; "block sizes" here are the kernel's)
    (r"triton/runtime/errors\.py", "out of resource", "unknown_failure"),
    # more wrappers: a process or step failed, and the error that says why is printed before it
    (r"vllm/entrypoints/.*", "Engine process failed to start", "unknown_failure"),
    (r"vllm/.*executor.*", "failed to initialize: {", "unknown_failure"),
    (r"vllm/.*executor.*", "died unexpectedly", "unknown_failure"),
    (r"vllm/.*executor.*", "unexpected error, exiting monitor thread", "unknown_failure"),
    (r"vllm/entrypoints/.*", "exited during startup", "unknown_failure"),
    # the model registry's inspection subprocess: its stderr holds the real error (taxonomy:
    # an import failure behind "failed to be inspected" is not unsupported_architecture)
    (r"vllm/model_executor/models/registry\.py", "Error raised in subprocess", "unknown_failure"),
    # torch's multiprocessing guard: a start method to change (VLLM_WORKER_MULTIPROC_METHOD), no GPU missing
    (r"torch/cuda/__init__\.py", "Cannot re-initialize CUDA in forked subprocess", "unknown_failure"),
    (r"torch/cuda/__init__\.py", "PyTorch was compiled without CUDA support", "package_version_mismatch"),
    (r"vllm/.*", "Timed out waiting for engine core processes to start", "startup_timeout"),
    (r"vllm/.*", "Did not receive response from front-end process", "startup_timeout"),
    # a chat model with no chat template: --chat-template (raised when a chat is first rendered,
    # as ValueError in older releases, ChatTemplateResolutionError in newer ones)
    (r"vllm/entrypoints/chat_utils\.py", "you must provide a chat template", "invalid_arguments"),
    # Ray cannot place the workers: the cluster lacks the GPUs asked for (its wait is only the symptom)
    (r"vllm/.*executor/ray.*", "Cannot provide a placement group", "parallelism_mismatch"),
    (r"vllm/worker/.*|vllm/v1/worker/.*", "Error in memory profiling", "foreign_gpu_processes"),
    (r"vllm/.*worker.*", "Free memory on device", "gpu_memory_utilization_too_high"),
    (r"vllm/.*", "exceeds available Mamba cache blocks", "kv_cache_insufficient"),
    (r"vllm/.*", "Failed to load model - not enough GPU memory", "weights_exceed_memory"),
    (r"vllm/.*", "is not supported in-tree anymore", "unsupported_architecture"),
    (r"torch/cuda/__init__\.py", "Torch not compiled with CUDA enabled", "package_version_mismatch"),
    (r"torch/cuda/__init__\.py", "Found no NVIDIA driver", "gpu_not_visible"),
    # the IPC weight cache (0.33) refuses a setting or a combination: EPLB, its mode, a missing
    # token, a quantization it cannot share, a daemon started for another model or GPU
    *((r"vllm/model_executor/model_loader/(utils\.py|weight_cache/.*)", f, "invalid_arguments") for f in WEIGHT_CACHE),
    (r"vllm/v1/worker/gpu_worker\.py", "Model Runner V2 requires Triton", "dependency_missing"),
    # the MoE backend oracle names the setting to change (VLLM_FLASHINFER_MOE_BACKEND), as
    # quantization/fp8.py's same refusal does, even where it names the GPU it refuses on
    (r"vllm/model_executor/layers/fused_moe/oracle/.*", "Please use VLLM_", "invalid_arguments"),
    # a combination of the checkpoint's quantization dtypes that the layer does not implement (not the GPU's)
    (r"vllm/model_executor/layers/quantization/.*", "dtype combination", "invalid_arguments"),
    (r"vllm/v1/engine/core_client\.py", "asyncio without multiprocessing", "invalid_arguments"),  # an env setting
    (r"vllm/v1/engine/utils\.py", "found internal DPLB, which is incompatible", "invalid_arguments"),  # DP LB mode
    (r"vllm/v1/worker/mm_encoder_model_runner\.py", "An encoder-only instance", "invalid_arguments"),
    # a third review (0.33's unmapped): a pooling runner for a model without a pooler (--runner,
    # --convert); sleep mode's allocator asked for by a second engine in one process
    (r"vllm/v1/worker/gpu_model_runner\.py", "does not support any pooling tasks", "invalid_arguments"),
    (r"vllm/v1/worker/gpu_worker\.py", "CuMem allocator can only be used for one instance", "invalid_arguments"),
    # data parallelism over Ray needs as many GPUs on every node: the cluster does not fit the layout
    (r"vllm/v1/engine/utils\.py", "Nodes are not homogen", "parallelism_mismatch"),
]

# A message that says the program carries on: logged, caught, or normal on some machines.
BENIGN = re.compile(
    r"this is normal|will ignore|error ignored|; continuing|will be attempted instead|falling back to|assuming no ",
    re.I,
)

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
    "ArgumentTypeError": "invalid_arguments",  # argparse's type check of a flag's value
    "CorruptedCacheException": "model_files_corrupt",
    # no chat template for a chat model: --chat-template (raised when a chat is first rendered)
    "ChatTemplateResolutionError": "invalid_arguments",  # the hub cache: a blob or snapshot missing
    # torch.compile at start: inductor without Triton or a C++ compiler, a GPU Triton cannot target
    "TritonMissing": "dependency_missing",
    "InvalidCxxCompiler": "dependency_missing",
    "GPUTooOldForTriton": "dtype_unsupported",
}


# (file regex, cause[, class regex]): where a template is raised, when its wording did not decide.
PLACES: list[tuple[str, ...]] = [
    # LoRA's ValueErrors refuse an adapter or a LoRA flag (--max-lora-rank, --lora-modules, --max-loras)
    (r"vllm/lora/.*", "invalid_arguments", r"ValueError|NotImplementedError|KeyError"),
    # a KV / EC connector refuses its --kv-transfer-config (name, role, extra config, a layout)
    # (its asserts in a connector's construction check that config too: "HMA should not be enabled
    # unless all sub-connectors support it"; a connector's own error class says the same)
    (
        r"vllm/distributed/(kv|ec)_transfer/.*",
        "invalid_arguments",
        r"ValueError|NotImplementedError|AssertionError|MoRIIOError",
    ),
    (r"vllm/(v1/)?spec_decode/.*", "invalid_arguments", r"ValueError|NotImplementedError"),  # --speculative-config
    # a --tool-call-parser / --reasoning-parser name (or a parser plugin) that is not registered
    (r"vllm/(tool_parsers|reasoning|parser)/.*", "invalid_arguments", r"KeyError|ValueError|TypeError"),
    (r"vllm/config\.py|vllm/config/.*", "invalid_arguments"),
    (r"vllm/engine/arg_utils\.py", "invalid_arguments"),
    (r"vllm/entrypoints/.*", "invalid_arguments"),
    (r"vllm/envs\.py", "invalid_arguments"),
    (r"vllm/model_executor/models/registry\.py", "unsupported_architecture"),
    (r"vllm/model_inspection\.py", "unsupported_architecture"),
    (r"vllm/model_executor/models/(config|interfaces|interfaces_base)\.py", "invalid_arguments"),
    (r"vllm/model_executor/layers/quantization/.*", "invalid_arguments"),
    # a MoE kernel / all2all backend, quantization or EPLB setting the layer cannot serve
    (r"vllm/model_executor/layers/fused_moe/.*", "invalid_arguments", r"ValueError|NotImplementedError"),
    # a model's implementation refuses its checkpoint's config (an activation, a position
    # embedding, a layer type this release does not implement): upgrade vLLM or another checkpoint
    # (its asserts at construction check the same config: "Only support use_moe_router_bias is true")
    (r"vllm/model_executor/models/.*", "unsupported_architecture", r"ValueError|NotImplementedError|AssertionError"),
    # a loader's corrupt or missing files are named by their wording (WORDING); what is left
    # refuses a load format or a combination (--load-format, bitsandbytes with TP, EPLB)
    (r"vllm/model_executor/model_loader/(?!weight_cache/).*", "invalid_arguments", r"ValueError|NotImplementedError"),
    # KV capacity errors are named by their wording; the rest of its ValueErrors refuse a flag combination
    (r"vllm/v1/core/kv_cache_utils\.py", "invalid_arguments", r"ValueError"),
    (r"vllm/multimodal/registry\.py", "invalid_arguments"),
    (
        r"vllm/(attention|v1/attention)/.*",
        "invalid_arguments",
    ),  # a backend that cannot serve this model: choose another
    # a dtype or capability is named by its wording; what is left is a feature this platform
    # does not offer (MLA on CPU, LoRA on OpenVINO, speculative decoding on Neuron): change it
    (r"vllm/platforms/.*", "invalid_arguments", r"ValueError|NotImplementedError|AssertionError"),
    (
        r"vllm/distributed/(parallel_state|utils)\.py|vllm/distributed/device_communicators/(pynccl.*|custom_all_reduce.*|"
        r"cuda_communicator|shm_broadcast)\.py",
        "nccl_failure",
        r"RuntimeError|TimeoutError|logger\..*",
    ),
    (r"vllm/distributed/utils\.py", "invalid_arguments", r"ValueError"),  # VLLM_PP_LAYER_PARTITION
    (
        r"vllm/ray/.*|vllm/v1/executor/ray.*|vllm/executor/ray.*",
        "parallelism_mismatch",
        r"RuntimeError|ValueError|logger\..*",
    ),
    (r"vllm/v1/executor/vllm_net_devices\.py", "invalid_arguments"),  # VLLM_GPU_NIC_* settings
    (r"vllm/transformers_utils/.*|vllm/tokenizers/.*", "invalid_arguments"),
    # the hub's transfer errors; its argument checks (repo type, filenames) are internal
    (r"huggingface_hub/.*", "hub_unreachable", r"(?!ValueError$|AssertionError$|TypeError$).*"),
    (r"transformers/.*", "invalid_arguments"),
    (r"safetensors/.*", "model_files_corrupt"),
    (r"torch/cuda/__init__\.py", "gpu_not_visible", r"RuntimeError|AcceleratorError"),
    # init and rendezvous failures; its argument checks (ValueError, TypeError) are the caller's bugs
    (r"torch/distributed/.*", "nccl_failure", r"RuntimeError|DistBackendError|DistNetworkError|TimeoutError"),
]

# Functions that serve a request (or save, register, document), never run on the way to ready:
# an error there cannot stop a start, whatever the area's cause. (file regex, function regex)
REQUEST_TIME: list[tuple[str, str]] = [
    (r"vllm/entrypoints/llm\.py", r"(?!__init__$|from_engine_args$).*"),
    (
        r"vllm/entrypoints/chat_utils\.py",
        r"apply_.*|resolve_chat_template_kwargs|resolve_mistral_chat_template|parse_.*|_parse_.*",
    ),
    (r"vllm/entrypoints/openai/api_server\.py", r"create_.*|pause_generation|resume_generation|is_paused"),
    (r"vllm/entrypoints/openai/serving_.*|vllm/entrypoints/openai/.*/serving.*", r".*"),
    (r"vllm/entrypoints/utils\.py", r"_validate_truncation_size|get_max_tokens"),
    (
        r"vllm/tokenizers/.*|vllm/transformers_utils/tokenizer.*",
        r"render_.*|parse_.*|apply_chat_template|_normalize_messages|_reject_.*|_prepare_apply_chat_template.*|"
        r"_validate_apply_chat_template_args|maybe_serialize_tool_calls|encode.*|decode.*",
    ),
    (
        r"transformers/tokenization_utils_base\.py",
        r"__call__|_?pad|apply_chat_template|encode_message_with_chat_template|_mark_chat_inputs|char_to_.*|word_.*|"
        r"token_to_.*|tokens|sequence_ids|word_ids|convert_to_tensors|add_special_tokens|get_special_tokens_mask|"
        r"_get_padding_truncation_strategies|parse_response|get_response_parser|__getitem__|__getattr__|__setattr__",
    ),
    (
        r"transformers/.*",
        r"_?save_.*|register.*|docstring_decorator|_list_model_options|push_to_hub|update_from_string|get_mtp_config|"
        r"create_import_structure_from_path|fetch__all__|split_package_version|requires|convert_file_size_to_int",
    ),
    (r"safetensors/.*", r"_flatten.*|_to_ndarray|_evaluate_tensors_for_save|save.*|_is_little_endian"),
    (
        r"huggingface_hub/.*",
        r"read_upload_metadata|_validate_relative_filename|_get_pointer_path|_replace_no_matter_what",
    ),
]

# Programming errors: the classes a layer raises when its caller misuses it ...
LIBRARY_BUGS = re.compile(r"AssertionError|TypeError|AttributeError|KeyError|IndexError|NotImplementedError")
# ... the argument checks of an API vLLM calls, where vLLM, not the user, passes the arguments
# (collective ranks and groups, the hub's repo types): (file regex, class regex) ...
INTERNAL_PLACES: list[tuple[str, str]] = [
    (r"torch/distributed/.*", r"ValueError|_error"),
    (r"vllm/distributed/(parallel_state|device_communicators/.*)\.py", r"AssertionError|ValueError"),
    (r"huggingface_hub/.*", r"ValueError"),
]
# ... asserts that check what vLLM built against itself: (file regex, function regex, class regex)
# (a KV connector registering the KV cache vLLM allocated: its shapes, strides and buffers) ...
INTERNAL_FUNCS: list[tuple[str, str, str]] = [
    (r"vllm/distributed/(kv|ec)_transfer/.*", r"register_.*", r"AssertionError"),
]
# ... and wording, in any package, that describes the code's own state rather than a setting
INTERNAL = re.compile(
    r"should (only )?be called|must be called|should not be called|should not be reached|"
    r"should be (checked|resolved|replaced)|(is|are) not (yet )?initiali[sz]ed|must be initiali[sz]ed|"
    r"(is not|must be) a dataclass|must have a (default value|docstring)|this is a bug|file an issue|"
    r"please update \w+ in|does not implement|must implement|has no attribute|no attribute named|"
    r"did you forget to call|is designed to be instantiated|but (got|received) \{type\(|got an object of|"
    r"invalid function argument|"
    r"expecting a dictionary|invalid dim\b|called with conflicting|illegal to call|is already used by|"
    r"must be set by this point|(subclasses|sub classes) should implement|please implement|"
    r"model instance must (have|inherit)|typically means .{0,60} was called outside|must be of the same type|"
    r"list type must|must take exactly one of|accepts only keyword arguments|must be contiguous|"
    r"should (not|never) happen|should always exist|"
    # a model that finds none of its own layers, a config object vLLM itself passes
    r"\bno \w+ layers? found in\b|^\w+_config is required\b",
    re.IGNORECASE,
)


def request_time(file: str, function: str) -> bool:
    """Raised while serving a request (or saving, registering): it cannot stop a start."""
    return any(re.fullmatch(where, file) and re.fullmatch(fn, function) for where, fn in REQUEST_TIME)


def internal(file: str, cls: str, text: str, function: str = "") -> bool:
    """A programming error: a layer's misuse class, or wording about the code's own state."""
    if not file.startswith("vllm/") and LIBRARY_BUGS.fullmatch(cls):
        return True
    if any(re.fullmatch(w, file) and re.fullmatch(f, function) and re.fullmatch(c, cls) for w, f, c in INTERNAL_FUNCS):
        return True
    if any(re.fullmatch(where, file) and re.fullmatch(classes, cls) for where, classes in INTERNAL_PLACES):
        return True
    return INTERNAL.search(text) is not None


def cause_of(file: str, cls: str, text: str, function: str = "") -> tuple[str, str]:
    """(cause, how it was decided) for one template. "request-time", "internal" and "benign"
    name no cause, and mark a message that is not a user-facing startup error."""
    for where, fragment, cause in OVERRIDES:
        if re.fullmatch(where, file) and fragment in text:
            return cause, "override"
    if BENIGN.search(text) or cls.endswith("Warning"):
        return "unknown_failure", "benign"
    if cls in CLASS_RULES:
        return CLASS_RULES[cls], "class"
    if request_time(file, function) and not cls.endswith("ImportError"):  # a missing package is missing any time
        return "unknown_failure", "request-time"
    for where, cause, words in PLACE_WORDING:
        if re.fullmatch(where, file) and re.search(words, text):
            return cause, "wording"
    config = CONFIG_PLACES.fullmatch(file) is not None
    for cause, sign in CONFIG_SIGNS if config else []:
        if sign.search(text):
            return cause, "wording"
    for cause, cls_re, wording in WORDING:
        if config and cause not in CONFIG_WORDING:
            continue
        if config and cause == "parallelism_mismatch" and not CONFIG_PARALLEL_FIT.search(text):
            continue
        if (cls_re is None or re.fullmatch(cls_re, cls)) and wording.search(text):
            return cause, "wording"
    if internal(file, cls, text, function):  # only where place alone would decide
        return "unknown_failure", "internal"
    for where, cause, *classes in PLACES:
        if re.fullmatch(where, file) and (not classes or re.fullmatch(classes[0], cls)):
            return cause, "place"
    return "unknown_failure", "none"


def check_tie_break(cause: str, text: str) -> str:
    """A message read as one of vLLM's argument checks with no place to say so (pasted without
    its frames): parallel words that name no size which does not fit (a head count, the GPUs
    there are) are a flag combination, invalid_arguments (the v3 tie-break its config checks get)."""
    if cause == "parallelism_mismatch" and not CONFIG_PARALLEL_FIT.search(text):
        return "invalid_arguments"
    return cause


# A bare sentence (no class, no level) is read only where it says it refuses or lacks something:
# without a class or a level nothing else tells an error from a progress line pasted without its
# header ("Loading model weights took 2.5 GB", "Capturing CUDA graph shapes").
_REFUSAL = re.compile(
    r"\b(?:not supported|unsupported|not allowed|cannot|can't|could not|couldn't|unable to|must|should be|"
    r"requires?|required|invalid|exceeds?|insufficient|not enough|too (?:large|small|many|few|long|short)|"
    r"no (?:available|such)|missing|mismatch|failed|not found|does not|doesn't|is not|are not)\b",
    re.IGNORECASE,
)
# What a line that is a command, not a message, starts with: the launch itself, an install, a
# shell or Python prompt, an environment setting.
_COMMAND = re.compile(
    r"\s*(?:\$|#|>>>|(?:sudo\s+)?(?:vllm|python\d?(?:\.\d+)?|pip\d?|uv|conda|docker|podman|kubectl|helm|srun|"
    r"sbatch|torchrun|ray|export)\b|[A-Z_][A-Z0-9_]*=)"
)
MIN_SENTENCE = 20  # characters a bare line holds at least to be read as a sentence of vLLM's


def refusal_cause(text: str) -> str | None:
    """The cause a bare sentence names, read as one of vLLM's refusals with no class or place:
    only where it words a refusal and its wording (never a place or a class prior) decides."""
    if len(text.strip()) < MIN_SENTENCE or _COMMAND.match(text) or not _REFUSAL.search(text):
        return None
    cause, how = cause_of("vllm/", "", text)
    return cause if how in ("wording", "override") and cause != "unknown_failure" else None
