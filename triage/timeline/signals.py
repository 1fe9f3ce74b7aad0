"""What one error-bearing line means: the tracebacks it belongs to (`Traceback`, `Chain`), the
`Signal` it becomes, and the classifiers the timeline asks (is it an error, a root cause, fatal
after readiness, which phase it names). The timeline (`timeline.py`) only keeps and orders them."""

from __future__ import annotations

from dataclasses import dataclass, field

from triage.model import events as ev
from triage.ingest.lines import Line
from triage.model.phases import FRAME_PHASES, phase_of_frames

ROOT_KINDS = frozenset({
    "torch_oom", "cuda_error_oom", "cpu_alloc_failed", "kv_too_small", "kv_needed", "no_cache_memory",
    "sampler_warmup_oom", "load_model_oom", "profiling_mismatch", "address_in_use", "hub_auth_error",
    "repo_not_found", "architecture_unsupported", "not_divisible", "not_enough_gpus", "capability_too_low",
    "driver_problem", "nccl_error", "usage_error", "killed", "process_crash",
    # the layers under vLLM (events_layers.py)
    "device_error", "loader_error", "package_mismatch", "gpu_not_visible", "hub_unreachable", "model_files_corrupt",
    "disk_full", "not_writable", "config_invalid", "main_guard_missing",
})
# Errors that end a server that was already serving (the rest after readiness are per request).
FATAL_AFTER_READY = frozenset({"process_died", "cpu_alloc_failed", "address_in_use", "host_memory_problem", "killed",
                               "process_crash"})
# Levels at which a line only mentions a crash (a warning that something may segfault).
CHATTER_LEVELS = frozenset({"INFO", "WARNING", "DEBUG"})
# Exceptions that mean someone stopped the server on purpose, not that it failed.
SHUTDOWN_TYPES = ("KeyboardInterrupt", "SystemExit", "CancelledError", "asyncio.exceptions.CancelledError",
                  "concurrent.futures._base.CancelledError")
SERIOUS_LEVELS = frozenset({"ERROR", "CRITICAL"})
# Error events that say which phase failed, whatever the frames or phase lines said.
IMPLIED_PHASES = {
    "cache_blocks": "kv_cache_allocation", "memory_profile": "kv_cache_allocation",
    "kv_cache_memory": "kv_cache_allocation", "max_concurrency": "kv_cache_allocation",
    "sampler_warmup_oom": "profiling", "load_model_oom": "loading_weights", "kv_needed": "kv_cache_allocation",
    "kv_too_small": "kv_cache_allocation", "no_cache_memory": "kv_cache_allocation",
}
DEATH_WINDOW = 400  # lines between an engine's fatal error and the wrapper saying it died


@dataclass
class Traceback:
    """One printed traceback: its frames (outermost first) and the exception that ends it."""

    start_line: int
    frames: list[ev.Frame] = field(default_factory=list)
    exception: ev.ExceptionRaised | None = None

    @property
    def phase(self) -> str | None:
        return phase_of_frames([(f.file, f.func) for f in self.frames])


@dataclass
class Chain:
    """Tracebacks joined by "The above exception was the direct cause ..." in one origin."""

    origin: str
    tracebacks: list[Traceback] = field(default_factory=list)
    open_for_more: bool = False

    @property
    def phase(self) -> str | None:
        for tb in reversed(self.tracebacks):  # the wrapper's frames reach the caller's phase
            if tb.phase:
                return tb.phase
        return None

    @property
    def frames(self) -> list[ev.Frame]:
        return [f for tb in self.tracebacks for f in tb.frames]


@dataclass
class Signal:
    """Everything error-like that one line says, with where and when it happened."""

    line: int
    origin: str
    pid: int | None
    level: str | None
    events: list[ev.Event]
    chain: Chain | None = None
    origin_phase: str | None = None
    after_ready: bool = False
    repeats: int = 1
    cut: bool = False  # a traceback the log stops inside: a failure whose message is lost

    @property
    def root(self) -> bool:
        """A root error states a cause; a wrapper only says that something else failed."""
        if self.cut:
            return True
        kinds = {e.kind for e in self.events}
        if kinds & ROOT_KINDS or any(no_kv_cache(e) for e in self.events):
            return True
        if any(isinstance(e, ev.SharedMemoryProblem) for e in self.events):
            return True
        if any(isinstance(e, ev.HostMemoryProblem) and not e.generic for e in self.events):
            return True
        if any(e.kind == "startup_free_memory" and e.is_error for e in self.events):  # type: ignore[attr-defined]
            return True
        if any(e.kind == "swap_space" and e.is_error for e in self.events):  # type: ignore[attr-defined]
            return True
        return "exception" in kinds and "process_died" not in kinds

    @property
    def weak(self) -> bool:
        """Logged at WARNING or below (a bare error, or a traceback a probe logged and the
        process survived): context or a cause, not yet the failure. It ends the attempt only
        when nothing at ERROR level, raised or printed bare, does."""
        return self.level in CHATTER_LEVELS

    @property
    def implied(self) -> bool:
        """Only figures that imply a failure (no KV cache left), or a traceback the log cut off."""
        return self.cut or all(no_kv_cache(e) for e in self.events)

    @property
    def shutdown(self) -> bool:
        """Stopped on purpose; `SystemExit: 1` (or a message) is an exit that failed."""
        exc = self.exception
        if exc is not None and exc.type.endswith("SystemExit") and exc.message.strip() not in ("", "0", "None"):
            return False
        return exc is not None and exc.type.endswith(SHUTDOWN_TYPES)

    @property
    def exception(self) -> ev.ExceptionRaised | None:
        return next((e for e in self.events if isinstance(e, ev.ExceptionRaised)), None)

    implied_phase: str | None = None  # from an error that follows and names the phase
    phase_line: int | None = None  # the sibling rank's frame line that gave implied_phase
    sibling_frames: list[str] = field(default_factory=list)  # that sibling's frame functions

    @property
    def phase(self) -> str | None:
        if self.after_ready:
            return "ready"
        own = next((p for e in self.events if (p := implied_phase(e))), None)
        return (self.chain.phase if self.chain else None) or own or self.implied_phase or self.origin_phase

    def first(self, kind: str) -> ev.Event | None:
        return next((e for e in self.events if e.kind == kind), None)

    def key(self) -> tuple:
        return tuple((e.kind, e.model_dump_json(exclude={"line", "origin", "pid", "truncated"})) for e in self.events)




