"""The server's configuration, its constants and its one error type (no framework imports)."""

from __future__ import annotations

from msgspec import Struct

FORMATS = ("json", "markdown", "slack")
MEDIA = {"json": "application/json", "markdown": "text/markdown; charset=utf-8", "slack": "application/json"}
RAW_TYPES = ("text/plain", "application/gzip", "application/x-gzip", "application/octet-stream")
ACCEPTED = (*RAW_TYPES, "application/json", "multipart/form-data")
SLACK_MAX_AGE = 300  # seconds: an older signed request is refused as a replay
SLACK_MAX_BYTES = 64 << 10  # a slash command is a few KB; Slack itself caps the text at about 4000 characters
GZIP_EXPANSION = 10  # a compressed body may expand to this many times --max-bytes
MAX_NAME = 200
MAX_PARTS = 8
DRAIN_BYTES = 1 << 30  # a refused body is read (and dropped) up to this much, so the client reads the answer
FD_RESERVE = 64  # file descriptors kept for the log, the worker pipes, imports; the rest may be connections
FD_PER_WORKER = 8
HEALTH_RESERVE = 16  # connections past the cap that may only ask for /healthz (the deployment's probe)


class ServerConfig(Struct, frozen=True):
    max_bytes: int = 20 << 20
    max_concurrency: int = 4
    timeout: float = 30.0
    token: str | None = None  # VLLM_TRIAGE_TOKEN; None: no auth (loopback or --insecure-no-auth)
    slack_secret: str | None = None  # SLACK_SIGNING_SECRET; None: the Slack endpoint is off
    extra_rules: tuple[str, ...] = ()
    header_timeout: float = 10.0  # seconds for a request's headers to arrive (slow-loris)
    max_connections: int = 1000  # open connections at once; lowered to fit the fd limit


class ApiError(Exception):
    """An answer other than 200: a status and one line for `{"error": ...}`."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


CLIENT_GONE = 499  # nginx's number for "the client closed the request": logged, never received


def too_large(limit: int) -> ApiError:
    return ApiError(413, f"the body is larger than the limit of {limit / (1 << 20):g} MiB ({limit} bytes)")


def accept_backlog(fd_soft_limit: int | None) -> int:
    """The listen queue, which is also how many connections asyncio accepts in one burst."""
    if fd_soft_limit is None or fd_soft_limit <= 0:
        return 2048
    return max(16, min(2048, fd_soft_limit // 8))


def connection_cap(wanted: int, concurrency: int, fd_soft_limit: int | None) -> int:
    """Connections the process can hold without running out of file descriptors.

    asyncio accepts up to a backlog of connections before any is seen (and refused above
    the cap), so a burst's worth of descriptors is kept free as well, and HEALTH_RESERVE more
    for connections admitted past the cap to answer /healthz."""
    if fd_soft_limit is None or fd_soft_limit <= 0:
        return wanted
    room = fd_soft_limit - FD_RESERVE - HEALTH_RESERVE - FD_PER_WORKER * concurrency - accept_backlog(fd_soft_limit)
    return max(8, min(wanted, room))
