"""Events of a failure: tracebacks (start, frames, chain notes, the exception), processes that
died, logged errors, and the startup failures that are not about GPU memory."""

from __future__ import annotations

from triage.model.events.base import CHATTER_LEVELS, SERIOUS_LEVELS, Event, FactSink, Role, event
from triage.model.phases import FRAME_PHASES

# --- failures -------------------------------------------------------------------------


@event
class TracebackStart(Event, frozen=True, kw_only=True):
    kind = "traceback_start"


@event
class Frame(Event, frozen=True, kw_only=True):
    """`File "path", line N, in func`."""

    kind = "frame"
    file: str
    lineno: int | None = None
    func: str = ""


@event
class ChainNote(Event, frozen=True, kw_only=True):
    """`The above exception was the direct cause ...` / `During handling ...`."""

    kind = "chain"
    cause: bool = True


@event
class ExceptionRaised(Event, frozen=True, kw_only=True):
    """The last line of a traceback, or an error logged without one: `Type: message`."""

    kind = "exception"
    role = Role.RAISED
    type: str
    message: str = ""

    def counts_as_error(self, level: str | None, in_traceback: bool, headed: bool) -> bool:
        """Raised in a traceback, logged at ERROR, or printed bare; a WARNING that quotes one is not."""
        return in_traceback or level in SERIOUS_LEVELS or not headed


@event
class ProcessDied(Event, frozen=True, kw_only=True):
    """A wrapper saying another process died or failed: `Worker proc X died unexpectedly`..."""

    kind = "process_died"
    role = Role.WRAPPER
    ends_server = death = True
    name: str | None = None
    exit_code: int | None = None
    wrapper: str = ""
    method: str | None = None  # the worker method that raised, when the wrapper names it

    def failed_phase(self) -> str | None:
        return FRAME_PHASES.get(self.method) if self.method else None

    def describe(self) -> str | None:
        return f"{self.wrapper} {self.name or ''}".strip()


@event
class ErrorLine(Event, frozen=True, kw_only=True):
    """A logged ERROR/CRITICAL line that no other event explains (kept as a last resort)."""

    kind = "error_line"
    role = Role.UNEXPLAINED
    message: str

    def describe(self) -> str | None:
        return self.message


# --- startup failures that are not about GPU memory -----------------------------------


@event
class AddressInUse(Event, frozen=True, kw_only=True):
    """`[Errno 98] ... address already in use` (uvicorn's bind, or vLLM's pre-bound socket)."""

    kind = "address_in_use"
    role = Role.CAUSE
    ends_server = True
    host: str | None = None
    port: int | None = None


@event
class HubAuthError(Event, frozen=True, kw_only=True):
    """Hugging Face Hub refused the download: 401/403, a gated or restricted repo."""

    kind = "hub_auth_error"
    role = Role.CAUSE
    status: int | None = None
    repo: str | None = None
    gated: bool = False
    token_rejected: bool = False  # "Invalid credentials in Authorization header": a bad or expired token

    def add_facts(self, facts: FactSink) -> None:
        if self.gated or self.token_rejected:
            # the Hub said why it refused (a gated repo, a bad token): a 401 "Repository Not Found"
            # is then auth, not a typo
            facts.put("hub_refused_auth", True, self)


@event
class RepoNotFound(Event, frozen=True, kw_only=True):
    """`Repository Not Found for url` / 404: a typo, or a private repo seen without a token."""

    kind = "repo_not_found"
    role = Role.CAUSE
    repo: str | None = None
    local: bool = False  # the id is a path (/, ., ~): a folder that is not there, not a Hub typo
    revision: str | None = None  # RevisionNotFoundError: the repo is there, this branch, tag or commit is not


@event
class ArchitectureUnsupported(Event, frozen=True, kw_only=True):
    """`Model architectures ['X'] are not supported for now` (or failed to be inspected)."""

    kind = "architecture_unsupported"
    role = Role.CAUSE
    architectures: tuple[str, ...] = ()
    listed: bool = False  # the architecture is in the supported list the same message printed
    inspect_failed: bool = False


@event
class NotDivisible(Event, frozen=True, kw_only=True):
    """`Total number of attention heads (N) must be divisible by tensor parallel size (M).`"""

    kind = "not_divisible"
    role = Role.CAUSE
    what: str
    total: int
    size: int
    parallel: str = "tensor"


@event
class NotEnoughGpus(Event, frozen=True, kw_only=True):
    """More workers than GPUs: placement-group shortfalls, invalid device ordinals, world size."""

    kind = "not_enough_gpus"
    role = Role.CAUSE
    required: int | None = None
    available: int | None = None
    detail: str = ""


@event
class CapabilityTooLow(Event, frozen=True, kw_only=True):
    """A dtype or quantization needs a newer GPU (compute capability)."""

    kind = "capability_too_low"
    role = Role.CAUSE
    facts = {"compute_capability": "capability"}  # the GPU's: remedies below vLLM's 7.0 floor are none
    feature: str
    gpu: str | None = None
    capability: str | None = None
    required: str | None = None


