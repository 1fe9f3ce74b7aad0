"""`vllm-triage serve`: flags, the listening socket, logging, and uvicorn with the guards."""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import socket
import time
from typing import IO

from triage.apps.exit_codes import ArgParser
from triage.apps.serve.limits import DRAIN_BYTES, ServerConfig, accept_backlog, connection_cap
from triage.errors import UsageError

EXTRA_MISSING = (
    "the server needs the [server] extra (vllm-triage is not on PyPI): pip install '.[server]' "
    'in a checkout, or pip install "vllm-triage[server] @ git+URL"'
)
LOG_FORMAT = "%(asctime)s vllm-triage %(levelname)s %(message)s"
log = logging.getLogger("vllm_triage.serve")


def _env(name: str, default: str) -> str:
    return os.environ.get(name) or default


def _parser() -> argparse.ArgumentParser:
    p = ArgParser(
        prog="vllm-triage serve",
        description="Serve the triage over HTTP (the chat-ops backend).",
        epilog="Auth: set VLLM_TRIAGE_TOKEN (bearer token). Slack: set SLACK_SIGNING_SECRET.",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8080, help="port (default 8080; 0 picks a free one)")
    p.add_argument(
        "--max-bytes",
        default=_env("VLLM_TRIAGE_MAX_BYTES", "20MiB"),
        help="largest request body, e.g. 20MiB (env VLLM_TRIAGE_MAX_BYTES; default 20MiB)",
    )
    p.add_argument(
        "--max-concurrency",
        default=_env("VLLM_TRIAGE_MAX_CONCURRENCY", "4"),
        help="analyses at once; more get 503 (env VLLM_TRIAGE_MAX_CONCURRENCY; default 4)",
    )
    p.add_argument(
        "--timeout",
        default=_env("VLLM_TRIAGE_TIMEOUT", "30"),
        help="seconds per request; then 504 (env VLLM_TRIAGE_TIMEOUT; default 30)",
    )
    p.add_argument(
        "--header-timeout",
        default=_env("VLLM_TRIAGE_HEADER_TIMEOUT", "10"),
        help="seconds for a request's headers to arrive; then 408 (env VLLM_TRIAGE_HEADER_TIMEOUT; default 10)",
    )
    p.add_argument(
        "--max-connections",
        default=_env("VLLM_TRIAGE_MAX_CONNECTIONS", "1000"),
        help="open connections at once, lowered to fit the open-files limit; more get 503 "
        "(env VLLM_TRIAGE_MAX_CONNECTIONS; default 1000)",
    )
    p.add_argument("--rules", action="append", default=[], metavar="DIR_OR_FILE", help="add a rule pack")
    p.add_argument(
        "--insecure-no-auth",
        action="store_true",
        help="allow a non-loopback address without VLLM_TRIAGE_TOKEN (anyone can call it)",
    )
    p.add_argument("--no-access-log", action="store_true", help="do not log requests at all")
    return p


def _limits(args: argparse.Namespace) -> tuple[int, int, float, float, int]:
    from triage.units import parse_size

    try:
        max_bytes, concurrency, timeout = parse_size(args.max_bytes), int(args.max_concurrency), float(args.timeout)
        header_timeout, connections = float(args.header_timeout), int(args.max_connections)
    except ValueError as exc:
        raise UsageError(f"bad limit: {exc}") from None
    if max_bytes < 1 or concurrency < 1 or connections < 1 or not 0 < timeout < 86400 or not 0 < header_timeout < 86400:
        raise UsageError(
            "--max-bytes, --max-concurrency and --max-connections must be at least 1, "
            "--timeout and --header-timeout above 0"
        )
    return max_bytes, concurrency, timeout, header_timeout, connections


def fd_soft_limit() -> int | None:
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return None
    return None if soft == resource.RLIM_INFINITY else soft


def bind(host: str, port: int) -> socket.socket:
    """Bind before uvicorn starts, so the real address (port 0, a hostname) is known and checked."""
    try:
        family, kind, proto, _, addr = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr)
        sock.listen(2048)  # connections queue from now on, before uvicorn accepts them
    except OSError as exc:
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address.split("%")[0]).is_loopback
    except ValueError:  # a host name: judged on the address it binds to
        return address == "localhost"


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%")[0])
        return True
    except ValueError:
        return host == ""


