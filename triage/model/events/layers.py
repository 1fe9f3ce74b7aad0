"""Events from the layers under vLLM: accelerator runtimes, the loader, hubs, files, the OS.

Each class is one *family* of failure, whatever the platform or library spells it: a
`CUDA error: X`, a `HIP error: X`, a driver-API `CUDA_ERROR_X:` and the HSA runtime's
memory access fault are all one DeviceError keyed by the error. Rules read the family and
its `error` key, never the platform word (the platform is a field, for the wording of a
report). Texts and versions: ../shared/errors.md.
"""

from __future__ import annotations

from triage.model.events.base import Event, Role, event


@event
class DeviceError(Event, frozen=True, kw_only=True):
    """An accelerator runtime error, keyed by the error (`illegal_address`, `no_kernel_image`...).

    `family` says what kind of problem the key is: `runtime_fault` (a kernel faulted),
    `build_mismatch` (kernels or driver built for something else), `not_visible` (no usable
    device), `peer_access` (P2P between GPUs), `other`."""

    kind = "device_error"
    role = Role.CAUSE
    platform: str = "CUDA"
    error: str
    family: str
    text: str = ""


@event
class LoaderError(Event, frozen=True, kw_only=True):
    """The dynamic loader refused a compiled library: an undefined symbol, a missing `.so`,
    a C library too old. `library` is the file named; `driver` marks libcuda / libnvidia-ml
    (the GPU driver's own libraries, missing when a container has no GPU runtime)."""

    kind = "loader_error"
    role = Role.CAUSE
    problem: str
    library: str | None = None
    symbol: str | None = None
    driver: bool = False


@event
class PackageMismatch(Event, frozen=True, kw_only=True):
    """Installed packages that do not fit together, said in words rather than by the loader:
    a CPU-only torch, vLLM's stale `_C`, a tokenizer file from a newer `tokenizers`."""

    kind = "package_mismatch"
    role = Role.CAUSE
    problem: str
    package: str | None = None


@event
class GpuNotVisible(Event, frozen=True, kw_only=True):
    """No usable accelerator is visible to the process (vLLM's `Failed to infer device type`,
    torch's `No CUDA GPUs are available`, no driver in the container)."""

    kind = "gpu_not_visible"
    role = Role.CAUSE
    problem: str


@event
class HubUnreachable(Event, frozen=True, kw_only=True):
    """The model hub could not be reached and the files are not in the local cache."""

    kind = "hub_unreachable"
    role = Role.CAUSE
    problem: str
    endpoint: str | None = None
    offline: bool = False  # HF_HUB_OFFLINE / local_files_only: the cache lacks the files
    vocab: bool = False  # the tiktoken encoding files (gpt-oss's openai_harmony, tiktoken tokenizers), not the hub


@event
class RemoteCodeRequired(Event, frozen=True, kw_only=True):
    """The model's repo ships its own modelling code, which transformers runs only with
    trust_remote_code: the architecture is not in transformers (or vLLM) itself."""

    kind = "remote_code_required"
    role = Role.CAUSE
    repo: str | None = None


@event
class ModelFilesCorrupt(Event, frozen=True, kw_only=True):
    """Model files present but unreadable: a truncated safetensors, a Git LFS pointer, a bad pickle."""

    kind = "model_files_corrupt"
    role = Role.CAUSE
    problem: str
    lfs_pointer: bool = False


@event
class DiskFull(Event, frozen=True, kw_only=True):
    """A disk (not /dev/shm) is full or over quota: `[Errno 28]` on a cache path, `(os error 28)`,
    the hub's low-disk warning (a prediction: `warning` is true)."""

    kind = "disk_full"
    role = Role.CAUSE
    problem: str
    path: str | None = None
    warning: bool = False
    needed: int | None = None  # bytes the hub wanted to download
    free: int | None = None  # bytes it found free

    def counts_as_error(self, level: str | None, in_traceback: bool, headed: bool) -> bool:
        return not self.warning  # the hub's low-disk warning predicts a failure; it is not one


@event
class NotWritable(Event, frozen=True, kw_only=True):
    """A directory could not be written: `[Errno 13] Permission denied` / `[Errno 30] Read-only
    file system`, or transformers' cache-folder messages. `cache` marks a cache path."""

    kind = "not_writable"
    role = Role.CAUSE
    problem: str
    path: str | None = None
    cache: bool = False


@event
class ConfigInvalid(Event, frozen=True, kw_only=True):
    """vLLM's config classes refused a value (pydantic field errors, a bad revision)."""

    kind = "config_invalid"
    role = Role.CAUSE
    problem: str
    value: str | None = None


@event
class MainGuardMissing(Event, frozen=True, kw_only=True):
    """Python's multiprocessing refused to spawn from a script with no `__main__` guard."""

    kind = "main_guard_missing"
    role = Role.CAUSE
    problem: str = "a new process was started before the script finished its bootstrapping phase"


LAYER_EVENTS = (
    DeviceError,
    LoaderError,
    PackageMismatch,
    GpuNotVisible,
    HubUnreachable,
    ModelFilesCorrupt,
    DiskFull,
    NotWritable,
    ConfigInvalid,
    MainGuardMissing,
)


@event
class NativeError(Event, frozen=True, kw_only=True):
    """An error line in a native layer's own format that no family reads by its meaning (an NCCL
    WARN that two ranks share a GPU or that a CUDA allocation failed, a `CUDA error:` with a
    cuBLAS status or a code the device table does not key): a failure, whose cause the error
    catalogue's native tables name (rules/catalogue/native_errors.json), or none does."""

    kind = "native_error"
    role = Role.CAUSE
    layer: str  # "NCCL", "CUDA", "HIP" ...
    text: str

    def describe(self) -> str | None:
        return f"{self.layer}: {self.text}"
