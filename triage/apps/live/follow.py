"""`vllm-triage --follow FILE`: tail a log being written, from its start, until the server is
ready, a failure has been reported (with the burst around it), or the timeout passes."""

from __future__ import annotations

import time
from typing import IO

from triage.model import events as ev
from triage.errors import InputError, UsageError
from triage.apps.exit_codes import exit_code
from triage.apps.live.feed import Watch
from triage.apps.output import emit
from triage.pipeline import Options, load_rules
from triage.ingest.read import MAX_LINE_CHARS, last_frame
from triage.model.report import Report
from triage.ingest.tail import Tail as _Tail

FOLLOW_POLL = 0.1



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
    healthy = report.outcome in ("healthy", "recovered")
    for fmt, out in args.outputs or [(None, None)]:
        if out is not None or not healthy:  # once ready, stdout gets one line (files still get the report)
            emit(report, fmt, out, stdout, options.redact, args.color, args.width)
    if healthy:
        where = f" (line {ready.line}: {ready.what.strip()!r})" if ready is not None else ""
        from triage.render.sanitise import clean

        stdout.write(clean(f"vllm-triage: {report.input.name}: ready{where}", name=True) + "\n")
        return 0
    return exit_code([report])


def follow(path: str, timeout: float | None, options: Options, rules: list) -> tuple[Report, ev.Ready | None]:
    """Tail PATH from its start until readiness, a fatal event (plus its burst) or the timeout."""
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
        while not (watch.settled(last_data) or watch.broken
                   or (deadline is not None and time.monotonic() >= deadline)):
            data = tail.read()
            if not data:
                time.sleep(FOLLOW_POLL)
                continue
            last_data = time.monotonic()
            watch.feed.write(data)
            if scan.ready_in(data):
                break
    finally:
        tail.close()
    return watch.finish(), watch.ready


class _ReadyScan:
    """Asks the pipeline's parser whether a complete line says the server is ready.

    The pipeline holds each line until the next one arrives (to re-join hard-wrapped
    messages), and vLLM says nothing after "Application startup complete." until served.
    """

    def __init__(self) -> None:
        self.partial = b""

    def ready_in(self, data: bytes) -> bool:
        lines = (self.partial + data).split(b"\n")
        self.partial = lines.pop()[-MAX_LINE_CHARS:]
        return any(_says_ready(raw.decode("utf-8", "replace")) for raw in lines)


def _says_ready(raw: str) -> bool:
    from triage.ingest.lines import peel
    from triage.parse.parse import parse_line_detail
    from triage.parse.vocabulary import prefilter

    raw = last_frame(raw)
    if not prefilter(raw):
        return False
    events, _ = parse_line_detail(peel(raw, 0))
    return any(isinstance(e, ev.Ready) for e in events)