def still_relevant(signals: list[Signal]) -> list[Signal]:
    """Of signals about to be dropped, those that can still decide the fatal one: any before
    readiness, those that end a serving server, and root errors near those (their cause)."""
    enders = {id(s) for s in signals if not s.after_ready or fatal_after_ready(s) or fatal_anywhere(s)}
    lines = [s.line for s in signals if id(s) in enders]
    return [s for s in signals if id(s) in enders or (s.root and near(lines, s.line))]


def near(lines: list[int], line: int) -> bool:
    from bisect import bisect_left

    i = bisect_left(lines, line - DEATH_WINDOW)
    return i < len(lines) and lines[i] <= line + DEATH_WINDOW


def fatal_anywhere(signal: Signal) -> bool:
    """A kill reported out of order (an orchestrator's note pasted above the log) still ends the run."""
    return any(isinstance(e, ev.HostMemoryProblem) and not e.generic for e in signal.events)


def fatal_after_ready(signal: Signal) -> bool:
    """After readiness most errors are per-request and survived; these are not."""
    return any(e.kind in FATAL_AFTER_READY for e in signal.events) or script_crash(signal)


def script_crash(signal: Signal) -> bool:
    """A traceback that starts in a user's own script (`<module>` outside any package): that
    program ended, whatever vLLM did before it."""
    if signal.chain is None or not signal.chain.tracebacks or not signal.chain.tracebacks[0].frames:
        return False
    outer = signal.chain.tracebacks[0].frames[0]
    return outer.func == "<module>" and "site-packages" not in outer.file and "/vllm/" not in outer.file \
        and "dist-packages" not in outer.file




def no_kv_cache(event: ev.Event) -> bool:
    """Figures that mean vLLM is about to raise: no KV cache at all, or not one full request.

    vLLM raises right after printing these, so a log cut short before the traceback
    still failed here.
    """
    if isinstance(event, ev.CacheBlocks):
        return event.gpu_blocks == 0
    if isinstance(event, ev.MemoryProfile):
        return event.kv_cache is not None and event.kv_cache < 0
    if isinstance(event, ev.KvCacheMemory):
        return event.bytes <= 0
    if isinstance(event, ev.MaxConcurrency):
        return event.factor < 1.0
    return False



def implied_phase(event: ev.Event) -> str | None:
    if isinstance(event, ev.ProcessDied) and event.method:
        return FRAME_PHASES.get(event.method)
    return IMPLIED_PHASES.get(event.kind)




def is_error_event(event: ev.Event, line: Line, chain: Chain | None) -> bool:
    if isinstance(event, ev.ErrorLine):
        return True
    if isinstance(event, ev.ProcessCrash):
        return line.level not in CHATTER_LEVELS
    if event.kind == "disk_full" and getattr(event, "warning", False):
        return False  # the hub's low-disk warning predicts a failure; it is not one
    if event.kind in ROOT_KINDS or event.kind == "process_died":
        return True
    if no_kv_cache(event):
        return True
    if isinstance(event, ev.SharedMemoryProblem):
        return event.problem != "small /dev/shm"
    if isinstance(event, ev.HostMemoryProblem):
        return True  # Ray's "a worker died" is a wrapper-like signal; the others are roots
    if isinstance(event, (ev.StartupFreeMemory, ev.SwapSpace)):
        return event.is_error
    if isinstance(event, ev.ExceptionRaised):
        in_traceback = chain is not None
        return in_traceback or line.level in SERIOUS_LEVELS or not line.headed
    return False


def phase_of_event(event: ev.Event) -> str | None:
    if isinstance(event, ev.PhaseMark):
        return event.phase
    if isinstance(event, ev.WeightsLoaded):
        return "profiling"
    if isinstance(event, (ev.MemoryBudget, ev.MemoryProfile, ev.KvCacheMemory, ev.CacheBlocks, ev.KvCacheTokens)):
        return "kv_cache_allocation"
    if isinstance(event, ev.GraphCaptureDone):
        return "cuda_graph_capture"
    return None
