"""Worker processes for the HTTP backend: the pipeline runs outside the server process.

Why processes and not threads: the pipeline is CPU-bound Python, so threads share one core
(the GIL) and slow each other down; a thread cannot be stopped when its request times out
or goes away, only asked to; and a log that makes the parser misbehave would do it inside
the server. A worker process runs on its own core, is killed (and replaced) the moment its
answer is no longer wanted, and can only take itself down.

Each worker loads the rules and warms the grammar once, then answers one request at a time
over a pipe. The server's concurrency slots guarantee an idle worker for each slot.
"""

from __future__ import annotations

import multiprocessing
import queue
import threading
import zlib
from multiprocessing.connection import Connection
from typing import Any

from .errors import InputError

POLL_SECONDS = 0.05  # how soon a cancelled request's worker is killed
START_SECONDS = 120  # a worker that is not ready by then is taken for dead


class WorkerDied(Exception):
    """The worker process ended (killed by the OS, crashed) before it answered."""


class Cancelled(Exception):
    """The request gave up (timed out, went away); its worker was killed."""


class InternalError(Exception):
    """A bug met in the worker: the exception's type name only, never the log's text."""


def _worker_main(conn: Connection, extra_rules: tuple[str, ...]) -> None:
    """In the child: load, warm up, then analyse requests until the pipe closes."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the server's; it stops the workers itself
    from .pipeline import load_rules
    from .serve import analyse_bytes

    rules = load_rules(extra_rules)
    analyse_bytes(b"INFO warm-up\n", "warm-up", "json", rules, 1 << 20)  # builds the grammar and matcher now
    conn.send(("ready", None))
    while True:
        try:
            data, name, fmt, limit = conn.recv()
        except (EOFError, OSError):
            return
        try:
            answer: tuple[str, Any] = ("ok", analyse_bytes(data, name, fmt, rules, limit))
        except InputError as exc:
            answer = ("input", str(exc))
        except zlib.error as exc:
            answer = ("gzip", str(exc))
        except Exception as exc:  # noqa: BLE001 - reported to the parent as a type name only
            answer = ("internal", type(exc).__name__)
        del data
        conn.send(answer)


class _Worker:
    def __init__(self, ctx: Any, extra_rules: tuple[str, ...]) -> None:
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_worker_main, args=(child, extra_rules), daemon=True,
                                   name="vllm-triage-worker")
        self.process.start()
        child.close()

    ready = False

    def wait_ready(self, timeout: float) -> bool:
        if not self.ready:
            try:
                self.ready = self.conn.poll(timeout) and self.conn.recv()[0] == "ready"
            except (EOFError, OSError):
                return False
        return self.ready

    def stop(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join(5)
        self.conn.close()


class WorkerPool:
    """`size` worker processes; `run` hands one request to an idle one and waits for it."""

    def __init__(self, size: int, extra_rules: tuple[str, ...] = ()) -> None:
        self._ctx = multiprocessing.get_context("spawn")  # never fork a server that runs threads
        self._extra = tuple(extra_rules)
        self._idle: queue.SimpleQueue[_Worker] = queue.SimpleQueue()
        self._all: set[_Worker] = set()
        self._lock = threading.Lock()
        self._closed = False
        workers = [self._spawn() for _ in range(size)]  # all start at once, then each is awaited
        for worker in workers:
            if not worker.wait_ready(START_SECONDS):
                self.close()
                raise RuntimeError("an analysis worker process did not start")
            self._idle.put(worker)

    def run(self, data: bytes, name: str, fmt: str, limit: int, cancel: threading.Event) -> str:
        """The rendered answer; raises InputError, zlib.error, Cancelled, WorkerDied, InternalError."""
        worker = self._idle.get()
        try:
            if not worker.wait_ready(START_SECONDS) or not worker.process.is_alive():
                worker = self._replace(worker)  # died while idle (the OOM killer's pick): not this log's fault
                worker.wait_ready(START_SECONDS)
            try:
                worker.conn.send((data, name, fmt, limit))
                while not worker.conn.poll(POLL_SECONDS):
                    if cancel.is_set():
                        worker = self._replace(worker)
                        raise Cancelled()
                kind, value = worker.conn.recv()
            except (EOFError, OSError):
                worker = self._replace(worker)
                raise WorkerDied("the analysis worker process ended before it answered") from None
        finally:
            self._idle.put(worker)
        if kind == "ok":
            return value
        if kind == "input":
            raise InputError(value)
        if kind == "gzip":
            raise zlib.error(value)
        raise InternalError(value)

    def pids(self) -> list[int]:
        """The worker processes' PIDs (for tests and operators)."""
        with self._lock:
            return sorted(w.process.pid for w in self._all if w.process.pid is not None)

    def _spawn(self) -> _Worker:
        worker = _Worker(self._ctx, self._extra)
        with self._lock:
            self._all.add(worker)
        return worker

    def _replace(self, worker: _Worker) -> _Worker:
        """Kill a worker whose answer is not wanted (or that died) and start its successor.

        The successor starts in the background: the slot is free at once, and the next
        request waits for the successor to be ready. If it never gets ready, that request
        replaces it in turn, so the pool never shrinks."""
        worker.stop()
        with self._lock:
            self._all.discard(worker)
            if self._closed:
                return worker
        return self._spawn()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            workers = list(self._all)
            self._all.clear()
        for worker in workers:
            worker.stop()
