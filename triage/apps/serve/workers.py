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
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from triage.apps.serve.job import analyse_bytes
from triage.errors import InputError

POLL_SECONDS = 0.05  # how soon a cancelled request's worker is killed
START_SECONDS = 120  # a worker that is not ready by then is taken for dead
Analyse = Callable[[bytes, str, str, Any, int], str]


class WorkerDied(Exception):
    """The worker process ended (killed by the OS, crashed) before it answered."""


class Cancelled(Exception):
    """The request gave up (timed out, went away); its worker was killed."""


class InternalError(Exception):
    """A bug met in the worker: the exception's type name only, never the log's text."""


def worker_main(conn: Connection, extra_rules: tuple[str, ...], analyse: Analyse = analyse_bytes) -> None:
    """In the child: load, warm up, then analyse requests until the pipe closes."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the server's; it stops the workers itself
    from triage.pipeline import load_rules

    rules = load_rules(extra_rules)
    analyse_bytes(b"INFO warm-up\n", "warm-up", "json", rules, 1 << 20)  # builds the grammar and matcher now
    conn.send(("ready", None))
    while True:
        try:
            data, name, fmt, limit = conn.recv()
        except (EOFError, OSError):
            return
        try:
            answer: tuple[str, Any] = ("ok", analyse(data, name, fmt, rules, limit))
        except InputError as exc:
            answer = ("input", str(exc))
        except zlib.error as exc:
            answer = ("gzip", str(exc))
        except Exception as exc:  # noqa: BLE001 - reported to the parent as a type name only
            answer = ("internal", type(exc).__name__)
        del data
        conn.send(answer)


class _Worker:
    def __init__(self, ctx: Any, extra_rules: tuple[str, ...], target: Callable[..., None]) -> None:
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=target, args=(child, extra_rules), daemon=True, name="vllm-triage-worker")
        self.process.start()
        child.close()
        self.ready = False
        self._lock = threading.Lock()  # one reader of the "ready" message at a time

    def wait_ready(self, timeout: float, cancel: threading.Event | None = None) -> bool:
        """Whether the worker said it is ready within `timeout`; raises Cancelled when asked to stop."""
        waited = 0.0
        while not self.ready and waited < timeout:
            if cancel is not None and cancel.is_set():
                raise Cancelled()
            with self._lock:
                if self.ready:
                    break
                try:
                    if self.conn.poll(POLL_SECONDS):
                        self.ready = self.conn.recv()[0] == "ready"
                        return self.ready
                except (EOFError, OSError):
                    return False
            waited += POLL_SECONDS
        return self.ready

    def stop(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join(5)
        self.conn.close()


class WorkerPool:
    """`size` worker processes; `run` hands one request to an idle one and waits for it.

    `target` is the function each worker process runs (`worker_main`); tests give one that
    can be told to hang, so that time limits are tested without depending on how fast a
    machine parses.
    """

    def __init__(self, size: int, extra_rules: tuple[str, ...] = (), target: Callable[..., None] = worker_main) -> None:
        self._ctx = multiprocessing.get_context("spawn")  # never fork a server that runs threads
        self._extra, self._target = tuple(extra_rules), target
        self._idle: queue.SimpleQueue[_Worker] = queue.SimpleQueue()
        self._all: set[_Worker] = set()
        self._busy: set[_Worker] = set()
        self._lock = threading.Lock()
        self._closed = False
        self.restarts = 0  # workers replaced (killed or dead): the server's metrics read it
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
            if not worker.wait_ready(START_SECONDS, cancel) or not worker.process.is_alive():
                worker = self._replace(worker)  # died while idle (the OOM killer's pick): not this log's fault
                worker.wait_ready(START_SECONDS, cancel)
            kind, value = self._ask(worker, (data, name, fmt, limit), cancel)
        except _Replaced as exc:
            worker = exc.successor
            raise exc.error from None
        finally:
            self._idle.put(worker)
        if kind == "ok":
            return value
        if kind == "input":
            raise InputError(value)
        if kind == "gzip":
            raise zlib.error(value)
        raise InternalError(value)

    def _ask(self, worker: _Worker, request: tuple, cancel: threading.Event) -> tuple[str, Any]:
        """Send one request and wait for its answer; a cancelled or dead worker is replaced."""
        error: Exception = Cancelled()
        with self._lock:
            self._busy.add(worker)
        try:
            worker.conn.send(request)
            while not cancel.is_set():
                if worker.conn.poll(POLL_SECONDS):
                    return worker.conn.recv()
        except (EOFError, OSError):
            error = WorkerDied("the analysis worker process ended before it answered")
        finally:
            with self._lock:
                self._busy.discard(worker)  # before the kill: busy_pids never lists a dying worker
        raise _Replaced(self._replace(worker), error)

    def pids(self) -> list[int]:
        """The worker processes' PIDs (for tests and operators)."""
        with self._lock:
            return sorted(w.process.pid for w in self._all if w.process.pid is not None)

    def busy_pids(self) -> list[int]:
        """The PIDs of the workers analysing a request right now."""
        with self._lock:
            return sorted(w.process.pid for w in self._busy if w.process.pid is not None)

    def wait_all_ready(self, timeout: float) -> bool:
        """Whether every worker (successors of killed ones included) is ready within `timeout` each."""
        with self._lock:
            workers = list(self._all)
        return all(w.wait_ready(timeout) for w in workers)

    def _spawn(self) -> _Worker:
        worker = _Worker(self._ctx, self._extra, self._target)
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
            self.restarts += 1  # for the server's metrics
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


class _Replaced(Exception):
    """Internal: the worker was replaced; `successor` goes back to the idle queue, `error` is raised."""

    def __init__(self, successor: _Worker, error: Exception) -> None:
        super().__init__(str(error))
        self.successor, self.error = successor, error
