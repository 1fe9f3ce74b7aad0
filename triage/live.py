"""Live use: `vllm-triage run -- CMD` wraps a starting server, `--follow FILE` tails its log.

Both hand the bytes, as they arrive, to the same `pipeline.run` the batch CLI uses; a
thread runs it over a bounded `Feed`, and its `on_event` hook notes the fatal event so
the report can be printed while the server is still shutting down. Nothing here
parses a log beyond asking the pipeline's own parser whether a line says "ready".
"""

from __future__ import annotations

import codecs
import dataclasses
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import IO

from . import events as ev
from .exit_codes import ArgParser, exit_code
from .errors import InputError, TriageError, UsageError
from .pipeline import Options, load_rules
from .read import CHUNK_SIZE, MAX_LINE_CHARS, _last_frame
from .tail import Tail as _Tail
from .output import emit, isatty
from .report import Report, found_failure

PUMP_CHUNK = 64 * 1024
FEED_LIMIT = 4 << 20          # bytes queued for the pipeline before a writer waits (or skips)
SETTLE_QUIET = 1.0            # after the fatal event: report once the output is quiet this long ...
SETTLE_MAX = 5.0              # ... or this long after it, whichever comes first
TERM_GRACE = 10.0             # a child that ignores SIGTERM this long is killed
GROUP_GRACE = 3.0             # after an interrupted child exits, its group gets this long to follow
DRAIN_GRACE = 5.0             # after the child exits, wait this long for its pipe to close
TICK = 0.05
FOLLOW_POLL = 0.1
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Feed:
    """A byte stream one thread writes and `pipeline.run` reads as the bytes arrive.

    Bounded: while FEED_LIMIT bytes are queued a writer waits or, with `wait=False` (a live
    server must never be slowed down by its analysis), its bytes are skipped and counted.

    `read` blocks until there is data, with one exception that keeps the reader incremental:
    `read.iter_lines` reads through an `io.BufferedReader`, which calls `read` again and
    again until it has CHUNK_SIZE bytes or gets an empty result. Such a follow-up call asks
    for less than CHUNK_SIZE right after data was given; answering it with b"" when nothing
    is queued ends that one buffered read (with the data so far), not the stream. Each write
    is queued as two items so the one follow-up call that asks for exactly CHUNK_SIZE finds
    data instead of waiting for more.
    """

    def __init__(self, limit: int = FEED_LIMIT) -> None:
        self._cond = threading.Condition()
        self._items: deque[bytes] = deque()
        self._size = 0
        self._limit = limit
        self._closed = False
        self._calls = 0
        self._gave = False
        self.skipped = 0

    def write(self, data: bytes, wait: bool = True) -> None:
        with self._cond:
            if not wait and self._size >= self._limit and not self._closed:
                self.skipped += len(data)
                return
            while self._size >= self._limit and not self._closed:
                self._cond.wait()
            if self._closed or not data:
                return
            self._items.extend((data[:-1], data[-1:]) if len(data) > 1 else (data,))
            self._size += len(data)
            self._cond.notify_all()

    def close(self) -> None:
        """No more data: the reader gets the rest, then EOF."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def abandon(self) -> None:
        """The reader is gone: drop what is queued and every later write."""
        with self._cond:
            self._closed = True
            self._items.clear()
            self._size = 0
            self._cond.notify_all()

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        with self._cond:
            self._calls += 1
            if not self._items and not self._closed and self._gave and 0 <= n < CHUNK_SIZE and self._calls > 1:
                self._gave = False
                return b""
            while not self._items and not self._closed:
                self._cond.wait()
            if not self._items:
                return b""
            item = self._items.popleft()
            if 0 <= n < len(item):
                self._items.appendleft(item[n:])
                item = item[:n]
            self._size -= len(item)
            self._gave = True
            self._cond.notify_all()
            return item


class Watch:
    """`pipeline.run` over a Feed in a thread, noting when the fatal event and readiness show."""

    def __init__(self, name: str, options: Options, rules: list) -> None:
        self.feed = Feed()
        self.fatal_at: float | None = None
        self.ready: ev.Ready | None = None
        self.report: Report | None = None
        self.error: BaseException | None = None
        self._checked: tuple = ()
        options = dataclasses.replace(options, on_event=self._on_event, wrap_sample=0)
        self._thread = threading.Thread(target=self._run, args=(name, options, rules),
                                        name="vllm-triage-pipeline", daemon=True)
        self._thread.start()

    def _run(self, name: str, options: Options, rules: list) -> None:
        from .pipeline import run

        try:
            self.report = run(self.feed, name, options, rules)  # type: ignore[arg-type]
        except BaseException as exc:  # noqa: BLE001 - handed to the caller by finish()
            self.error = exc
        finally:
            self.feed.abandon()

    def _on_event(self, timeline, line, events) -> None:
        attempt = timeline.current
        if attempt.ready is not None:
            self.ready = attempt.ready
        state = (attempt.index, len(attempt.signals), attempt.ready is None)
        if self.fatal_at is None and state != self._checked:  # fatal only changes with these
            self._checked = state
            if attempt.fatal is not None:
                self.fatal_at = time.monotonic()

    @property
    def broken(self) -> bool:
        return self.error is not None

    def settled(self, last_data: float) -> bool:
        """A fatal event was seen and the burst around it is over: time to report."""
        if self.fatal_at is None:
            return False
        now = time.monotonic()
        return now - self.fatal_at >= SETTLE_MAX or now - max(last_data, self.fatal_at) >= SETTLE_QUIET

    def finish(self) -> Report:
        """End the input and return the report of everything fed so far."""
        self.feed.close()
        while self._thread.is_alive():
            self._thread.join(TICK)
        if self.error is not None:
            raise self.error
        assert self.report is not None
        return self.report


# ----------------------------------------------------------------------------- run -- CMD


def run_command(argv: list[str], stdin, stdout: IO[str], stderr: IO[str]) -> int:
    """`vllm-triage run [--log FILE] [--format F] [--output FILE] -- CMD ...`: the child's exit code."""
    args, cmd = _parse_run(argv)
    rules = load_rules()
    log = _open_log(args.log)
    name = args.log if args.log else f"output of {os.path.basename(cmd[0])}"
    printed = False
    with _Forwarder() as forwarder:  # before the child starts: a Ctrl-C now still reaches it
        try:
            proc = _spawn(cmd)
        except OSError as exc:
            if log is not None:
                log.close()
            stderr.write(f"vllm-triage: cannot run {cmd[0]}: {exc.strerror or exc}\n")
            return 127 if isinstance(exc, FileNotFoundError) else 126
        watch = Watch(name, Options(max_bytes=args.max_bytes), rules)
        pump = _Pump(proc, _sink(stdout), log, watch.feed)
        forwarder.attach(proc.pid)
        while proc.poll() is None:
            forwarder.escalate()
            if not printed and watch.settled(pump.last_data):
                printed = _report_run(watch, args, stderr)
            time.sleep(TICK)
        pump.drain(DRAIN_GRACE)
        if forwarder.count:
            _clear_group(proc.pid)
    code = proc.returncode
    if not printed:
        _report_run(watch, args, stderr, only_if=lambda r: found_failure(r) or (code != 0 and not forwarder.count),
                    exit_code=None if forwarder.count else code)
    if pump.log_error:
        stderr.write(f"vllm-triage: could not write {args.log}: {pump.log_error}\n")
    return 128 - code if code < 0 else code


