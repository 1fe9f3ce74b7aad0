"""Which cause (taxonomy v3 id) each native message names: CUDA runtime, cuBLAS, cuDNN, NCCL.

The native tables are keyed by their own enum names, so a code's cause is decided by what the
code means (../shared/errors.md §1.8, §2.2, §3.1-3.4 and the taxonomy's signs and tie-breaks),
never by a log's wording. A code whose meaning does not determine a cause (``initialization
error``: a fork or a missing device; ``invalid usage``: a misused API or two ranks on one GPU)
names none: a wrong cause costs more trust than ``unknown_failure``.

Traps kept (errors.md §9): ``out of memory`` of the runtime is an OOM whose phase a line does not
show (gpu_out_of_memory, taxonomy v3), while ``an illegal memory access`` is a kernel fault
(gpu_runtime_fault), not a memory cause; ``driver shutting down`` is teardown noise (benign).
"""

from __future__ import annotations

import re

OOM, FAULT, DRIVER = "gpu_out_of_memory", "gpu_runtime_fault", "cuda_driver_mismatch"

# cudaError<Name> (the runtime's names, without the prefix) -> cause.
CUDA_RUNTIME: dict[str, str] = {
    "MemoryAllocation": OOM,  # errors.md §1.8: outside the caching allocator; no phase on one line
    # the driver, the toolkit or the wheel's kernels do not fit this GPU (taxonomy: build/arch mismatch)
    **dict.fromkeys(
        (
            "StubLibrary",
            "InsufficientDriver",
            "CallRequiresNewerDriver",
            "InvalidDeviceFunction",
            "InvalidKernelImage",
            "InvalidSource",
            "NoKernelImageForDevice",
            "InvalidPtx",
            "JitCompilerNotFound",
            "UnsupportedPtxVersion",
            "InsufficientLoaderVersion",
            "SharedObjectInitFailed",
            "SystemNotReady",
            "SystemDriverMismatch",
            "CompatNotSupportedOnDevice",
            "VersionTranslation",
        ),
        DRIVER,
    ),
    "NoDevice": "gpu_not_visible",
    "DevicesUnavailable": "gpu_not_visible",  # exclusive-process mode, or a GPU held elsewhere
    "InvalidDevice": "parallelism_mismatch",  # taxonomy: "invalid device ordinal" in a worker
    "PeerAccessUnsupported": "nccl_failure",  # errors.md §2.2: P2P topology
    # a kernel faults at run time (taxonomy v2: of any origin; a launch failing with invalid argument)
    **dict.fromkeys(
        (
            "IllegalAddress",
            "Assert",
            "LaunchFailure",
            "PriorLaunchFailure",
            "LaunchOutOfResources",
            "LaunchTimeout",
            "IllegalInstruction",
            "MisalignedAddress",
            "InvalidAddressSpace",
            "InvalidPc",
            "HardwareStackError",
            "ECCUncorrectable",
            "NvlinkUncorrectable",
            "Contained",
            "InvalidValue",
        ),
        FAULT,
    ),
}
CUDA_BENIGN = {"CudartUnloading"}  # teardown after the real failure (errors.md §2.2, §9)

# hipError<Name> -> the CUDA runtime's name of the same code where the two differ (errors.md §2.2);
# the rest share the suffix (hipErrorInvalidDeviceFunction, hipErrorPeerAccessUnsupported, ...)
HIP_AS_CUDA = {
    "OutOfMemory": "MemoryAllocation",
    "NotInitialized": "InitializationError",
    "Deinitialized": "CudartUnloading",
    "NoBinaryForGpu": "NoKernelImageForDevice",  # the gfx target is not in the build
    "InvalidImage": "InvalidKernelImage",
    "InvalidKernelFile": "InvalidPtx",
    "ECCNotCorrectable": "ECCUncorrectable",
}

# CUBLAS_STATUS_<X> / CUDNN_STATUS_<X> (without the prefix) -> cause.
CUBLAS: dict[str, str] = {
    "ALLOC_FAILED": OOM,  # errors.md §1.8: the handle's workspace did not fit
    "EXECUTION_FAILED": FAULT,  # "the function failed to launch on the GPU"
    "ARCH_MISMATCH": "dtype_unsupported",  # "requires an architectural feature absent from the device"
}
CUDNN: dict[str, str] = {
    "ALLOC_FAILED": OOM,
    "INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED": OOM,
    "INTERNAL_ERROR_HOST_ALLOCATION_FAILED": "host_memory_exhausted",
    "EXECUTION_FAILED": FAULT,
    "ARCH_MISMATCH": "dtype_unsupported",
    "NOT_SUPPORTED_ARCH_MISMATCH": "dtype_unsupported",
    "NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER": DRIVER,
    "NOT_SUPPORTED_INCOMPATIBLE_CUDART": "package_version_mismatch",
    "SUBLIBRARY_VERSION_MISMATCH": "package_version_mismatch",
    "VERSION_MISMATCH": "package_version_mismatch",
    "SUBLIBRARY_LOADING_FAILED": "package_version_mismatch",
}

