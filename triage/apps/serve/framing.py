"""Request framing checks below the ASGI app: ambiguous framing and chunk floods.

h11 parses the bytes; this subclass looks at each event as it comes out, before uvicorn
acts on it, and refuses two shapes that h11 itself lets through:

* a request with both Content-Length and Transfer-Encoding. h11 follows RFC 9112 6.1 and
  uses the chunked framing, but a front proxy may have used the length: whatever follows is
  then a smuggled request. The RFC says to close the connection after such a request; it is
  refused before the app sees it, so nothing after it on that connection is answered.
* a chunk flood: a body of a million one-byte chunks is a few MiB on the wire (under
  --max-bytes) but a million parser events, each with its own Python-level cost, on the
  event loop that also answers `/healthz`. A request gets CHUNKS_FREE chunks, then one more
  for every CHUNK_MIN_AVERAGE bytes of body: a log streamed a line per chunk passes, one
  byte per chunk is refused within a few thousand chunks.
"""

from __future__ import annotations

import h11

CHUNKS_FREE = 4096
CHUNK_MIN_AVERAGE = 32  # bytes of body per chunk, on average, past the free chunks


class Refusal(h11.RemoteProtocolError):
    """A request refused below the app: uvicorn treats it as a protocol error (answer, close)."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message, status)
        self.status, self.reason, self.message = status, reason, message


def chunk_budget(received: int) -> int:
    """How many chunks a request may have sent once `received` bytes of its body arrived."""
    return CHUNKS_FREE + received // CHUNK_MIN_AVERAGE


class GuardedConnection(h11.Connection):
    """h11's server connection with the two refusals; `refusal` keeps the last one for the answer."""

    def __init__(self, max_incomplete_event_size: int) -> None:
        super().__init__(h11.SERVER, max_incomplete_event_size)
        self.refusal: Refusal | None = None
        self.chunks = 0
        self.received = 0

    def next_event(self):  # type: ignore[override]
        event = super().next_event()
        if isinstance(event, h11.Request):
            self.chunks = self.received = 0
            names = {name.lower() for name, _ in event.headers}
            if b"content-length" in names and b"transfer-encoding" in names:
                self._refuse(
                    400,
                    "Bad Request",
                    "a request with both Content-Length and Transfer-Encoding is "
                    "refused and its connection closed (RFC 9112 6.1)",
                )
        elif isinstance(event, h11.Data):
            self.received += len(event.data)
            self.chunks += event.chunk_start
            if self.chunks > chunk_budget(self.received):
                self._refuse(
                    413,
                    "Content Too Large",
                    f"the chunked body has {self.chunks} chunks for {self.received} bytes: send it in "
                    f"fewer, larger chunks (at most {CHUNKS_FREE} plus one per {CHUNK_MIN_AVERAGE} bytes)",
                )
        return event

    def _refuse(self, status: int, reason: str, message: str) -> None:
        self.refusal = Refusal(status, reason, message)
        raise self.refusal