def _parse_run(argv: list[str]):
    if "--" in argv:
        cut = argv.index("--")
        opts, cmd = argv[:cut], argv[cut + 1:]
    elif argv and not argv[0].startswith("-"):
        opts, cmd = [], argv
    else:
        opts, cmd = argv, []
    from .conventions import size_arg
    from .render import FORMATS

    p = ArgParser(prog="vllm-triage run", usage="vllm-triage run [--log FILE] [-f FORMAT] [-o FILE] -- CMD [ARGS ...]",
                description="Run a vLLM server, pass its output through, and "
                "explain a failed startup on stderr. Exits with the command's exit code.")
    p.add_argument("--log", metavar="FILE", help="also write the command's output to FILE")
    p.add_argument("-f", "--format", choices=FORMATS,
                   help="report format (default: $VLLM_TRIAGE_FORMAT, else terminal on a TTY, else markdown)")
    p.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE instead of stderr ('-': stderr)")
    p.add_argument("--max-bytes", type=size_arg, default=None, metavar="SIZE",
                   help="stop analysing after this much output (e.g. 20MiB); all of it is still passed through")
    args = p.parse_args(opts)
    args.output = None if args.output == "-" else args.output
    if not cmd:
        raise UsageError("give the command to run after --, e.g. vllm-triage run -- vllm serve MODEL")
    return args, cmd


def _open_log(path: str | None):
    if path is None:
        return None
    try:
        return open(path, "wb")
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None


def _spawn(cmd: list[str]) -> subprocess.Popen:
    """The child in its own process group (so we can signal all of it), output merged into one pipe."""
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")  # its stdout is a pipe now; keep print() output live
    group = {"process_group": 0} if sys.version_info >= (3, 11) else {"preexec_fn": os.setpgrp}
    stdin = subprocess.DEVNULL if isatty(sys.stdin) else None  # a background group cannot read the tty
    return subprocess.Popen(cmd, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, bufsize=0,
                            env=env, **group)  # type: ignore[call-overload]


