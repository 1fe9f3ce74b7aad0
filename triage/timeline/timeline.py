"""Events in order -> startup attempts, each with its phases, tracebacks, errors and the fatal one.

A log can hold several startup attempts (restart loops, a retry after a crash). Each
attempt tracks, per origin (process/rank), the phase it reached; assembles tracebacks,
chained ones included; turns error-bearing lines into `Signal`s; and at the end names
the fatal signal: the first root error, or a wrapper when nothing more specific shows.
Memory is bounded whatever the length of the log: only events are kept (never lines); an
attempt keeps its startup (up to a cap) and, past the cap or once serving, a window of the
most recent events, signals and tracebacks, plus the signals that can still end it.
"""

from __future__ import annotations

from msgspec import Struct, field

from triage.ingest.lines import Line
from triage.model import events as ev
from triage.timeline.deaths import death_only, ended
from triage.timeline.signals import (
    DEATH_WINDOW,
    Chain,
    Signal,
    Traceback,
    fatal_after_ready,
    fatal_anywhere,
    is_error_event,
    still_relevant,
)

MAX_EVENTS_PER_ATTEMPT = 20000  # events kept from the start of an attempt, before readiness
RECENT_EVENTS = 2000  # then (and once serving) only the most recent ones
MAX_SIGNALS = 1000  # signals kept from the start of an attempt
RECENT_SIGNALS = 200  # then the most recent ones, and those that can still end the attempt
MAX_KEPT_SIGNALS = 200
RECENT_CHAINS = 64
MAX_TRACEBACKS_PER_CHAIN = 16
MAX_ORIGINS = 256  # processes tracked (phases, open tracebacks); a log with more is hostile
MAX_ATTEMPTS = 64  # the first attempt and the most recent ones
MAX_FRAMES_PER_TRACEBACK = 200
NEARBY_LINES = 6
# How far after a phase-less error a sibling rank's frames may come: the ranks' tracebacks
# interleave, and one OOM message hard-wrapped at 80 columns takes ten lines by itself.
SIBLING_LINES = 30


class Attempt(Struct):
    """One startup attempt: from a banner (or the top of the log) to the next one."""

    index: int
    first_line: int
    last_line: int = 0
    events: list[ev.Event] = field(default_factory=list)
    dropped_events: int = 0
    signals: list[Signal] = field(default_factory=list)
    chains: list[Chain] = field(default_factory=list)
    ready: ev.Ready | None = None
    origin_phase: dict[str, str] = field(default_factory=dict)
    repeats: int = 1
    config_sources: set[str] = field(default_factory=set)  # a source seen twice means a restart
    dropped_signals: int = 0
    stopping: bool = False  # the engine core began a shutdown it was asked for (EngineStopping)
    server: bool = False  # the API server's banner was seen: the engine being up is not yet serving
    engine_up: bool = False  # a server's engine is up; the API server is still building its app
    _head: int = 0  # events[:_head] are the startup's, never dropped
    _kinds: set[str] = field(default_factory=set)

    def add(self, event: ev.Event) -> None:
        self._kinds.add(event.kind)
        self.events.append(event)
        if self.ready is None and len(self.events) <= MAX_EVENTS_PER_ATTEMPT:
            self._head = len(self.events)
        elif len(self.events) - self._head > 2 * RECENT_EVENTS:
            drop = len(self.events) - self._head - RECENT_EVENTS
            del self.events[self._head : self._head + drop]
            self.dropped_events += drop

    def add_signal(self, signal: Signal) -> None:
        self.signals.append(signal)
        if len(self.signals) > MAX_SIGNALS + MAX_KEPT_SIGNALS + 2 * RECENT_SIGNALS:
            middle = self.signals[MAX_SIGNALS:-RECENT_SIGNALS]
            kept = still_relevant(middle)[:MAX_KEPT_SIGNALS]
            self.dropped_signals += len(middle) - len(kept)
            self.signals[MAX_SIGNALS:-RECENT_SIGNALS] = kept

    def add_chain(self, chain: Chain) -> None:
        self.chains.append(chain)
        if len(self.chains) > 2 * RECENT_CHAINS:
            del self.chains[:-RECENT_CHAINS]  # signals hold the chains they need

    @property
    def fatal(self) -> Signal | None:
        """The signal that ended this attempt, or None when it survived or never failed.

        Before readiness the first root error ends the attempt (a wrapper only when no root
        shows). Once the server is ready, errors are per request and survived, except the
        kinds that kill a running server (a dead engine, the port taken, the OOM killer).
        """
        if self.ready is not None:
            live = [
                s
                for s in self.signals
                if not s.shutdown and ((s.after_ready and fatal_after_ready(s)) or fatal_anywhere(s))
            ]
            if live and not any(s.root for s in live):
                cause = self._cause_of_death(live[0])  # an engine that died while serving: why?
                if cause is not None:
                    return cause
        else:
            live = ended(s for s in self.signals if not s.shutdown)  # type: ignore[type-var]
        roots = [s for s in live if s.root]
        # An error raised beats one only logged as a warning, which beats figures that imply one.
        stated = [s for s in roots if not s.implied and not s.weak]
        if stated:
            return stated[0]
        warned = [s for s in roots if not s.implied]
        if warned:
            return warned[0]
        if roots:
            return roots[0]
        if not live:
            return None
        # No error says why and the first signal only says a process died: a later death that
        # states how it ended says more (vLLM's `Failed core proc(s): {'EngineCore': -9}` after
        # its exit-code-less `Engine core process EngineCore died unexpectedly.`).
        if all(e.death for e in live[0].events) and not _exit_code(live[0]):
            coded = [s for s in live[1:] if _exit_code(s)]
            if coded:
                return coded[0]
        return live[0]

    def _cause_of_death(self, wrapper: Signal) -> Signal | None:
        """The root error printed next to a wrapper saying a process died after readiness."""
        near = [
            s
            for s in self.signals
            if s.after_ready and s.root and not s.shutdown and abs(wrapper.line - s.line) <= DEATH_WINDOW
        ]
        return min(near, key=lambda s: abs(wrapper.line - s.line)) if near else None

    @property
    def phase(self) -> str | None:
        from triage.model.phases import later

        out = None
        for p in self.origin_phase.values():
            out = later(out, p)
        return "ready" if self.ready and not self.fatal else out

    def kinds(self) -> set[str]:
        """Every kind of event this attempt stated, those whose events were dropped included."""
        return set(self._kinds)


