"""Which error signals can end a startup attempt when no text says why it failed.

A process death (an exit status, a fatal signal, a kill) is itself a failure; an ERROR line
that no rule knows is one only when a death follows it. Kept apart from timeline.py, which
builds the signals: these functions read only what each event's class declares (`death`,
`role`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol, TypeVar

from triage.model.events.base import Role


class _Declared(Protocol):
    death: bool
    role: Role


class _SignalLike(Protocol):
    @property
    def events(self) -> Sequence[_Declared]: ...


S = TypeVar("S", bound=_SignalLike)


def death_only(signal: _SignalLike) -> bool:
    """A signal that says only that a process ended (an exit status, a kill, a crash)."""
    return all(e.death for e in signal.events)


def ended(signals: Iterable[S]) -> list[S]:
    """Signals that can end an attempt: a logged error line no rule knows counts only when a
    process death follows it, and then only the last such line before the death (it says
    what the process died of)."""
    out: list[S] = []
    pending: S | None = None
    for s in signals:
        if all(e.role is Role.UNEXPLAINED for e in s.events):
            pending = s
            continue
        dead = death_only(s)
        if pending is not None and dead:
            out.append(pending)
        pending = None if dead else pending
        out.append(s)
    return out
