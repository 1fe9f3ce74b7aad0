"""A message pasted alone: one of vLLM's own error messages, with nothing around it.

Users paste the sentence vLLM printed, without the `ValueError:` before it, the traceback or
the logger's header ("No available memory for the cache blocks. Try increasing ..."), or
pydantic's `Value error, ... [type=value_error, ...]` line without its first line. Such a
paste shows no error by its form; what it says is one of vLLM's own error messages, which
the error catalogue knows by their text, with the class vLLM raises them with. A short input
in which nothing failed and nothing was ready is asked: its first line (not logged at
INFO/WARNING/DEBUG) that is a catalogued message is read as that exception, raised, so the
rules read it as they read the same message pasted with its class.

Only a short input that showed no failure is asked, so a whole log, a healthy one, or one
whose failure is already read never loads the catalogue.
"""

from __future__ import annotations

from collections.abc import Callable

from triage.ingest.lines import Line, logged_as_chatter, peel
from triage.model import events as ev
from triage.patterns import LazyPattern
from triage.timeline.timeline import Timeline

MAX_LINES = 40  # a paste: every line of it is asked (the excerpt's size, diagnose/catalogue_sign.py)
# pydantic's line for a validator's ValueError: `  Value error, MESSAGE [type=value_error, input_value=...]`
_PYDANTIC = LazyPattern(r"^\s*Value error, (?P<msg>.*?)(?:\s+\[type=value_error\b.*)?$")
_CLASS = LazyPattern(r"[A-Z]\w*")


def unexplained_paste(timeline: Timeline, lines: int) -> bool:
    """A short input in which nothing failed and no server came up."""
    return lines <= MAX_LINES and not any(a.fatal is not None or a.ready is not None for a in timeline.attempts)


def pasted_message(texts: list[tuple[int, str]]) -> tuple[int, str, str] | None:
    """(line, text, class) of the first line that is one of vLLM's catalogued error messages:
    the class vLLM raises it with, or `Error` for one it logs at ERROR. None catalogued: the
    first that words a refusal the way vLLM words one cause (`message_causes.refusal_cause`), as `Error`."""
    from triage.parse.catalogue import catalogue
    from triage.parse.message_causes import refusal_cause

    others = []
    for no, text in texts[:MAX_LINES]:
        if logged_as_chatter(text):
            continue
        m = _PYDANTIC.match(text)
        message = m.group("msg") if m else text
        hit = catalogue().match(message)
        if hit is not None:
            return no, message, hit["exception"] if _CLASS.fullmatch(hit["exception"]) else "Error"
        others.append((no, message))
    # the refusal is read in the message the line holds behind its prefixes (a chat client's, a quote, a gutter)
    return next(((no, message, "Error") for no, message in others if refusal_cause(peel(message, no).text)), None)


def with_message(kept: list[tuple[Line, list[ev.Event]]], found: tuple[int, str, str]) -> Timeline:
    """The timeline again, the pasted message's line stating it as raised (the line as parsed,
    with what else it stated, when the scanner handed it on)."""
    no, text, cls = found
    had = [(ln, evs) for ln, evs in kept if ln.no == no]
    line, events = had[0] if had else (Line(no=no, text=text, raw=text), [])
    message = line.text if had and not _PYDANTIC.match(line.text) else text  # without the logger's header
    mine = (line, [*events, ev.ExceptionRaised(line=no, origin=line.origin, pid=line.pid, type=cls, message=message)])
    return _timeline_of(sorted([*(le for le in kept if le[0].no != no), mine], key=lambda le: le[0].no))


def _timeline_of(kept: list[tuple[Line, list[ev.Event]]]) -> Timeline:
    timeline = Timeline()
    for each, evs in kept:
        timeline.feed(each, evs)
    timeline.finish()
    return timeline


def _warnings_stated(kept: list[tuple[Line, list[ev.Event]]]) -> list[tuple[Line, list[ev.Event]]] | None:
    """The lines again, torch's GPU-capability warning stated as the failure (a paste of the
    warning alone: errors.md trap 13, it predicts the failure); None when none is there."""
    from msgspec.structs import replace

    out = [(ln, [replace(e, alone=True) if isinstance(e, ev.TorchArch) else e for e in evs]) for ln, evs in kept]
    return out if any(isinstance(e, ev.TorchArch) for _, evs in kept for e in evs) else None


def read_pasted(
    timeline: Timeline, kept: list[tuple[Line, list[ev.Event]]], lines: int, tail: Callable[[], list[tuple[int, str]]]
) -> tuple[Timeline, tuple[int, str] | None]:
    """(the timeline, the pasted message's (line, text) for the report) when the input is a
    paste of one of vLLM's messages alone; else the timeline unchanged and None."""
    if not unexplained_paste(timeline, lines):
        return timeline, None
    warned = _warnings_stated(kept)
    if warned is not None:
        return _timeline_of(warned), None
    texts = tail()
    found = pasted_message(texts)
    if found is None:
        return timeline, None
    raw = next(text for no, text in texts if no == found[0])
    return with_message(kept, found), (found[0], raw)