def uvicorn_config(app, config: ServerConfig):
    """uvicorn with the connection guards (header timeout, connection cap, draining)."""
    import uvicorn

    from triage.apps.serve.protocol import ConnectionGuard, protocol_for

    fds = fd_soft_limit()
    cap = connection_cap(config.max_connections, config.max_concurrency, fds)
    guard = ConnectionGuard(cap, config.header_timeout, DRAIN_BYTES, config.timeout)
    return uvicorn.Config(
        app,
        http=protocol_for(guard),
        access_log=False,
        server_header=False,
        log_config=None,
        log_level="warning",
        timeout_keep_alive=5,
        lifespan="on",
        backlog=accept_backlog(fds),
    ), cap


def serve_command(argv: list[str], stdin, stdout: IO[str], stderr: IO[str]) -> int:
    """`vllm-triage serve --host H --port P`: runs until interrupted."""
    args = _parser().parse_args(argv)
    max_bytes, concurrency, timeout, header_timeout, connections = _limits(args)
    try:
        import fastapi  # noqa: F401
        import python_multipart  # noqa: F401
        import uvicorn
    except ImportError:
        raise UsageError(EXTRA_MISSING) from None
    token = os.environ.get("VLLM_TRIAGE_TOKEN") or None
    config = ServerConfig(
        max_bytes,
        concurrency,
        timeout,
        token,
        os.environ.get("SLACK_SIGNING_SECRET") or None,
        tuple(args.rules),
        header_timeout,
        connections,
    )
    refuse = UsageError(
        f"refusing to listen on {args.host} without VLLM_TRIAGE_TOKEN: set it, "
        "listen on 127.0.0.1, or pass --insecure-no-auth"
    )
    open_to_all = token is None and not args.insecure_no_auth
    if open_to_all and not is_loopback(args.host) and _is_ip(args.host):
        raise refuse  # before binding anything
    sock = bind(args.host, args.port)
    host, port = sock.getsockname()[:2]
    if open_to_all and not is_loopback(host):
        sock.close()
        raise refuse
    from triage.apps.serve.app import create_app

    app = create_app(config)
    log_to(stderr, not args.no_access_log)
    server_config, cap = uvicorn_config(app, config)
    _say_started(stderr, config, host, port, cap)
    server = uvicorn.Server(server_config)
    try:
        server.run(sockets=[sock])
    finally:
        app.state.service.close()
    return 0


def _say_started(stderr: IO[str], config: ServerConfig, host: str, port: int, cap: int) -> None:
    if config.token is None:
        stderr.write(
            "vllm-triage: VLLM_TRIAGE_TOKEN is not set: requests are NOT authenticated"
            f"{'' if is_loopback(host) else ' (--insecure-no-auth, on a non-loopback address)'}\n"
        )
    lowered = (
        f" (lowered from {config.max_connections} to fit the open-files limit)" if cap < config.max_connections else ""
    )
    stderr.write(
        f"vllm-triage: Slack endpoint {'on' if config.slack_secret else 'off (no SLACK_SIGNING_SECRET)'}; "
        f"limits: {config.max_bytes} bytes, {config.max_concurrency} at once, {config.timeout:g} s, "
        f"headers in {config.header_timeout:g} s, {cap} connections{lowered}\n"
    )
    stderr.write(
        f"vllm-triage: listening on http://{'[' + host + ']' if ':' in host else host}:{port} "
        "(paste page at /, API docs at /docs)\n"
    )
    stderr.flush()


class _OneLine(logging.Filter):
    """asyncio's complaints as one line each, without a traceback; running out of file
    descriptors at most once a minute (it would otherwise be logged for every accept)."""

    def __init__(self) -> None:
        super().__init__()
        self._last = -60.0

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if "out of system resource" in text:
            now = time.monotonic()
            if now - self._last < 60:
                return False
            self._last = now
            text = "accept() failed: out of file descriptors (raise `ulimit -n` or lower --max-connections)"
        elif record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            text = f"{text.splitlines()[0][:200]}: {type(exc).__name__}: {str(exc)[:200]}"
        record.msg, record.args, record.exc_info, record.exc_text = text.splitlines()[0], None, None, None
        return True


def log_to(stream: IO[str], access: bool) -> None:
    """Our log, uvicorn's and asyncio's, in one format on `stream`."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    log.addHandler(handler)
    log.setLevel(logging.INFO if access else logging.WARNING)
    log.propagate = False
    for name in ("uvicorn", "asyncio"):
        other = logging.getLogger(name)
        other.addHandler(handler)
        other.setLevel(logging.WARNING)
        other.propagate = False
    logging.getLogger("asyncio").addFilter(_OneLine())
