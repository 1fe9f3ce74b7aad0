"""The base of every event: the fields each shares (line, origin, pid, cut short), and what a
class of event means to the stages after the parser, declared on the class.

An event is a frozen, keyword-only `msgspec.Struct` (cheap to define: a run defines ~70 of
them): it is built by our transformer from parsed text, so it needs no validation, and a plain
class keeps pydantic out of importing the events (a stage that only reads logs need not load it).
What a kind of event *means* (is it an error, does it state a cause, which phase does it
mark, which figures does it give) is a class attribute, so adding a family is one class:
the timeline and the facts read the class, not tables keyed by kind names.

The classes live by family (`memory.py`, `progress.py`, `failures.py`, `evidence.py`,
`layers.py`); `__init__.py` gathers them.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any, ClassVar, Protocol, TypeVar

from msgspec import Struct

# Levels at which a line only mentions a crash (a warning that something may segfault).
CHATTER_LEVELS = frozenset({"INFO", "WARNING", "DEBUG"})
SERIOUS_LEVELS = frozenset({"ERROR", "CRITICAL"})
# The fields every event has: where it was said, not what.
WHERE = frozenset({"line", "origin", "pid", "truncated"})
EventT = TypeVar("EventT", bound="Event")


class Role(Enum):
    """What an event of a class is to the timeline."""

    CONTEXT = "context"  # progress, figures, evidence: an error only where `states_cause` says so
    CAUSE = "cause"  # an error that states why a startup failed (a root error)
    WRAPPER = "wrapper"  # says that another process or call failed, not why
    RAISED = "raised"  # an exception: a cause, unless a wrapper on the same line reports it
    UNEXPLAINED = "unexplained"  # a logged ERROR line no other event explains (a last resort)


class FactSink(Protocol):
    """Where an event's figures go (`timeline.facts.Facts`); named here so events need not
    import the timeline."""

    def put(self, name: str, value: Any, event: Event | None, line: int | None = None) -> None: ...

    def set(self, name: str, value: Any, event: Event) -> None: ...

    def value(self, name: str) -> Any: ...

    def __contains__(self, name: object) -> bool: ...


def event(cls: type[EventT]) -> type[EventT]:
    """Register an event class under its `kind` (the class itself is a frozen, keyword-only
    Struct: each subclass says `frozen=True, kw_only=True` too, as msgspec and type checkers
    read them per class). Its repr, equality (same class, same fields) and hash are msgspec's."""
    kind = cls.__dict__.get("kind")
    if kind:
        if kind in KINDS:
            raise TypeError(f"two event classes say kind {kind!r}: {KINDS[kind].__name__} and {cls.__name__}")
        KINDS[kind] = cls
    return cls


# kind -> class, filled as each family's module defines its classes: the parser finds a
# class by the `kind` its transformer names, so no hand-kept table lists them.
KINDS: dict[str, type] = {}


class Event(Struct, frozen=True, kw_only=True):
    """Fields every event shares, and the class attributes that say what its kind means."""

    kind: ClassVar[str] = ""  # the name rules use (`when: {event: torch_oom}`)
    role: ClassVar[Role] = Role.CONTEXT
    ends_server: ClassVar[bool] = False  # ends a server that was already serving (most errors then are per request)
    death: ClassVar[bool] = False  # says that a process ended (an exit status, a kill, a crash)
    reached: ClassVar[str | None] = None  # the phase a process is in once it prints this
    failed_in: ClassVar[str | None] = None  # the phase an error of this kind names, whatever the frames say
    # fact name -> field: the figures this event gives (`timeline.facts`); `add_facts` does the rest
    facts: ClassVar[Mapping[str, str]] = {}

    line: int = 0
    origin: str = ""
    pid: int | None = None
    truncated: bool = False  # the line was cut short; what is here was read before the cut

    def states_cause(self) -> bool:
        """A root error: it says why the startup failed (a wrapper only says that something did)."""
        return self.role is Role.CAUSE or self.implies_failure()

    def implies_failure(self) -> bool:
        """Figures that mean vLLM is about to raise (no KV cache left): the log may stop before it does."""
        return False

    def counts_as_error(self, level: str | None, in_traceback: bool, headed: bool) -> bool:
        """Whether this event, on a line at `level`, makes the line an error signal."""
        return self.role is not Role.CONTEXT or self.states_cause()

    def ends_anywhere(self) -> bool:
        """A kill that ends the run wherever it is reported (an orchestrator's note pasted above the log)."""
        return False

    def reached_phase(self) -> str | None:
        return self.reached

    def failed_phase(self) -> str | None:
        return self.failed_in

    def describe(self) -> str | None:
        """The failure's message when this event ends an attempt with no exception to quote."""
        return None

    def add_facts(self, facts: FactSink) -> None:
        """Figures that are not one field each (a maximum, a constant, a condition); most classes need none."""

    def content(self) -> tuple[Any, ...]:
        """What the event says, without where: two lines saying the same thing compare equal."""
        return tuple(getattr(self, name) for name in self.__struct_fields__ if name not in WHERE)


def event_fields(cls: type[Event]) -> tuple[str, ...]:
    """The data fields of an event class (what a rule may read)."""
    return cls.__struct_fields__