class Timeline:
    """Consumes (line, events) in log order; `attempts[-1]` is the one a report leads with."""

    def __init__(self) -> None:
        self.attempts: list[Attempt] = [Attempt(index=1, first_line=1)]
        self._open: dict[str, Chain] = {}
        self._last_line_signal: Signal | None = None
        self.dropped_attempts = 0

    @property
    def current(self) -> Attempt:
        return self.attempts[-1]

    def lines_in_use(self) -> set[int]:
        """Line numbers that kept events, signals and tracebacks point at (their evidence)."""
        out: set[int] = set()
        for a in self.attempts:
            out.update(e.line for e in a.events)
            chains = list(a.chains)
            for s in a.signals:
                out.add(s.line)
                out.update(e.line for e in s.events)
                if s.chain is not None:
                    chains.append(s.chain)
            for c in chains:
                for tb in c.tracebacks:
                    out.add(tb.start_line)
                    out.update(f.line for f in tb.frames)
                    if tb.exception is not None:
                        out.add(tb.exception.line)
        return out

    def feed(self, line: Line, events: list[ev.Event]) -> None:
        if not events:
            return
        self._maybe_new_attempt(line, events)
        attempt = self.current
        attempt.last_line = line.no
        error_events: list[ev.Event] = []
        chain = None
        for event in events:
            chain = self._track_traceback(event, line) or chain
            self._track_phase(event, attempt)
            attempt.server = attempt.server or (isinstance(event, ev.EngineConfig) and event.server)
            if isinstance(event, ev.Ready) and attempt.server and event.what.startswith("init engine"):
                attempt.add(event)  # the engine is up; the API server can still fail to build its app
                attempt.engine_up = True
                continue
            if isinstance(event, ev.Ready):
                if attempt.ready is None:
                    attempt.add(event)  # before `ready` is set: the startup's last event, never dropped
                    attempt.ready = event
                continue
            if isinstance(event, ev.Frame) and not _keep_frame(chain):
                continue
            attempt.stopping = attempt.stopping or isinstance(event, ev.EngineStopping)
            attempt.add(event)
            if is_error_event(event, line, chain):
                error_events.append(event)
        if error_events:
            self._signal(line, error_events, chain, attempt)

    def finish(self) -> None:
        """At the end of the log: a traceback still open is a failure the log was cut inside;
        an error that no line placed in a phase takes the phase its sibling ranks' frames show."""
        for each in self.attempts:
            _phase_from_siblings(each)
        attempt = self.current
        if not attempt.chains:
            return
        chain = attempt.chains[-1]
        tb = chain.tracebacks[-1] if chain.tracebacks else None
        if tb is None or tb.exception is not None or not tb.frames:
            return
        after = [s for s in attempt.signals if s.line > tb.frames[-1].line]
        if any(not death_only(s) for s in after):  # type: ignore[arg-type]  # a process exiting after it does not close it
            return
        attempt.add_signal(
            Signal(
                line=tb.frames[-1].line,
                origin=chain.origin,
                pid=tb.frames[-1].pid,
                level=None,
                events=[tb.frames[-1]],
                chain=chain,
                origin_phase=attempt.origin_phase.get(chain.origin),
                after_ready=attempt.ready is not None,
                cut=True,
            )
        )

    def _maybe_new_attempt(self, line: Line, events: list[ev.Event]) -> None:
        attempt = self.current
        sources = {e.source for e in events if isinstance(e, ev.EngineConfig) and (e.version or e.settings)}
        repeated = sources & attempt.config_sources
        if repeated and (attempt.fatal is not None or attempt.ready is not None):
            self.attempts.append(Attempt(index=attempt.index + 1, first_line=line.no))
            self._open.clear()
            if len(self.attempts) > MAX_ATTEMPTS:
                del self.attempts[1]  # a restart loop: keep the first attempt and the latest ones
                self.dropped_attempts += 1
        self.current.config_sources |= sources

    def _track_traceback(self, event: ev.Event, line: Line) -> Chain | None:
        origin = line.origin
        chain = self._open.get(origin)
        if isinstance(event, ev.TracebackStart):
            if chain is None or not chain.open_for_more or len(chain.tracebacks) >= MAX_TRACEBACKS_PER_CHAIN:
                chain = Chain(origin=origin)
                self.current.add_chain(chain)
                self._remember(origin, chain)
            chain.tracebacks.append(Traceback(start_line=line.no))
            chain.open_for_more = False
            return chain
        if isinstance(event, ev.Frame):
            if chain is None or not chain.tracebacks or chain.tracebacks[-1].exception is not None:
                chain = Chain(origin=origin, tracebacks=[Traceback(start_line=line.no)])
                self.current.add_chain(chain)
                self._remember(origin, chain)
            tb = chain.tracebacks[-1]
            if len(tb.frames) < MAX_FRAMES_PER_TRACEBACK:
                tb.frames.append(event)
            return chain
        if isinstance(event, ev.ChainNote):
            if chain is not None:
                chain.open_for_more = True
            return chain
        if isinstance(event, ev.ExceptionRaised):
            if chain is not None and chain.tracebacks and chain.tracebacks[-1].exception is None:
                if "RayTaskError(" in event.type:
                    return chain  # Ray prints the remote traceback after this line: the same traceback goes on
                chain.tracebacks[-1].exception = event
                return chain
            return None
        return None

    def _remember(self, origin: str, chain: Chain) -> None:
        self._open[origin] = chain
        if len(self._open) > MAX_ORIGINS:
            del self._open[next(iter(self._open))]

    def _track_phase(self, event: ev.Event, attempt: Attempt) -> None:
        phase = event.reached_phase()
        if phase and (event.origin in attempt.origin_phase or len(attempt.origin_phase) < MAX_ORIGINS):
            attempt.origin_phase[event.origin] = phase

    def _signal(self, line: Line, events: list[ev.Event], chain: Chain | None, attempt: Attempt) -> None:
        serving = attempt.ready is not None
        signal = Signal(
            line=line.no,
            origin=line.origin,
            pid=line.pid,
            level=line.level,
            events=events,
            chain=chain,
            # a signal after readiness is in phase "ready" whatever its origin reached (Signal.phase):
            # asking the attempt's phase then would look for a fatal signal among all, per signal
            # (once a server's engine is up, another process's error is not in the engine's phase)
            origin_phase=None
            if serving
            else attempt.origin_phase.get(line.origin)
            or (None if attempt.engine_up else attempt.phase or ("starting" if attempt.config_sources else None)),
            after_ready=serving,
            repeats=max(line.repeat, 1),
            after_stop=attempt.stopping,
        )
        if signal.root:  # a real error during the stop: a death after it is its consequence, not the stop
            attempt.stopping = False
        own = next((p for e in events if (p := e.failed_phase())), None)
        if own:  # an error that names its phase also names it for the error just before it
            for previous in reversed(attempt.signals[-4:]):
                if previous.origin == signal.origin and line.no - previous.line <= NEARBY_LINES:
                    previous.implied_phase = previous.implied_phase or own
        key = signal.key()
        for previous in reversed(attempt.signals[-8:]):  # the same error printed twice (logged, then raised)
            if len(previous.events) == len(signal.events) and previous.key() == key:
                previous.repeats += signal.repeats
                if previous.chain is None and chain is not None:
                    previous.chain = chain
                return
        attempt.add_signal(signal)


def _exit_code(signal: Signal) -> bool:
    """Whether a signal's death states the process's exit code."""
    return any(isinstance(e, ev.ProcessDied) and e.exit_code is not None for e in signal.events)


def _phase_from_siblings(attempt: Attempt) -> None:
    """Ranks of one engine run each startup phase together, and a fragment of interleaved
    ranks often prints one rank's error before another rank's frames. An error with no
    phase of its own takes the phase of frames printed within SIBLING_LINES after it (a
    phase past `starting`: the generic frames of a dying process say nothing)."""
    for signal in attempt.signals:
        if signal.after_ready or signal.phase is not None:
            continue
        for chain in attempt.chains:
            first = next((f.line for tb in chain.tracebacks for f in tb.frames), None)
            if first is None or not 0 < first - signal.line <= SIBLING_LINES:
                continue
            phase = chain.phase
            if phase is not None and phase != "starting":
                signal.implied_phase, signal.phase_line = phase, first
                signal.sibling_frames = [f.func for f in chain.frames][:MAX_FRAMES_PER_TRACEBACK]
                break


def _keep_frame(chain: Chain | None) -> bool:
    return chain is not None
