"""`vllm-triage --follow FILE`: tail a log being written, from its start, until the server is
ready, a failure has been reported (with the burst around it), or the timeout passes.

Ready means the HTTP server listens (or an offline run generated), not that the engine is
built: `init engine ... took` and `Available routes are:` come before the port is bound, and
uvicorn prints `Application startup complete.` before it binds a port it was given by number
(a bind error follows it). So `Uvicorn running on` and a first generation are ready at once;
`Application startup complete.` and `Starting vLLM API server` are ready once no error line
follows them: the next lines are read, and the log must be quiet READY_QUIET seconds (vLLM
prints nothing more until served; it binds its own socket first, so uvicorn says no more).
"""

from __future__ import annotations

import time
from typing import IO

from triage.apps import filters
from triage.apps.exit_codes import exit_code
from triage.apps.live.feed import Watch
from triage.apps.output import emit
from triage.errors import InputError, UsageError
from triage.ingest.fifo import no_input
from triage.ingest.read import MAX_LINE_CHARS, last_frame
from triage.ingest.tail import Tail as _Tail
from triage.model import events as ev
from triage.model.report import Report
from triage.pipeline import Options, load_rules

FOLLOW_POLL = 0.1
READY_QUIET = 1.0  # after a "listening soon" line: no error within this long is ready
# Lines that say the server listens (or an offline run generated): ready at once.
LISTENING = ("Uvicorn running on", "Processed prompts:", "Avg prompt throughput:")
# Lines printed just before the bind (by uvicorn) or with the socket already bound (vLLM):
# ready once nothing follows them for READY_QUIET.
LISTENING_SOON = ("Application startup complete.", "Starting vLLM API server", "Starting vLLM server on")


def follow_command(args, stdout: IO[str]) -> int:
    """`vllm-triage --follow FILE [--timeout S]`: 0 ready or nothing found, 1 a failure found."""
    if args.follow is None:
        raise UsageError("--timeout goes with --follow")
    if args.paths:
        raise UsageError("--follow reads one log; give no other LOG")
    if args.timeout is not None and args.timeout < 0:
        raise UsageError("--timeout must not be negative")
    if sum(1 for _, out in args.outputs if out is None) > 1:
        raise UsageError("more than one --format writes to stdout; give the others an --output FILE")
    options = Options(redact=not args.no_redact, extra_rules=args.rules, max_bytes=args.max_bytes)
    report, ready = follow(args.follow, args.timeout, options, load_rules(args.rules))
    report = filters.apply(report, args.ignore, args.min_confidence)
    healthy = report.outcome in ("healthy", "recovered")
    for fmt, out in args.outputs or [(None, None)]:
        if out is not None or not healthy:  # once ready, stdout gets one line (files still get the report)
            emit(
                report,
                "quiet" if args.quiet and out is None else fmt,
                out,
                stdout,
                args.color,
                args.width,
            )
    if healthy:
        where = f" (line {ready[0]}: {ready[1]!r})" if ready is not None else ""
        from triage.render.sanitise import clean

        stdout.write(clean(f"vllm-triage: {report.input.name}: ready{where}", name=True) + "\n")
        return 0
    return exit_code([report])


def follow(path: str, timeout: float | None, options: Options, rules: list) -> tuple[Report, tuple[int, str] | None]:
    """Tail PATH from its start until readiness, a fatal event (plus its burst) or the timeout.

    Returns the report and the (line number, words) that said ready, if one did."""
    deadline = None if timeout is None else time.monotonic() + timeout
    tail = _Tail(path)
    while not tail.open():
        if deadline is not None and time.monotonic() >= deadline:
            raise InputError(f"no such file: {path} (waited {timeout:g} s)")
        time.sleep(FOLLOW_POLL)
    watch = Watch(path, options, rules)
    scan = _ReadyScan()
    last_data = time.monotonic()
    try:
        while not (
            watch.settled(last_data)
            or watch.broken
            or tail.ended
            or (deadline is not None and time.monotonic() >= deadline)
        ):
            data = tail.read()
            if not data:
                if scan.soon is not None and time.monotonic() - last_data >= READY_QUIET and watch.fatal_at is None:
                    scan.ready = scan.soon
                    break
                time.sleep(FOLLOW_POLL)
                continue
            last_data = time.monotonic()
            watch.feed.write(data)
            if scan.scan(data):
                break
    finally:
        tail.close()
    report = watch.finish()
    if tail.fifo and not tail.received:  # an empty pipe is no log, not a healthy or unfinished one
        raise no_input(
            path,
            "its writer closed it without writing anything"
            if tail.ended
            else f"nothing was written to it{'' if timeout is None else f' within {timeout:g} s'}",
        )
    return report, scan.ready if report.outcome in ("healthy", "recovered") else None


class _ReadyScan:
    """Reads each complete line for the words that say the server listens.

    `ready`: a line that settles it (returned at once); `soon`: the last line that will once
    the log stays quiet with no fatal event seen (an error after it makes the report failed).
    """

    def __init__(self) -> None:
        self.partial = b""
        self.line = 0
        self.ready: tuple[int, str] | None = None
        self.soon: tuple[int, str] | None = None

    def scan(self, data: bytes) -> bool:
        """True once a line says the server listens; else notes a "soon" line."""
        lines = (self.partial + data).split(b"\n")
        self.partial = lines.pop()[-MAX_LINE_CHARS:]
        for raw in lines:
            self.line += 1
            text = last_frame(raw.decode("utf-8", "replace"))
            words = _ready_words(text)
            if words in LISTENING:
                self.ready = (self.line, words)
                return True
            if words is not None:
                self.soon = (self.line, words)
        return False


def _ready_words(raw: str) -> str | None:
    """The readiness words a line carries, if the parser reads it as a Ready event."""
    from triage.ingest.lines import peel
    from triage.parse.parse import parse_line_detail
    from triage.parse.vocabulary import prefilter

    if not prefilter(raw):
        return None
    events, _ = parse_line_detail(peel(raw, 0))
    for event in events:
        if isinstance(event, ev.Ready):
            what = event.what.strip()
            return next((w for w in LISTENING + LISTENING_SOON if what.startswith(w)), None)
    return None
