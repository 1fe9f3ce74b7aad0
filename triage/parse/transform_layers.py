"""Parse trees to event fields for the layers under vLLM (the runtime, loader, hubs, files, OS).

A mixin of ToEvents (transform.py): one method per start rule of the "layers under vLLM"
section of vllm_log.lark. Each error is keyed by what it says, never by the platform word:
`CUDA error: X`, `HIP error: X` and `CUDA_ERROR_<NAME>: X` for one X are one DeviceError.
A method raises ValueError for a text that looks like an error but is not (the traps of
../shared/errors.md §9: NCCL's plugin probe, teardown noise); the line then states nothing.
"""

from __future__ import annotations

import re

from triage.parse.lark_runtime import Transformer
from triage.parse.transform_common import inline_children
from triage.units import parse_size

# (key, family, texts as the runtime prints them, enum names without their prefix): errors.md §2.2, §2.5
_DEVICE_ERRORS: tuple[tuple[str, str, tuple[str, ...], tuple[str, ...]], ...] = (
    (
        "illegal_address",
        "runtime_fault",
        ("an illegal memory access was encountered",),
        ("IllegalAddress", "ILLEGAL_ADDRESS"),
    ),
    ("device_assert", "runtime_fault", ("device-side assert triggered",), ("Assert", "ASSERT")),
    ("launch_failure", "runtime_fault", ("unspecified launch failure",), ("LaunchFailure", "LAUNCH_FAILED")),
    (
        "launch_out_of_resources",
        "runtime_fault",
        ("too many resources requested for launch",),
        ("LaunchOutOfResources", "LAUNCH_OUT_OF_RESOURCES"),
    ),
    (
        "illegal_instruction",
        "runtime_fault",
        ("an illegal instruction was encountered",),
        ("IllegalInstruction", "ILLEGAL_INSTRUCTION"),
    ),
    ("misaligned_address", "runtime_fault", ("misaligned address",), ("MisalignedAddress", "MISALIGNED_ADDRESS")),
    ("memory_access_fault", "runtime_fault", ("Memory access fault by GPU node",), ()),
    (
        "ecc_uncorrectable",
        "runtime_fault",
        ("uncorrectable ECC error encountered",),
        ("ECCUncorrectable", "ECCNotCorrectable", "ECC_UNCORRECTABLE"),
    ),
    ("nvlink_uncorrectable", "runtime_fault", ("uncorrectable NVLink error",), ("NvlinkUncorrectable",)),
    ("gpu_lost", "runtime_fault", ("GPU has fallen off the bus", "NVMLError_GpuIsLost", "GPU is lost"), ()),
    ("xid", "runtime_fault", ("NVRM: Xid",), ()),
    ("invalid_argument", "runtime_fault", ("invalid argument",), ("InvalidValue", "INVALID_VALUE")),
    (  # 9: a launch whose grid/block/shared-memory shape the device rejects (a batch too large for a kernel)
        "invalid_configuration",
        "runtime_fault",
        ("invalid configuration argument",),
        ("InvalidConfiguration",),
    ),
    (
        "launch_timeout",
        "runtime_fault",
        ("the launch timed out and was terminated",),
        ("LaunchTimeout", "LAUNCH_TIMEOUT"),
    ),
    (
        "hardware_stack_error",
        "runtime_fault",
        ("hardware stack error",),
        ("HardwareStackError", "HARDWARE_STACK_ERROR"),
    ),
    ("invalid_pc", "runtime_fault", ("invalid program counter",), ("InvalidPc", "INVALID_PC")),
    (  # 717: before "operation not supported", whose text it contains
        "invalid_address_space",
        "runtime_fault",
        ("operation not supported on global/shared address space",),
        ("InvalidAddressSpace", "INVALID_ADDRESS_SPACE"),
    ),
    (
        "no_kernel_image",
        "build_mismatch",
        ("no kernel image is available for execution on the device",),
        ("NoKernelImageForDevice", "NoBinaryForGpu", "NO_BINARY_FOR_GPU"),
    ),
    ("invalid_device_function", "build_mismatch", ("invalid device function",), ("InvalidDeviceFunction",)),
    (
        "invalid_kernel_image",
        "build_mismatch",
        ("device kernel image is invalid", "invalid kernel file"),
        ("InvalidKernelImage", "InvalidImage", "INVALID_IMAGE", "InvalidKernelFile"),
    ),
    ("invalid_ptx", "build_mismatch", ("a PTX JIT compilation failed",), ("InvalidPtx", "INVALID_PTX")),
    (  # ptxas / nvcc older than the GPU: "Value 'sm_110a' is not defined", "Unsupported gpu architecture"
        "toolchain_arch_unknown",
        "build_mismatch",
        ("is not defined for option 'gpu-name'", "Unsupported gpu architecture"),
        (),
    ),
    (  # 221: the driver install lacks its PTX JIT library (errors.md 2.2)
        "jit_compiler_not_found",
        "build_mismatch",
        ("PTX JIT compiler library not found",),
        ("JitCompilerNotFound", "JIT_COMPILER_NOT_FOUND"),
    ),
    (
        "unsupported_ptx",
        "build_mismatch",
        ("the provided PTX was compiled with an unsupported toolchain",),
        ("UnsupportedPtxVersion", "UNSUPPORTED_PTX_VERSION"),
    ),
    (
        "insufficient_driver",
        "build_mismatch",
        ("driver version is insufficient for", "is not supported in the installed CUDA driver"),
        ("InsufficientDriver", "CallRequiresNewerDriver"),
    ),
    ("stub_library", "build_mismatch", ("CUDA driver is a stub library",), ("StubLibrary", "STUB_LIBRARY")),
    (
        "driver_mismatch",
        "build_mismatch",
        ("unsupported display driver / cuda driver combination",),
        ("SystemDriverMismatch", "SYSTEM_DRIVER_MISMATCH"),
    ),
    (
        "compat_not_supported",
        "build_mismatch",
        ("forward compatibility was attempted on non supported HW",),
        ("CompatNotSupportedOnDevice", "COMPAT_NOT_SUPPORTED_ON_DEVICE"),
    ),
    ("system_not_ready", "build_mismatch", ("system not yet initialized",), ("SystemNotReady", "SYSTEM_NOT_READY")),
    ("shared_object_init", "build_mismatch", ("shared object initialization failed",), ("SharedObjectInitFailed",)),
    (
        "no_device",
        "not_visible",
        ("no CUDA-capable device is detected", "no ROCm-capable device is detected"),
        ("NoDevice", "NO_DEVICE"),
    ),
    ("devices_unavailable", "not_visible", ("busy or unavailable",), ("DevicesUnavailable", "DEVICE_UNAVAILABLE")),
    (
        "initialization_error",
        "not_visible",
        ("initialization error",),
        ("InitializationError", "NotInitialized", "NOT_INITIALIZED"),
    ),
    ("invalid_device_ordinal", "ordinal", ("invalid device ordinal",), ("InvalidDevice", "INVALID_DEVICE")),
    (
        "peer_access",
        "peer_access",
        ("peer access is not supported between these two devices",),
        ("PeerAccessUnsupported", "PEER_ACCESS_UNSUPPORTED"),
    ),
    ("not_supported", "other", ("operation not supported",), ("NotSupported", "NOT_SUPPORTED")),
    ("unknown", "other", ("unknown error",), ("Unknown", "UNKNOWN")),
)
# cudaGetDeviceCount's codes as torch prints them (`Error <code>: <text>`): the runtime's text for each
# (errors.md 2.2, 2.4), which `_device_key` reads
_COUNT_CODES = {
    "3": "initialization error",
    "34": "CUDA driver is a stub library",
    "35": "driver version is insufficient for",
    "46": "busy or unavailable",
    "100": "no CUDA-capable device is detected",
    "802": "system not yet initialized",
    "803": "unsupported display driver / cuda driver combination",
    "804": "forward compatibility was attempted on non supported HW",
    "999": "unknown error",
}
_TEARDOWN = ("driver shutting down", "Deinitialized", "CudartUnloading", "DEINITIALIZED")
_OOM_TEXTS = ("out of memory", "OutOfMemory", "MemoryAllocation", "OUT_OF_MEMORY")
_PLATFORMS = {
    "CUDA": "CUDA",
    "HIP": "HIP",
    "Hip": "HIP",
    "XPU": "XPU",
    "NPU": "NPU",
    "Triton": "CUDA",
    "Cuda": "CUDA",
    "Memory": "HIP",
    "NVRM:": "CUDA",
    "GPU": "CUDA",
    "NVMLError": "CUDA",
}
_HEAD_IN_TEXT = (
    "memory_access_fault",
    "xid",
    "gpu_lost",
    "toolchain_arch_unknown",
)  # errors whose head is part of what they say
_DRIVER_LIBS = ("libcuda.so", "libnvidia-ml.so", "libnvidia-", "libhsa-runtime", "libamdhip64.so")
_CACHE_WORDS = (
    "cache",
    "huggingface",
    "hf_home",
    "triton",
    "inductor",
    "flashinfer",
    "/tmp",
    "torch_extensions",
    "/.config",
    "/.local",
)


