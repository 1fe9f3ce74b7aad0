"""`vllm-triage run -- CMD`: start a server as a child, pass its output through unchanged, and
explain a failed start while the server is still shutting down.

The output goes, as it arrives, to a `feed.Watch` (the same `pipeline.run` the batch CLI
uses, over a bounded stream); signals are forwarded to the child's process group. The
`--follow FILE` watch is `follow.py`.
"""

from __future__ import annotations

import codecs
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import IO

from triage.apps.exit_codes import ArgParser
from triage.apps.live.feed import TICK, Feed, Watch
from triage.apps.output import emit, isatty
from triage.errors import TriageError, UsageError
from triage.model.report import Report, found_failure
from triage.pipeline import Options, load_rules

PUMP_CHUNK = 64 * 1024
TERM_GRACE = 10.0  # a child that ignores SIGTERM this long is killed
GROUP_GRACE = 3.0  # after an interrupted child exits, its group gets this long to follow
DRAIN_GRACE = 5.0  # after the child exits, wait this long for its pipe to close
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


# ----------------------------------------------------------------------------- run -- CMD


def run_command(argv: list[str], stdin, stdout: IO[str], stderr: IO[str]) -> int:
    """`vllm-triage run [--log FILE] [--format F] [--output FILE] -- CMD ...`: the child's exit code."""
    args, cmd = _parse_run(argv)
    rules = load_rules(args.rules)
    if args.no_redact:
        from triage.apps.output import NO_REDACT_WARNING

        stderr.write(NO_REDACT_WARNING)
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
        watch = Watch(name, Options(redact=not args.no_redact, extra_rules=args.rules, max_bytes=args.max_bytes), rules)
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
        _report_run(
            watch,
            args,
            stderr,
            only_if=lambda r: found_failure(r) or (code != 0 and not forwarder.count),
            exit_code=None if forwarder.count else code,
        )
    if pump.log_error:
        stderr.write(f"vllm-triage: could not write {args.log}: {pump.log_error}\n")
    return 0 if args.exit_zero else 128 - code if code < 0 else code


def _parse_run(argv: list[str]):
    if "--" in argv:
        cut = argv.index("--")
        opts, cmd = argv[:cut], argv[cut + 1 :]
    elif argv and not argv[0].startswith("-"):
        opts, cmd = [], argv
    else:
        opts, cmd = argv, []
    from triage.apps.conventions import report_options, size_arg
    from triage.render import FORMATS

    p = ArgParser(
        prog="vllm-triage run",
        usage="vllm-triage run [--log FILE] [-f FORMAT] [-o FILE] [-q] [options] -- CMD [ARGS ...]",
        description="Run a vLLM server, pass its output through, and "
        "explain a failed startup on stderr. Exits with the command's exit code.",
    )
    p.add_argument("--log", metavar="FILE", help="also write the command's output to FILE")
    p.add_argument(
        "-f",
        "--format",
        choices=FORMATS,
        help="report format (default: $VLLM_TRIAGE_FORMAT, else terminal on a TTY, else markdown)",
    )
    p.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE instead of stderr ('-': stderr)")
    p.add_argument(
        "--max-bytes",
        type=size_arg,
        default=None,
        metavar="SIZE",
        help="stop analysing after this much output (e.g. 20MiB); all of it is still passed through",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="the report as one line (files still get it whole)")
    p.add_argument(
        "--exit-zero",
        action="store_true",
        help="exit 0 whatever the command's exit code (a command that cannot be started still exits 126 or 127)",
    )
    report_options(p, "the output")
    args = p.parse_args(opts)
    args.output = None if args.output == "-" else args.output
    if not cmd:
        raise UsageError("give the command to run after --, e.g. vllm-triage run -- vllm serve MODEL")
    return args, cmd


def _open_log(path: str | None):
    if path is None:
        return None
    from triage.apps.safe_write import open_stream

    return open_stream(path)  # never through a link planted at PATH


def _spawn(cmd: list[str]) -> subprocess.Popen:
    """The child in its own process group (so we can signal all of it), output merged into one pipe."""
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")  # its stdout is a pipe now; keep print() output live
    group = {"process_group": 0} if sys.version_info >= (3, 11) else {"preexec_fn": os.setpgrp}
    stdin = subprocess.DEVNULL if isatty(sys.stdin) else None  # a background group cannot read the tty
    return subprocess.Popen(
        cmd, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, bufsize=0, env=env, **group
    )  # type: ignore[call-overload]


def _report_run(
    watch: Watch, args, stderr: IO[str], only_if: Callable[[Report], bool] | None = None, exit_code: int | None = None
) -> bool:
    from triage.apps.live.exit_signal import with_exit_signal

    try:
        report = watch.finish()
        report = report if exit_code is None else with_exit_signal(report, exit_code)
    except Exception as exc:  # noqa: BLE001 - the command's exit code still stands
        detail = exc if isinstance(exc, TriageError) else f"internal error: {type(exc).__name__}: {exc}"
        stderr.write(f"vllm-triage: could not analyse the output: {detail}\n")
        return True
    if watch.feed.skipped:
        note = (
            f"the output came faster than it could be analysed: {watch.feed.skipped} bytes were skipped, "
            "so line numbers after the first skip are approximate"
        )
        report = report.model_copy(update={"notes": [*report.notes, note]})
    if only_if is None or only_if(report):
        stderr.flush()
        fmt = "quiet" if args.quiet and args.output is None else args.format
        emit(report, fmt, args.output, stderr, args.color, args.width)
        if args.output:
            stderr.write(f"vllm-triage: report written to {args.output}\n")
            if args.quiet:
                emit(report, "quiet", None, stderr)
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
                view = view[os.write(fd, view) :]  # type: ignore[arg-type]
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
