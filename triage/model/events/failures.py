"""Events of a failure: tracebacks (start, frames, chain notes, the exception), processes that
died, logged errors, and the startup failures that are not about GPU memory."""

from __future__ import annotations

from typing import Literal

from triage.model.events.base import Event


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