def _device_key(text: str) -> tuple[str, str] | None:
    """(key, family) of a runtime error text or enum name; None when it is not a device error."""
    for key, family, texts, names in _DEVICE_ERRORS:
        if any(t in text for t in texts) or any(
            re.search(rf"(?:cudaError|hipError|CUDA_ERROR_){n}\b", text) for n in names
        ):
            return key, family
    return None


def _quoted_path(text: str) -> str | None:
    m = re.search(r"""['"<]([~/.\w][^'"<>]*)['">]""", text)
    return m.group(1) if m else None


@inline_children
class LayerEvents(Transformer):
    """Methods named after the start rules of the "layers under vLLM" grammar section."""

    def device_error(self, head, tail=None):
        head_text, rest = str(head), str(tail or "")
        text = f"{head_text} {rest}"
        if any(t in text for t in _TEARDOWN):
            raise ValueError("teardown noise after the real failure")
        platform = _PLATFORMS.get(head_text.split()[0].split("_")[0], "CUDA")
        if "[HIP]" in head_text:
            platform = "HIP"
        message = rest.strip().strip("'").strip()
        if any(t in text for t in _OOM_TEXTS):
            return {"kind": "cuda_error_oom", "device": platform}
        found = _device_key(text)
        if found is None:  # a code this table does not key (a cuBLAS status, a rarer runtime code)
            if not message and head_text.endswith((":", "'")):
                raise ValueError("a device error's wrapper with no text")
            return {"kind": "native_error", "layer": platform, "text": (head_text + " " + message).strip()[:300]}
        key, family = found
        return {
            "kind": "device_error",
            "platform": platform,
            "error": key,
            "family": family,
            "text": (head_text + " " + message).strip()[:300] if key in _HEAD_IN_TEXT else message[:300],
        }

    def loader(self, head, tail=None):
        text, rest = str(head), str(tail or "")
        if "libnccl-net" in text or "No plugin found" in rest or "NCCL INFO" in rest:
            raise ValueError("NCCL's probe for a network plugin: harmless")
        # glibc's own line for an executable names the library as its DT_NEEDED entry says it
        library = re.match(r"error while loading shared libraries: ([\w.+\-]+):", text) or re.match(
            r"([\w.+\-/]*\.so(?:\.\w+)*):", text
        )
        lib = library.group(1) if library else None
        name = lib.rsplit("/", 1)[-1] if lib else None
        if "undefined symbol" in text:
            problem = "undefined symbol"
        elif "cannot open shared object file" in text:
            problem = "missing shared library"
        elif "static TLS" in text:
            problem = "static TLS block exhausted"
        else:
            problem = re.sub(r"[`']", "", text)
            required = re.search(r"required by (\S+?)\)", rest)
            name = required.group(1).rsplit("/", 1)[-1] if required else None
        words = rest.lstrip(": ").split()
        symbol = words[0] if problem == "undefined symbol" and words else None
        return {
            "kind": "loader_error",
            "problem": problem,
            "library": name,
            "symbol": symbol[:200] if symbol else None,
            "driver": bool(name) and name.startswith(_DRIVER_LIBS) and problem == "missing shared library",
        }

    def undefined_symbol(self, head, tail=None):
        symbol = str(head).split(": ", 1)[1]
        return {"kind": "loader_error", "problem": "undefined symbol", "library": None, "symbol": symbol[:200]}

    def package_mismatch(self, head, tail=None):
        text = str(head)
        problems = {
            "Torch not compiled with CUDA enabled": ("a CPU-only torch is installed", "torch"),
            "installed an obsolete version of vllm": ("vLLM's compiled kernels do not match its Python code", "vllm"),
            "data did not match any variant of untagged enum": (
                "tokenizer.json was written by a newer tokenizers than the one installed",
                "tokenizers",
            ),
            "A module that was compiled using NumPy 1.x cannot be run in": (
                "an extension built for NumPy 1.x under NumPy 2",
                "numpy",
            ),
            "does not exist or is not currently imported": (
                "the tokenizer class the model names is not in the installed transformers",
                "transformers",
            ),
        }
        if text in problems:
            problem, package = problems[text]
        else:
            problem, package = "vLLM's custom ops did not load (its compiled extension failed earlier)", "vllm"
        return {"kind": "package_mismatch", "problem": problem, "package": package}

    def no_gpu(self, head, tail=None):
        if str(head).startswith("device >= 0"):  # torch asked for a device index past the visible ones
            return {"kind": "gpu_not_visible", "problem": f"a GPU index beyond the visible GPUs was used ({head})"}
        return {"kind": "gpu_not_visible", "problem": str(head)}

    def device_count(self, tail=None):
        # read by its code where the paste kept it (the runtime's text where not), as `CUDA error:` is
        m = re.search(r"Error (\d+): ([^(]*)", str(tail or ""))
        code, text = (m.group(1), m.group(2).strip()) if m else ("", "")
        found = _device_key(_COUNT_CODES[code]) if code in _COUNT_CODES else _device_key(text)
        if found is None:
            said = f" (error {code}: {text})" if code else ""
            return {
                "kind": "gpu_not_visible",
                "problem": f"torch could not count the GPUs: cudaGetDeviceCount() failed{said}",
            }
        key, family = found
        return {
            "kind": "device_error",
            "platform": "CUDA",
            "error": key,
            "family": family,
            "text": f"cudaGetDeviceCount() failed with error {code}: {text or _COUNT_CODES[code]}",
        }

    def hub_offline(self, head, tail=None):
        text, rest = str(head), str(tail or "")
        endpoint = re.search(r"https?://[\w.\-]+", text + " " + rest)
        host = re.search(r"host='([\w.\-]+)'", text)
        offline = (
            "outgoing traffic has been disabled" in text + rest
            or "OfflineModeIsEnabled" in text
            or "offline mode is enabled" in rest
        )
        return {
            "kind": "hub_unreachable",
            "problem": text.split("(")[0].strip(),
            "endpoint": host.group(1) if host else (endpoint.group(0) if endpoint else None),
            "offline": offline,
            "vocab": "vocab file" in text or "openaipublic.blob" in text,
        }

    def model_missing(self, head, tail=None):
        rest = str(tail or "")
        quoted = re.search(r": '([^']+)'", rest) or re.search(r"'([\w.\-]+/[\w.\-]+)'", rest)
        repo = quoted.group(1) if quoted else None
        return {"kind": "repo_not_found", "repo": repo, "local": bool(repo) and repo[0] in "/.~"}

    def runpy_missing(self, head, tail=None):
        """`python -m M` whose package is missing: runpy's line read as the exception it reports."""
        name = re.match(r"\s*'?([\w.]+)'?\)?\s*$", str(tail or ""))
        if not name:
            raise ValueError("runpy's report cut before the module's name")
        return {"kind": "exception", "type": "ModuleNotFoundError", "message": f"No module named '{name.group(1)}'"}

    def files_corrupt(self, head, tail=None):
        text, rest = str(head), str(tail or "")
        # a Git LFS pointer is text starting `version https://git-lfs...`: pickle's first byte `v` (118)
        lfs = (
            "HeaderTooLarge" in rest
            or "header too large" in rest
            or "invalid load key, 'v'" in f"{text} {rest}"
            or (text.endswith("Unsupported operand") and rest.split(".")[0].strip() == "118")
        )
        problem = {
            "Error while deserializing header:": f"safetensors header unreadable ({rest.split('[')[0].strip()[:80]})",
            "invalid load key,": "a pickle checkpoint that is not one",
            "WeightsUnpickler error: Unsupported operand": "a .bin/.pt checkpoint that is not a pickle (torch.load "
            "met a byte no pickle holds)",
            "PytorchStreamReader failed reading zip archive": "a truncated .bin/.pt checkpoint",
        }.get(text, "a truncated safetensors file")
        return {"kind": "model_files_corrupt", "problem": problem, "lfs_pointer": lfs}

    def disk_full(self, head, tail=None):
        text, rest = str(head), str(tail or "")
        if text.startswith("Not enough free disk space"):
            need = re.search(r"expected file size is: ([\d.]+) MB", rest)
            free = re.search(r"The target location (\S+) only has ([\d.]+) MB", rest)
            return {
                "kind": "disk_full",
                "problem": "the hub found too little free disk for the download",
                "warning": True,
                "path": free.group(1) if free else None,
                "needed": int(float(need.group(1)) * 10**6) if need else None,
                "free": int(float(free.group(2)) * 10**6) if free else None,
            }
        if text.startswith("is over"):
            path = re.match(r"(/\S+)", rest)
            return {
                "kind": "disk_full",
                "problem": f"Ray's temp disk {text}",
                "warning": True,
                "path": path.group(1) if path else None,
            }
        return {"kind": "disk_full", "problem": "disk quota exceeded", "path": _quoted_path(rest)}

    def not_writable(self, head, tail=None):
        text, rest = str(head), str(tail or "")
        path = _quoted_path(rest) or (re.match(r"(?:at )?(/\S+)", rest.strip()) or [None, None])[1]
        if "Check cache directory permissions" in text:
            path = None
        # no path (a socket bind below port 1024, say): a cache only when the message says so
        cachey = (path is not None and any(w in path.lower() for w in _CACHE_WORDS)) or "cache" in text
        return {
            "kind": "not_writable",
            "problem": "read-only file system" if "Read-only" in text else "permission denied",
            "path": path,
            "cache": cachey,
        }

    def config_invalid(self, head, tail=None):
        text, rest = str(head), str(tail or "")
        if "git identifier" in text:
            return {"kind": "config_invalid", "problem": "the revision does not exist for this model"}
        value = re.search(r"input_value=([^,\]]{1,100})", rest)
        return {
            "kind": "config_invalid",
            "problem": text[: -len("[type=")].strip(),
            "value": value.group(1) if value else None,
        }

    def collective(self, head, tail=None):
        text, rest = str(head), str(tail or "")
        backend = (
            "oneCCL"
            if "CCL" in text and "HCCL" not in text
            else "HCCL"
            if "hccl" in text.lower()
            else "Gloo"
            if "Gloo" in text
            else "Level Zero"
        )
        detail = rest.split("EXCEPTION:")[-1].strip()[:120] if rest else text
        return {"kind": "nccl_error", "problem": f"{backend}: {detail or text}"}

    def mps_oom(self, *parts):
        # the figures in their order (allocated, other, max allowed, request), as far as a paste kept them
        sizes = [parse_size(p) for p in parts if p.type == "SIZE"]
        named = dict(zip(("allocated", "other", "total", "requested"), sizes, strict=False))
        named.pop("other", None)
        return {"kind": "torch_oom", "device": "MPS", **named}

    def hpu_oom(self, size, tail=None):
        return {"kind": "torch_oom", "device": "HPU", "requested": int(size)}

    def xla_oom(self, head, tail=None):
        return {"kind": "torch_oom", "device": "TPU"}

    def nvml_oom(self, head, tail=None):
        return {"kind": "torch_oom", "device": "CUDA", "via": "nvml_assert"}

    def old_active(self, size):
        return {}
