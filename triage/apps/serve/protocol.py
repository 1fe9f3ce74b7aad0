"""Connection-level guards under uvicorn's h11 protocol: a header timeout, a write deadline
for a client that stops reading its answers, a connection cap that sheds the connection
waiting longest for a request, a reserve that keeps /healthz answered past the cap, the
framing checks of framing.py, and a refused body drained before the connection closes.

uvicorn's own settings do not cover these: `timeout_keep_alive` only runs between requests
(a client that sends half a request line is never timed out), `limit_concurrency` accepts
the connection and answers 503 only once a request is complete (every connection still costs
a file descriptor, and at the fd limit asyncio logs a traceback per failed accept), and a
response sent before the body was read is followed by a close with unread data, which the
kernel turns into a reset: a client that sends its whole body before reading (urllib,
`requests` without `Expect: 100-continue`) sees "Connection reset by peer", not the 413.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from triage.apps.serve.framing import GuardedConnection
from triage.apps.serve.limits import HEALTH_RESERVE

log = logging.getLogger("vllm_triage.serve")
CAP_LOG_SECONDS = 60.0  # at most one "connection cap" line per minute


def raw_json_response(status: int, reason: str, message: str) -> bytes:
    """A whole HTTP/1.1 answer that closes the connection, for refusals below the ASGI app."""
    body = json.dumps({"error": message}).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


FULL, PROBATION = "full", "probation"
HEALTH_PATHS = ("/healthz",)


class ConnectionGuard:
    """Shared by the connections of one server: the open counts, the cap, the log of refusals.

    At the cap a new connection does not wait for a slot: the connection that has waited
    longest for a request head (a slow-loris, an idle keep-alive) is closed to make room, so a
    flood of slow clients cannot lock out a real request. When none waits (every connection
    is in a request), up to HEALTH_RESERVE more are admitted to answer /healthz only; past
    that, new connections get 503 at once.
    """

    def __init__(
        self, cap: int, header_timeout: float, drain_bytes: int, drain_seconds: float, reserve: int = HEALTH_RESERVE
    ) -> None:
        self.cap, self.reserve, self.header_timeout = cap, reserve, header_timeout
        self.drain_bytes, self.drain_seconds = drain_bytes, drain_seconds
        self.counts = {FULL: 0, PROBATION: 0}
        self.waiting: dict[GuardedH11Protocol, None] = {}  # waiting for a request head, oldest first
        self.refused = self.shed = 0
        self._unlogged = [0, 0]
        self._logged_at = -CAP_LOG_SECONDS

    @property
    def open(self) -> int:
        return self.counts[FULL] + self.counts[PROBATION]

    def admit(self) -> str | None:
        """The kind of slot a new connection gets (FULL, PROBATION), or None: refuse it."""
        if self.counts[FULL] < self.cap:
            self.counts[FULL] += 1
            return FULL
        kind: str | None = None
        while self.waiting and kind is None:
            victim = next(iter(self.waiting))
            kind = victim.kind if victim.shed() else None
        if kind is None and self.counts[PROBATION] < self.reserve:
            kind = PROBATION
        if kind is None:
            self.refused += 1
            self._unlogged[1] += 1
        else:
            self.counts[kind] += 1
        self._log_cap()
        return kind

    def shed_one(self) -> None:
        self.shed += 1
        self._unlogged[0] += 1

    def _log_cap(self) -> None:
        now = time.monotonic()
        if now - self._logged_at >= CAP_LOG_SECONDS and any(self._unlogged):
            log.warning(
                "connection cap reached (%d open): closed %d connection(s) waiting for a request, refused %d with 503",
                self.cap,
                *self._unlogged,
            )
            self._logged_at, self._unlogged = now, [0, 0]

    def wait(self, protocol: GuardedH11Protocol, waiting: bool) -> None:
        """Note that a connection waits for a request head (now the newest) or does not."""
        self.waiting.pop(protocol, None)
        if waiting:
            self.waiting[protocol] = None

    def release(self, protocol: GuardedH11Protocol) -> None:
        self.waiting.pop(protocol, None)
        if protocol.kind is not None:  # admitted (a refused connection never took a slot)
            self.counts[protocol.kind] -= 1


class _Transport:
    """The real transport, except that `close` drains a body the client is still sending."""

    def __init__(self, real: asyncio.Transport, protocol: GuardedH11Protocol) -> None:
        self._real, self._protocol = real, protocol

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def close(self) -> None:
        if not self._protocol.drain():
            self._protocol._release()  # its descriptor is closed within this turn of the loop
            self._real.close()

    def is_closing(self) -> bool:
        return self._protocol.draining or self._real.is_closing()


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with the guards; `guard` is set on a subclass per server."""

    guard: ConnectionGuard

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.conn = GuardedConnection(self.conn._max_incomplete_event_size)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self.kind = self.guard.admit()
        self.admitted, self.released, self.draining, self.lost = self.kind is not None, False, False, False
        self._real = transport
        self._timer: asyncio.TimerHandle | None = None
        self._write_timer: asyncio.TimerHandle | None = None
        self._drain_left = 0
        if not self.admitted:
            transport.write(raw_json_response(503, "Service Unavailable", "too many open connections; retry shortly"))
            transport.close()
            return
        super().connection_made(_Transport(transport, self))  # type: ignore[arg-type]
        if self.kind is PROBATION:
            self.app = health_only(self.app)
        self.guard.wait(self, True)
        self._arm(self.guard.header_timeout, self._header_timeout)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.admitted:
            return
        self.lost = True
        self._release()
        self._disarm()
        self.resume_writing()
        super().connection_lost(exc)

    def pause_writing(self) -> None:
        """The client stopped reading: it has --timeout seconds to read again, then it is cut off
        (closing would wait for the unread answer to go out: abort drops it)."""
        super().pause_writing()
        if self._write_timer is None:
            self._write_timer = self.loop.call_later(self.guard.drain_seconds, self._real.abort)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None

    def _release(self) -> None:
        if not self.released:
            self.released = True
            self.guard.release(self)

    def shed(self) -> bool:
        """Close this connection to make room if it still waits for a request head (True)."""
        if self.released or self.draining or self.conn.their_state is not h11.IDLE or self._real.is_closing():
            self.guard.wait(self, False)
            return False
        self._disarm()
        self._real.write(
            raw_json_response(
                503,
                "Service Unavailable",
                "the server is at its connection cap: "
                "this connection, still waiting for a request, was closed to make room",
            )
        )
        self._real.close()
        self._release()
        self.guard.shed_one()
        return True

    def _note_state(self) -> None:
        """Keep the guard's list of connections waiting for a request head up to date."""
        waiting = self.conn.their_state is h11.IDLE and not (self.released or self.draining or self._real.is_closing())
        self.guard.wait(self, waiting)

    def data_received(self, data: bytes) -> None:
        if self.draining:
            self._drain_left -= len(data)
            if self._drain_left <= 0:
                self._real.close()
            return
        super().data_received(data)
        self._note_state()
        waiting_for_head = self.conn.their_state is h11.IDLE
        if waiting_for_head and self._timer is None and not self._real.is_closing():
            self._arm(self.guard.header_timeout, self._header_timeout)
        elif not waiting_for_head and self._timer is not None and not self.draining:
            self._disarm()

    def eof_received(self) -> bool | None:  # type: ignore[override]
        if self.draining:
            self._real.close()
        return None

    def on_response_complete(self) -> None:
        if self.conn.their_state is h11.SEND_BODY and self.drain():
            return  # answered before the body was read: drain it, then close (no keep-alive)
        super().on_response_complete()
        self._note_state()

    def drain(self) -> bool:
        """Start draining a body the client still sends (True), or say there is none (False)."""
        if self.draining:
            return True
        if self.kind is PROBATION:  # admitted past the cap: refused and closed, never held open
            return False
        if self.lost or self.conn.their_state is not h11.SEND_BODY or self._real.is_closing():
            return False
        self.draining = True
        self._drain_left = self.guard.drain_bytes
        self._unset_keepalive_if_required()
        self._disarm()
        self._real.resume_reading()
        if self._real.can_write_eof():
            self._real.write_eof()  # the answer, then end-of-stream: the client reads it when it is done
        self._arm(self.guard.drain_seconds, self._real.close)
        return True

    def send_400_response(self, msg: str) -> None:
        """A request h11 cannot parse or that framing.py refuses: an `{"error"}` answer, then close."""
        self._disarm()
        self.guard.wait(self, False)
        refusal = self.conn.refusal if isinstance(self.conn, GuardedConnection) else None
        if self.cycle is None or not self.cycle.response_started:
            self._real.write(
                raw_json_response(refusal.status, refusal.reason, refusal.message)
                if refusal
                else raw_json_response(400, "Bad Request", "invalid HTTP request")
            )
        self._real.close()

    def _header_timeout(self) -> None:
        self._timer = None
        if self.conn.their_state is h11.IDLE and not self._real.is_closing() and not self.draining:
            seconds = f"{self.guard.header_timeout:g}"
            self._real.write(
                raw_json_response(408, "Request Timeout", f"the request headers did not arrive within {seconds} s")
            )
            self._real.close()

    def _arm(self, seconds: float, callback) -> None:
        self._disarm()
        self._timer = self.loop.call_later(seconds, callback)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def health_only(app):
    """The app for a connection admitted past the cap: /healthz answered, anything else 503."""
    refusal = raw_json_response(503, "", "too many open connections: only /healthz is answered now; retry shortly")
    body = refusal.split(b"\r\n\r\n", 1)[1]

    async def answer(scope, receive, send) -> None:
        if scope["type"] != "http" or scope.get("path") in HEALTH_PATHS:
            await app(scope, receive, send)
            return
        await send(
            {
                "type": "http.response.start",
                "status": 503,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"retry-after", b"2"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    return answer


def protocol_for(guard: ConnectionGuard) -> type[GuardedH11Protocol]:
    """A protocol class bound to one server's guard (uvicorn builds one instance per connection)."""
    return type("TriageH11Protocol", (GuardedH11Protocol,), {"guard": guard})