@event
class TorchArch(Event, frozen=True, kw_only=True):
    """torch's `... with CUDA capability sm_NN is not compatible with the current PyTorch
    installation.`: the GPU's compute capability, which the build-mismatch remedies name."""

    kind = "torch_arch"
    facts = {"compute_capability": "capability"}
    capability: str
    # a warning: start-up goes on and may still succeed. Only where nothing else failed in a short
    # input (a paste of the warning alone, timeline/pasted.py) is it stated as the failure
    alone: bool = False

    def states_cause(self) -> bool:
        return self.alone


@event
class DriverProblem(Event, frozen=True, kw_only=True):
    """Driver / CUDA runtime / kernel build mismatch."""

    kind = "driver_problem"
    role = Role.CAUSE
    problem: str
    found: str | None = None


@event
class NcclError(Event, frozen=True, kw_only=True):
    """NCCL failed: unhandled system/cuda error, internal error, a watchdog timeout."""

    kind = "nccl_error"
    role = Role.CAUSE
    problem: str
    timeout_ms: int | None = None
    op: str | None = None
    seq: int | None = None


@event
class NcclWarn(Event, frozen=True, kw_only=True):
    """NCCL's own WARN line: printed only with NCCL_DEBUG set, and only when NCCL fails (transport,
    bootstrap, network, P2P); a paste of NCCL's output may hold nothing else."""

    kind = "nccl_warn"
    role = Role.CAUSE
    problem: str


@event
class SharedMemoryProblem(Event, frozen=True, kw_only=True):
    """/dev/shm too small: NCCL segment errors, no space left, a bus error."""

    kind = "shm_problem"
    role = Role.CAUSE
    problem: str
    path: str | None = None
    size: int | None = None

    def counts_as_error(self, level: str | None, in_traceback: bool, headed: bool) -> bool:
        return self.problem != "small /dev/shm"  # vLLM's warning that /dev/shm is small predicts, it does not fail


@event
class HostMemoryProblem(Event, frozen=True, kw_only=True):
    """Host RAM ran out: Ray's memory monitor, the OOM killer, a container limit."""

    kind = "host_memory_problem"
    role = Role.CAUSE
    ends_server = True
    problem: str
    used: int | None = None
    total: int | None = None
    threshold: float | None = None
    generic: bool = False  # Ray's list of *possible* causes for a dead worker, not a finding

    def states_cause(self) -> bool:
        return not self.generic  # Ray's "a worker died" list is a wrapper-like error; the others are roots

    def ends_anywhere(self) -> bool:
        return not self.generic


@event
class ArgumentsRejected(Event, frozen=True, kw_only=True):
    """The command line was refused (`error: unrecognized arguments`, bad values)."""

    kind = "usage_error"
    role = Role.CAUSE
    message: str = ""


@event
class RestartCount(Event, frozen=True, kw_only=True):
    """A supervisor restarting the server again (systemd's restart counter)."""

    kind = "restart_count"
    count: int

    def add_facts(self, facts: FactSink) -> None:
        facts.set("restart_count", max(self.count, facts.value("restart_count") or 0), self)


@event
class StopRequested(Event, frozen=True, kw_only=True):
    """Something outside vLLM stopped it: a Kubernetes probe that failed (the kubelet restarts
    the container), or the stop signal vLLM's engine core logs. Before readiness, with no error
    before it, the start ran out of someone's time; after readiness it ends nothing that failed
    (not `ends_server`), so a server stopped on purpose stays healthy."""

    kind = "stop_requested"
    role = Role.CAUSE
    by: str  # "startup probe", "liveness probe", "SIGTERM", ...
    probe: bool = False

    def describe(self) -> str | None:
        return f"stopped by its {self.by}" if self.probe else f"stopped by {self.by}"


@event
class SignalKilled(Event, frozen=True, kw_only=True):
    """A bare `Killed` from a shell, or a fatal signal named by Python/Ray."""

    kind = "killed"
    role = Role.CAUSE
    ends_server = death = True
    signal: str = "SIGKILL"

    def counts_as_error(self, level: str | None, in_traceback: bool, headed: bool) -> bool:
        return level not in CHATTER_LEVELS  # a logger's INFO/WARNING line that reads `Killed` reports no kill here

    def describe(self) -> str | None:
        return self.signal


@event
class ProcessCrash(Event, frozen=True, kw_only=True):
    """A process ended by a fatal signal or a native abort with no Python error to say why
    (`Segmentation fault (core dumped)`, `Fatal Python error: Aborted`, an uncaught native exception, the
    HSA runtime's `Memory access fault by GPU`): the attempt failed even if no rule knows why."""

    kind = "process_crash"
    role = Role.CAUSE
    ends_server = death = True
    signal: str  # SIGSEGV, SIGABRT, SIGILL, SIGFPE
    detail: str = ""

    def counts_as_error(self, level: str | None, in_traceback: bool, headed: bool) -> bool:
        return level not in CHATTER_LEVELS  # a warning that something "may lead to Segmentation fault" is not one

    def describe(self) -> str | None:
        return self.detail or self.signal