# ncclResult_t names -> cause (taxonomy signs: "NCCL error", ncclSystemError, ncclUnhandledCudaError,
# NCCL timeouts). Invalid argument / usage / in progress say the API was misused or is busy: the
# WARN before them names why (two ranks on one GPU is ncclInvalidUsage), so they name none.
NCCL_RESULTS: dict[str, str] = {
    "ncclUnhandledCudaError": "nccl_failure",
    "ncclSystemError": "nccl_failure",
    "ncclInternalError": "nccl_failure",
    "ncclRemoteError": "nccl_failure",
    "ncclTimeout": "nccl_failure",
}

_I = re.IGNORECASE
# NCCL WARN formats, by wording first (what the message says), in order.
NCCL_WORDING: list[tuple[str, re.Pattern]] = [
    # a CUDA allocation NCCL makes for its buffers at init (errors.md §1.8, §3.4)
    (OOM, re.compile(r"Failed to CUDA (calloc|malloc|host alloc)|cuMem\w* failed.{0,40}out of memory", _I)),
    # two ranks on one GPU: the device assignment (errors.md §3.4)
    ("parallelism_mismatch", re.compile(r"Duplicate GPU detected", _I)),
    # a /dev/shm segment NCCL cannot create, grow or map (errors.md §3.4); attaching to a peer's
    # segment that vanished is a peer's failure, not a small /dev/shm
    (
        "shared_memory_exhausted",
        re.compile(
            r"posix_fallocate|failed to extend /dev/shm|creating shared memory segment|Could not map (?!view)", _I
        ),
    ),
    # NCCL's SYSCHECK macros: a system call failed, the result is ncclSystemError (taxonomy sign)
    ("nccl_failure", re.compile(r"^Call to \w+ failed")),
]
# the caller's misuse, NCCL's own bookkeeping, its configuration checks: no cause of a start
NCCL_INTERNAL = re.compile(
    r"invalid (argument|usage|value|comm|op|type|root|rank|pointer|handle|size|count|stream|config)|"
    r"\binvalid\b.{0,20}=|%p|should (not )?be|must be|not (yet )?(supported|implemented)|unsupported|unexpected|"
    r"mismatch|improper usage|"
    r"deprecat|overrid|PARAM:|CE collective|symmetric|window|revoked|aborted|destroyed|already|not found in|"
    r"shadow pool|offset=|extends beyond|profiler|plugin|tuner|nvtx|trace|out of (bounds|range)|\bNULL\b|\bnull\b|"
    r"called when|XML|Attempting to|builtin|no algorithm|wc->|->|\breq\b|==|!=|<=|>=",
    _I,
)
# a warning NCCL carries on after (a feature it turns off, a value it clamps): no failure
NCCL_BENIGN = re.compile(
    r"will (be ignored|ignore|continue)|ignoring|; continuing|fall(ing)? ?back|skipping|disabling|limiting|unsetting|"
    r"retrying|will retry|using (the )?default|\benabling\b",
    _I,
)
# NCCL fails to connect the ranks (taxonomy nccl_failure): its sockets, bootstrap, network transports
# (IB, sockets, GDR), peer-to-peer and IPC paths, proxies and fabric (errors.md §3.4)
NCCL_CONNECT = re.compile(
    r"socket|connect|bootstrap|NET/|\bIB\b|ibv|\bpeer\b|remote|network|interface|connection|closed|proxy|\bP2P\b|"
    r"\bIPC\b|cudaIpc|\baccept|\blisten|\bpoll|mlx5|fabric|NVLS|multicast|exceeded retries|hostname|Message truncated|"
    r"\bUDS\b|Net :|\bQP\b|completion|\bCQE\b|\bGDR|NVLink|reverse path",
    _I,
)


def table_cause(family: str, name: str) -> tuple[str, str]:
    """(cause, how) of one code of a native error table, by its enum name."""
    if family in ("cuda-runtime", "hip"):
        short = name.removeprefix("cudaError").removeprefix("hipError")
        short = HIP_AS_CUDA.get(short, short) if family == "hip" else short
        if short in CUDA_BENIGN:
            return "unknown_failure", "benign"
        return (CUDA_RUNTIME[short], "table") if short in CUDA_RUNTIME else ("unknown_failure", "none")
    if family in ("cublas", "cudnn"):
        table = CUBLAS if family == "cublas" else CUDNN
        short = re.sub(r"^(CUBLAS|CUDNN)_STATUS_", "", name)
        return (table[short], "table") if short in table else ("unknown_failure", "none")
    if family == "nccl":
        return (NCCL_RESULTS[name], "table") if name in NCCL_RESULTS else ("unknown_failure", "none")
    return "unknown_failure", "none"


def warn_cause(file: str, text: str) -> tuple[str, str]:
    """(cause, how) of an NCCL WARN format (its template rendered, fields as {arg})."""
    if NCCL_BENIGN.search(text):
        return "unknown_failure", "benign"
    for cause, wording in NCCL_WORDING:
        if wording.search(text):
            return cause, "wording"
    if NCCL_INTERNAL.search(text):
        return "unknown_failure", "internal"
    if NCCL_CONNECT.search(text):
        return "nccl_failure", "wording"
    return "unknown_failure", "none"
