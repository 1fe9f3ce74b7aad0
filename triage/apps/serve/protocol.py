"""Connection-level guards under uvicorn's h11 protocol: a header timeout, a connection cap,
and a refused body drained before the connection closes.

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

log = logging.getLogger("vllm_triage.serve")
CAP_LOG_SECONDS = 60.0  # at most one "connection cap" line per minute


def raw_json_response(status: int, reason: str, message: str) -> bytes:
    """A whole HTTP/1.1 answer that closes the connection, for refusals below the ASGI app."""
    body = json.dumps({"error": message}).encode()
    head = (f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n")
    return head.encode() + body


class ConnectionGuard:
    """Shared by the connections of one server: the open count, the cap, the log of refusals."""

    def __init__(self, cap: int, header_timeout: float, drain_bytes: int, drain_seconds: float) -> None:
        self.cap, self.header_timeout = cap, header_timeout
        self.drain_bytes, self.drain_seconds = drain_bytes, drain_seconds
        self.open = 0
        self.refused = 0
        self._unlogged = 0
        self._logged_at = -CAP_LOG_SECONDS

    def admit(self) -> bool:
        if self.open >= self.cap:
            self.refused += 1
            self._unlogged += 1
            now = time.monotonic()
            if now - self._logged_at >= CAP_LOG_SECONDS:
                log.warning("connection cap reached (%d open): refused %d connection(s) with 503",
                            self.cap, self._unlogged)
                self._logged_at, self._unlogged = now, 0
            return False
        self.open += 1
        return True

    def release(self) -> None:
        self.open -= 1


class _Transport:
    """The real transport, except that `close` drains a body the client is still sending."""

    def __init__(self, real: asyncio.Transport, protocol: GuardedH11Protocol) -> None:
        self._real, self._protocol = real, protocol

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def close(self) -> None:
        if not self._protocol.drain():
            self._real.close()

    def is_closing(self) -> bool:
        return self._protocol.draining or self._real.is_closing()


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with the guards; `guard` is set on a subclass per server."""

    guard: ConnectionGuard

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self.admitted, self.draining, self.lost = self.guard.admit(), False, False
        self._real = transport
        self._timer: asyncio.TimerHandle | None = None
        self._drain_left = 0
        if not self.admitted:
            transport.write(raw_json_response(503, "Service Unavailable",
                                              "too many open connections; retry shortly"))
            transport.close()
            return
        super().connection_made(_Transport(transport, self))  # type: ignore[arg-type]
        self._arm(self.guard.header_timeout, self._header_timeout)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.admitted:
            return
        self.lost = True
        self.guard.release()
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.draining:
            self._drain_left -= len(data)
            if self._drain_left <= 0:
                self._real.close()
            return
        super().data_received(data)
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

    def drain(self) -> bool:
        """Start draining a body the client still sends (True), or say there is none (False)."""
        if self.draining:
            return True
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
        """A request h11 cannot parse: the same `{"error"}` answer as every other refusal."""
        self._disarm()
        self._real.write(raw_json_response(400, "Bad Request", "invalid HTTP request"))
        self._real.close()

    def _header_timeout(self) -> None:
        self._timer = None
        if self.conn.their_state is h11.IDLE and not self._real.is_closing() and not self.draining:
            seconds = f"{self.guard.header_timeout:g}"
            self._real.write(raw_json_response(408, "Request Timeout",
                                               f"the request headers did not arrive within {seconds} s"))
            self._real.close()

    def _arm(self, seconds: float, callback) -> None:
        self._disarm()
        self._timer = self.loop.call_later(seconds, callback)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def protocol_for(guard: ConnectionGuard) -> type[GuardedH11Protocol]:
    """A protocol class bound to one server's guard (uvicorn builds one instance per connection)."""
    return type("TriageH11Protocol", (GuardedH11Protocol,), {"guard": guard})
