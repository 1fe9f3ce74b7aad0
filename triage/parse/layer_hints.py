"""Anchor hints for the grammar's "layers under vLLM" terminals (see parse.py's REGEX_HINTS).

A regex anchor terminal needs the literal words every match of it contains (the cheap
prefilter), and the characters a match may hold before such a word (where the anchor
search may start). parse.py merges these into its tables; they live here so the texts of
the layers under vLLM (../shared/errors.md) stay together.
"""

from __future__ import annotations

from triage.patterns import LazyPattern

LAYER_REGEX_HINTS: dict[str, tuple[str, ...]] = {
    "NVML_OOM_ASSERT": ("NVML_SUCCESS == ",),
    "DEVICE_ERROR": (
        "CUDA error:",
        "HIP error:",
        "CUDA error (",
        "HIP error (",
        "Hip error:",
        "XPU error:",
        "NPU error:",
        "CUDA_ERROR_",
        "Triton Error [",
        "Cuda failure",
        "Memory access fault by GPU node",
        "NVRM: Xid",
        "GPU has fallen off the bus",
        "NVMLError_GpuIsLost",
        "CUBLAS_STATUS_",
        "CUDNN_STATUS_",
        "invalid device function",
        "peer access is not supported between",
        "ptxas fatal",
        "nvcc fatal",
    ),
    "LOADER_HEAD": (
        "undefined symbol",
        "cannot open shared object file",
        "version `GLIBC_",
        "version `GLIBCXX_",
        "version `CXXABI_",
        "cannot allocate memory in static TLS block",
    ),
    "PACKAGE_MISMATCH": (
        "Torch not compiled with CUDA enabled",
        "installed an obsolete version of vllm",
        "data did not match any variant of untagged enum",
        "_OpNamespace' '",
        "A module that was compiled using NumPy 1.x cannot be run in",
        "does not exist or is not currently imported",
    ),
    "HUB_OFFLINE": (
        "We couldn't connect to",
        "LocalEntryNotFoundError",
        "OfflineModeIsEnabled",
        "outgoing traffic has been disabled",
        "An error happened while trying to locate the file",
        "There was a specific connection error when trying to load",
        "HTTPSConnectionPool(host='",
        "error downloading or loading vocab file",
    ),
    "MODEL_MISSING": (
        "Repo id must be in the form",
        "does not appear to have a file named",
        "Unrecognized model in",
        "Can't load tokenizer for",
        "does not exist or is not accessible",
        "NotExistError:",
        "The request model: ",
    ),
    "DISK_FULL": ("Not enough free disk space to download the file", "Disk quota exceeded", "% full"),
    "CONFIG_INVALID": ("Input should be ", "is not a valid git identifier"),
    "COLLECTIVE_HEAD": (
        "oneCCL:",
        "|CCL_ERROR|",
        "HCCL function error",
        "DIST call hccl api failed",
        "Gloo connectFullMesh failed",
        "ZE_RESULT_ERROR_",
    ),
    # `python -m M` with M's package missing: runpy's own line (`<python>: No module named M`)
    "RUNPY_MISSING": ("ModuleNotFoundError: No module named", ": No module named"),
}

LAYER_HINT_LOOKBACK: dict[str, str] = {
    "NVML_OOM_ASSERT": "",
    "DEVICE_ERROR": "",
    "LOADER_HEAD": r"[\w.+\-/: ]",
    "PACKAGE_MISMATCH": "'",
    "HUB_OFFLINE": "",
    "MODEL_MISSING": r"[\w.\-/ ]",
    "DISK_FULL": r"[\w ]",
    "CONFIG_INVALID": "",
    "COLLECTIVE_HEAD": "",
    "RUNPY_MISSING": r"[\w.(]",
}

# A file in /dev/shm, or a shared-memory segment named the way torch (`/torch_<pid>_...`), NCCL
# (`nccl-*`), psm / vLLM's message queue (`psm_*`) or POSIX semaphores name theirs (errors.md 4.1, 4.3).
_SHM_PATH = LazyPattern(r"^/dev/shm(?:/|$)|^/?(?:torch_\d|nccl-|psm_|vllm_shm|sem\.)")


def is_shm_path(path: str) -> bool:
    """Does this path lie in /dev/shm (a full one there is shared memory, elsewhere a disk)?"""
    return bool(_SHM_PATH.search(path))
