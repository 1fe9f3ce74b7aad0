"""The base of every event: the fields each shares (line, origin, pid, cut short).

The event classes live by family in `events_*.py`; `events.py` gathers them."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Event(BaseModel):
    """Fields every event shares."""

    # defer_build: a model's validator is built when the first event of its kind is made, not
    # at import; a log states a dozen of the kinds, and start-up time counts for a CLI.
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
    line: int = 0
    origin: str = ""
    pid: int | None = None
    truncated: bool = False  # the line was cut short; what is here was read before the cut

