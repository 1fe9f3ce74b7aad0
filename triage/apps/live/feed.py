"""A live log handed to the pipeline as it arrives: `Feed`, the bounded byte stream one thread
writes and `pipeline.run` reads, and `Watch`, the pipeline run over it in a thread that notes
when the fatal event and readiness show. `live.py` (run -- CMD) and `follow.py` (--follow FILE)
both watch through it."""

from __future__ import annotations

import threading
import time
from collections import deque

import msgspec

from triage.ingest.read import CHUNK_SIZE
from triage.model import events as ev
from triage.model.report import Report
from triage.pipeline import Options

FEED_LIMIT = 4 << 20  # bytes queued for the pipeline before a writer waits (or skips)
SETTLE_QUIET = 1.0  # after the fatal event: report once the output is quiet this long ...
SETTLE_MAX = 5.0  # ... or this long after it, whichever comes first
TICK = 0.05


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
        options = msgspec.structs.replace(options, on_event=self._on_event, wrap_sample=0)
        self._thread = threading.Thread(
            target=self._run, args=(name, options, rules), name="vllm-triage-pipeline", daemon=True
        )
        self._thread.start()

    def _run(self, name: str, options: Options, rules: list) -> None:
        from triage.pipeline import run

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
