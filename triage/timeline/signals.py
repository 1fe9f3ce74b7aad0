"""What one error-bearing line means: the tracebacks it belongs to (`Traceback`, `Chain`), the
`Signal` it becomes, and the classifiers the timeline asks (is it an error, a root cause, fatal
after readiness, which phase it names). What each kind of event means is declared on its class
(`model.events.base.Event`: its role, the phases it marks or names); these functions combine
those over a line. The timeline (`timeline.py`) only keeps and orders them."""

from __future__ import annotations

from typing import TypeVar

from msgspec import Struct, field

from triage.ingest.lines import Line
from triage.model import events as ev
from triage.model.events.base import CHATTER_LEVELS, Role
from triage.model.phases import phase_of_frames

# Exceptions that mean someone stopped the server on purpose, not that it failed.
SHUTDOWN_TYPES = (
    "KeyboardInterrupt",
    "SystemExit",
    "CancelledError",
    "asyncio.exceptions.CancelledError",
    "concurrent.futures._base.CancelledError",
)
E = TypeVar("E", bound=ev.Event)
DEATH_WINDOW = 400  # lines between an engine's fatal error and the wrapper saying it died


class Traceback(Struct):
    """One printed traceback: its frames (outermost first) and the exception that ends it."""

    start_line: int
    frames: list[ev.Frame] = field(default_factory=list)
    exception: ev.ExceptionRaised | None = None

    @property
    def phase(self) -> str | None:
        return phase_of_frames([(f.file, f.func) for f in self.frames])


class Chain(Struct):
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


class Signal(Struct):
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
    after_stop: bool = False  # after the engine core logged a shutdown it was asked for

    @property
    def root(self) -> bool:
        """A root error states a cause; a wrapper only says that something else failed."""
        if self.cut or any(e.states_cause() for e in self.events):
            return True
        roles = {e.role for e in self.events}  # an exception is the cause, unless a wrapper reports it
        return Role.RAISED in roles and Role.WRAPPER not in roles

    @property
    def weak(self) -> bool:
        """Logged at WARNING or below (a bare error, or a traceback a probe logged and the
        process survived): context or a cause, not yet the failure. It ends the attempt only
        when nothing at ERROR level, raised or printed bare, does."""
        return self.level in CHATTER_LEVELS

    @property
    def implied(self) -> bool:
        """Only figures that imply a failure (no KV cache left), or a traceback the log cut off."""
        return self.cut or all(e.implies_failure() for e in self.events)

    @property
    def shutdown(self) -> bool:
        """Stopped on purpose; `SystemExit: 1` (or a message) is an exit that failed. A report
        that a process ended, after the engine core began a requested shutdown, is that stop."""
        if self.after_stop and all(e.death for e in self.events):
            return True
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
        own = next((p for e in self.events if (p := e.failed_phase())), None)
        return (self.chain.phase if self.chain else None) or own or self.implied_phase or self.origin_phase

    def first(self, cls: type[E]) -> E | None:
        return next((e for e in self.events if isinstance(e, cls)), None)

    def key(self) -> tuple:
        return tuple((type(e), e.content()) for e in self.events)


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
    return any(e.ends_anywhere() for e in signal.events)


def fatal_after_ready(signal: Signal) -> bool:
    """After readiness most errors are per-request and survived; these are not."""
    return any(e.ends_server for e in signal.events) or script_crash(signal)


def script_crash(signal: Signal) -> bool:
    """A traceback that starts in a user's own script (`<module>` outside any package): that
    program ended, whatever vLLM did before it."""
    if signal.chain is None:
        return False
    # any traceback of the chain: the first is often the inner error, caught inside a library
    # ("During handling of the above exception"), and only the last reaches the script's top
    return any(tb.frames and _own_script(tb.frames[0]) for tb in signal.chain.tracebacks)


def _own_script(outer: ev.Frame) -> bool:
    return (
        outer.func == "<module>"
        and "site-packages" not in outer.file
        and "/vllm/" not in outer.file
        and "dist-packages" not in outer.file
        and not outer.file.endswith("/bin/vllm")
    )


def is_error_event(event: ev.Event, line: Line, chain: Chain | None) -> bool:
    """Whether an event makes its line an error signal (its class says; a traceback and the
    line's level can decide)."""
    return event.counts_as_error(line.level, chain is not None, line.headed)
