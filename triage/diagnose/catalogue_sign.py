"""The catalogue sign of a failed attempt: is its error one of vLLM's own known messages?

Asked only when no specific rule explained the attempt (fallback rules read it as
`catalogue`), so a healthy log or a hand-diagnosed one never loads the catalogue. The
messages tried, in order: the fatal chain's exceptions (its root first), the attempt's other
errors (ERROR lines, exceptions, latest first), then, for a short excerpt, each of its lines
that is not logged at INFO/WARNING/DEBUG (a pasted line often has no traceback around it).
Lines the fast scanner did not hand on (a pydantic "Value error, ..." line, the later lines
of a hub error) are read from the input's last bytes (`ingest/last_bytes.py`), decoded only here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, MutableMapping

from triage.ingest.lines import logged_as_chatter
from triage.model import events as ev
from triage.timeline.signals import Signal
from triage.timeline.timeline import Attempt

EXCERPT_LINES = 40  # an attempt this short is an excerpt: each of its lines is tried
FOLLOWING = 8  # lines after the fatal one that may continue its message
MAX_MESSAGES = 120  # messages tried at most (a long log's error lines, latest first)
TailLines = Callable[[], list[tuple[int, str]]]  # the input's last lines, numbered and redacted


def catalogue_sign(
    attempt: Attempt, fatal: Signal, texts: MutableMapping[int, tuple[str, str]], tail: TailLines | None = None
):
    """The first catalogue hit among the attempt's error messages, or None. A hit on a line
    the report holds no text for gets it (the hit is evidence). None of them catalogued: the
    fatal exception read as the catalogue's build reads vLLM's source (`uncatalogued.py`)."""
    from triage.diagnose.uncatalogued import uncatalogued_hit
    from triage.parse.catalogue import catalogue

    lines = dict(texts)
    if tail is not None:
        for no, text in tail():
            lines.setdefault(no, ("", text))
    hit = catalogue().first_hit(_messages(attempt, fatal, lines)) or uncatalogued_hit(fatal)
    if hit is not None and hit.line not in texts and hit.line in lines:
        texts[hit.line] = lines[hit.line]
    return hit


def _messages(attempt: Attempt, fatal: Signal, texts: Mapping[int, tuple[str, str]]) -> Iterator[tuple[int, str]]:
    seen: set[tuple[int, str]] = set()
    for item in _candidates(attempt, fatal, texts):
        if item not in seen and len(seen) < MAX_MESSAGES:
            seen.add(item)
            yield item


def _candidates(attempt: Attempt, fatal: Signal, texts: Mapping[int, tuple[str, str]]) -> Iterator[tuple[int, str]]:
    chain = fatal.chain
    for tb in chain.tracebacks if chain else []:
        if tb.exception is not None:
            yield tb.exception.line, _said(tb.exception)
    if fatal.exception is not None:
        yield fatal.exception.line, _said(fatal.exception)
    for no in range(fatal.line + 1, fatal.line + 1 + FOLLOWING):  # a message's later lines (pydantic's, the hub's)
        if no in texts and not logged_as_chatter(texts[no][1]):
            yield no, texts[no][1]
    for e in reversed(attempt.events):
        if isinstance(e, ev.ExceptionRaised):
            yield e.line, _said(e)
        elif isinstance(e, ev.ErrorLine):
            yield e.line, e.message
    first, last = attempt.first_line, attempt.last_line or max(texts, default=0)
    if last - first < EXCERPT_LINES:
        for no in range(first, last + 1):
            if no in texts and not logged_as_chatter(texts[no][1]):
                yield no, texts[no][1]


def _said(exc: ev.ExceptionRaised) -> str:
    return f"{exc.type}: {exc.message}"
