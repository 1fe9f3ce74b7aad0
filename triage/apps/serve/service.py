"""The state behind the routes: rules, worker processes, analysis slots, deadlines, hang-ups.

A slot is taken when the analysis starts, never while a body is still arriving, so slow
uploads cannot starve the analyses. While a worker analyses, the request's connection is
watched: a client that hangs up has its worker killed at once, and the slot comes back.
"""

from __future__ import annotations

import threading
import time
import zlib
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import anyio

from triage.apps.serve.limits import CLIENT_GONE, GZIP_EXPANSION, ApiError, ServerConfig, too_large
from triage.apps.serve.requests import Multipart
from triage.apps.serve.workers import InternalError, WorkerDied, WorkerPool
from triage.errors import InputError
from triage.pipeline import load_rules

Receive = Callable[[], Awaitable[dict[str, Any]]]


class _Cancelled(Exception):
    """The request that wanted the work gave up before a worker took it."""


class Slots:
    """At most `size` analyses at once; `taken` says how many run (for operators and tests)."""

    def __init__(self, size: int) -> None:
        self.size, self.taken, self._lock = size, 0, threading.Lock()

    def acquire(self) -> bool:
        with self._lock:
            if self.taken >= self.size:
                return False
            self.taken += 1
            return True

    def release(self) -> None:
        with self._lock:
            self.taken -= 1


class Job:
    """One unit of parse work; it holds a concurrency slot until the work has really stopped.

    The thread that waits for the worker process sees the cancel flag within
    `workers.POLL_SECONDS`, kills the worker, and only then gives the slot back: the
    bound counts work, not requests.
    """

    def __init__(self, slots: Slots) -> None:
        self.cancel, self._slots, self._lock, self._state = threading.Event(), slots, threading.Lock(), "waiting"

    def run(self, fn: Callable[[threading.Event], Any]) -> Any:
        with self._lock:
            if self._state != "waiting":
                raise _Cancelled()
            self._state = "running"
        try:
            return fn(self.cancel)
        finally:
            with self._lock:
                self._state = "freed"
                self._slots.release()

    def abandon(self) -> None:
        """The request is done (answered or gone): free the slot unless a worker still holds it."""
        self.cancel.set()
        with self._lock:
            if self._state == "waiting":
                self._state = "freed"
                self._slots.release()


def _too_large(exc: InputError) -> bool:
    return "larger than the limit" in exc.message or "expands past" in exc.message


class Service:
    """Rules, the worker pool and the slots of one server; `pool` may be given (tests)."""

    def __init__(self, config: ServerConfig, pool: WorkerPool | None = None) -> None:
        self.config = config
        self.rules = load_rules(config.extra_rules)
        self.slots = Slots(config.max_concurrency)
        self.pool = pool or WorkerPool(config.max_concurrency, config.extra_rules)  # one process per slot
        self.receiving = 0  # request bodies arriving right now (for operators and tests)

    def close(self) -> None:
        self.pool.close()

    def take_slot(self) -> Job:
        if not self.slots.acquire():
            raise ApiError(
                503, f"busy: {self.config.max_concurrency} analyses are running; retry shortly", {"Retry-After": "2"}
            )
        return Job(self.slots)

    async def read_body(self, request, limit: int, deadline: float) -> bytes:
        """The whole body, counted against `limit` as it arrives, within the deadline."""
        buf = bytearray()

        def add(chunk: bytes) -> None:
            if len(buf) + len(chunk) > limit:
                raise too_large(limit)
            buf.extend(chunk)

        await self._stream(request, add, deadline)
        return bytes(buf)

    async def read_multipart(self, request, deadline: float) -> tuple[bytes, str | None, str]:
        """The `file` part (and optional `format`, `name` fields), parsed in memory as it streams."""
        body = Multipart(request.headers.get("content-type", ""), self.config.max_bytes)
        await self._stream(request, body.feed, deadline)
        return body.fields()

    async def _stream(self, request, consume: Callable[[bytes], None], deadline: float) -> None:
        from starlette.requests import ClientDisconnect

        self.receiving += 1
        try:
            with anyio.fail_after(max(0.0, deadline - time.monotonic())):
                async for chunk in request.stream():
                    consume(chunk)
        except TimeoutError:
            raise ApiError(408, f"the request body did not arrive within {self.config.timeout:g} s") from None
        except ClientDisconnect:
            raise ApiError(CLIENT_GONE, "the client went away before the body was complete") from None
        finally:
            self.receiving -= 1

    async def analyse(self, receive: Receive, data: bytes, name: str, fmt: str, deadline: float) -> str:
        """Pipeline and renderer in a worker process, within the deadline, while the client stays.

        `receive` is the request's ASGI channel: once the body is read, the next message is
        the hang-up, which cancels the analysis (and so kills its worker)."""
        job = self.take_slot()
        outcome: dict[str, Any] = {}
        try:
            async with anyio.create_task_group() as tg:

                async def watch() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    outcome["gone"] = True
                    job.cancel.set()  # the worker is killed within workers.POLL_SECONDS
                    tg.cancel_scope.cancel()

                tg.start_soon(watch)
                try:
                    outcome["text"] = await self._run(job, data, name, fmt, deadline)
                except ApiError as exc:  # raised outside the task group, not as an ExceptionGroup
                    outcome["error"] = exc
                tg.cancel_scope.cancel()
        finally:
            job.abandon()
        if "gone" in outcome:
            raise ApiError(CLIENT_GONE, "the client went away during the analysis")
        if "error" in outcome:
            raise outcome["error"]
        return outcome["text"]

    async def _run(self, job: Job, data: bytes, name: str, fmt: str, deadline: float) -> str:
        work = partial(self.pool.run, data, name, fmt, self.config.max_bytes * GZIP_EXPANSION)
        try:
            with anyio.fail_after(max(0.0, deadline - time.monotonic())):
                return await anyio.to_thread.run_sync(job.run, work, abandon_on_cancel=True)
        except WorkerDied as exc:
            raise ApiError(500, f"{exc}; it may have run out of memory") from None
        except InternalError as exc:
            raise ApiError(500, f"internal error while analysing the log ({exc}); please report it") from None
        except TimeoutError:
            raise ApiError(504, f"the analysis took longer than the limit of {self.config.timeout:g} s") from None
        except InputError as exc:
            raise ApiError(413 if _too_large(exc) else 400, str(exc)) from None
        except zlib.error as exc:  # the reader lets some damaged deflate data through as this
            raise ApiError(400, f"damaged gzip input: {exc}") from None