def _report_run(watch: Watch, args, stderr: IO[str], only_if: Callable[[Report], bool] | None = None,
                exit_code: int | None = None) -> bool:
    from .exit_signal import with_exit_signal

    try:
        report = watch.finish()
        report = report if exit_code is None else with_exit_signal(report, exit_code)
    except Exception as exc:  # noqa: BLE001 - the command's exit code still stands
        detail = exc if isinstance(exc, TriageError) else f"internal error: {type(exc).__name__}: {exc}"
        stderr.write(f"vllm-triage: could not analyse the output: {detail}\n")
        return True
    if watch.feed.skipped:
        note = (f"the output came faster than it could be analysed: {watch.feed.skipped} bytes were skipped, "
                "so line numbers after the first skip are approximate")
        report = report.model_copy(update={"notes": [*report.notes, note]})
    if only_if is None or only_if(report):
        stderr.flush()
        emit(report, args.format, args.output, stderr)
        if args.output:
            stderr.write(f"vllm-triage: report written to {args.output}\n")
    return True


def _sink(stdout: IO[str]) -> Callable[[bytes], None]:
    """Where the child's bytes go: our stdout's file descriptor unchanged, else (tests) its text."""
    try:
        fd = stdout.fileno()
    except (AttributeError, OSError, ValueError):
        fd = None
    broken = False

    def to_fd(data: bytes) -> None:
        nonlocal broken
        view = memoryview(data)
        try:
            while view and not broken:
                view = view[os.write(fd, view):]  # type: ignore[arg-type]
        except OSError:  # our stdout went away (a closed pipe): keep draining the child regardless
            broken = True

    decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def to_text(data: bytes) -> None:
        nonlocal broken
        try:
            if not broken:
                stdout.write(decoder.decode(data))
                stdout.flush()
        except (OSError, ValueError):
            broken = True

    if fd is not None:
        stdout.flush()
        return to_fd
    return to_text


class _Pump(threading.Thread):
    """Reads the child's pipe: every chunk to the terminal, the --log file and the pipeline."""

    def __init__(self, proc: subprocess.Popen, sink: Callable[[bytes], None], log, feed: Feed) -> None:
        super().__init__(name="vllm-triage-pump", daemon=True)
        self.proc, self.sink, self.log, self.feed = proc, sink, log, feed
        self.last_data = time.monotonic()
        self.log_error: str | None = None
        self.start()

    def run(self) -> None:
        fd = self.proc.stdout.fileno()  # type: ignore[union-attr]
        try:
            while data := os.read(fd, PUMP_CHUNK):
                self.last_data = time.monotonic()
                self.sink(data)
                self._tee(data)
                self.feed.write(data, wait=False)
        except OSError:
            pass
        finally:
            self.feed.close()
            if self.log is not None:
                self.log.close()

    def _tee(self, data: bytes) -> None:
        if self.log is None or self.log_error:
            return
        try:
            self.log.write(data)
            self.log.flush()
        except OSError as exc:
            self.log_error = exc.strerror or str(exc)

    def drain(self, grace: float) -> None:
        """Wait for the pipe to close; a grandchild may keep it open, so not forever."""
        deadline = time.monotonic() + grace
        while self.is_alive() and time.monotonic() < deadline:
            self.join(TICK)
        if self.is_alive():
            self.feed.close()


class _Forwarder:
    """SIGINT/SIGTERM/SIGHUP go to the child's group; a second signal, or 10 s of ignored SIGTERM, kill it."""

    def __init__(self) -> None:
        self.pgid: int | None = None
        self.count = 0
        self.pending: int | None = None
        self.kill_at: float | None = None
        self._old: dict[int, object] = {}

    def attach(self, pgid: int) -> None:
        self.pgid = pgid
        if self.pending is not None:
            self._send(self.pending)

    def __enter__(self) -> _Forwarder:
        if threading.current_thread() is threading.main_thread():
            for sig in FORWARDED:
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self._old.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]

    def _handle(self, signum: int, frame) -> None:
        self.count += 1
        sig = signum if self.count == 1 else signal.SIGKILL
        if self.pgid is None:
            self.pending = sig
        else:
            self._send(sig)

    def _send(self, sig: int) -> None:
        assert self.pgid is not None
        _killpg(self.pgid, sig)
        self.kill_at = time.monotonic() + TERM_GRACE if sig in (signal.SIGTERM, signal.SIGHUP) else None

    def escalate(self) -> None:
        if self.kill_at is not None and time.monotonic() >= self.kill_at:
            self._send(signal.SIGKILL)


def _killpg(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def _clear_group(pgid: int) -> None:
    """After an interrupt, what is left of the child's group (workers) gets a moment, then SIGKILL."""
    deadline = time.monotonic() + GROUP_GRACE
    while _killpg(pgid, 0) and time.monotonic() < deadline:
        time.sleep(TICK)
    _killpg(pgid, signal.SIGKILL)


# ----------------------------------------------------------------------------- --follow FILE


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
        stdout.write(f"vllm-triage: {report.input.name}: ready{where}\n")
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
    from .lines import peel
    from .parse import parse_line_detail
    from .vocabulary import prefilter

    raw = _last_frame(raw)
    if not prefilter(raw):
        return False
    events, _ = parse_line_detail(peel(raw, 0))
    return any(isinstance(e, ev.Ready) for e in events)
