"""Servers and clients for the HTTP backend's tests: real uvicorn on 127.0.0.1, real sockets.

The worker processes run `hanging_worker`: the real worker loop, except that a log that
starts with HANG never finishes. Time limits, hang-ups and busy slots are tested with it, so
no test depends on how fast this machine parses a log.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import io
import json
import re
import selectors
import socket
import sys
import threading
import time
import urllib.parse
from contextlib import contextmanager
from pathlib import Path

import uvicorn
from conftest import FIXTURES

from triage.apps.serve.app import create_app
from triage.apps.serve.limits import ServerConfig
from triage.apps.serve.serve_cli import bind, uvicorn_config
from triage.apps.serve.workers import WorkerPool

TOKEN = "test-token-0123456789"
SLACK_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
LOG_PATH = sorted((FIXTURES / "cuda_graph_capture_oom").glob("*.log"))[-1]
LOG = LOG_PATH.read_bytes()
HANG = b"HANG (a test log that its worker never finishes)\n"
APPS: dict = {}  # port -> the app, for tests that look at its worker processes
GUARDS: dict = {}  # port -> its ConnectionGuard, for tests that count its open connections


def _hang_or_analyse(data: bytes, name: str, fmt: str, rules, limit: int) -> str:
    from triage.apps.serve.job import analyse_bytes

    if data.startswith(b"HANG"):
        threading.Event().wait()  # until the pool kills this process
    return analyse_bytes(data, name, fmt, rules, limit)


def hanging_worker(conn, extra_rules) -> None:
    from triage.apps.serve.workers import worker_main

    worker_main(conn, extra_rules, analyse=_hang_or_analyse)


def wait_for(predicate, seconds: float = 60) -> bool:
    """Poll a condition (an observable event), with a bound far above any normal wait."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


@contextmanager
def running(**overrides):
    config = ServerConfig(**{"slack_secret": SLACK_SECRET, **overrides})
    sock = bind("127.0.0.1", 0)
    app = create_app(config, WorkerPool(config.max_concurrency, config.extra_rules, target=hanging_worker))
    server = uvicorn.Server(uvicorn_config(app, config)[0])
    GUARDS[sock.getsockname()[1]] = server.config.http.guard
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    assert wait_for(lambda: server.started), "the test server did not start"
    port = sock.getsockname()[1]
    APPS[port] = app
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(30)
        app.state.service.close()


def service(port: int):
    return APPS[port].state.service


class Answer:
    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body

    @property
    def text(self) -> str:
        return self.body.decode()

    def json(self):
        return json.loads(self.body)


def call(
    port: int, method: str, path: str, body=None, headers: dict[str, str] | None = None, chunked: bool = False
) -> Answer:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request(method, path, body=body, headers=headers or {}, encode_chunked=chunked)
        r = conn.getresponse()
        return Answer(r.status, {k.lower(): v for k, v in r.getheaders()}, r.read())
    finally:
        conn.close()


def post(port: int, body: bytes, ctype: str = "text/plain", path: str = "/v1/triage", **headers) -> Answer:
    return call(port, "POST", path, body, {"Content-Type": ctype, **headers})


def multipart(fields: dict[str, tuple[str | None, bytes]], boundary: str = "----triage-test-7MA4YWxkTrZu0gW"):
    out = io.BytesIO()
    for name, (filename, data) in fields.items():
        out.write(f"--{boundary}\r\n".encode())
        disp = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
        out.write(f"Content-Disposition: {disp}\r\n".encode())
        if filename:
            out.write(b"Content-Type: application/octet-stream\r\n")
        out.write(b"\r\n" + data + b"\r\n")
    out.write(f"--{boundary}--\r\n".encode())
    return out.getvalue(), f"multipart/form-data; boundary={boundary}"


def raw(port: int, head: str, body: bytes = b"", timeout: float = 120) -> socket.socket:
    """A connection that sent headers (and maybe part of a body) and waits: a slow client."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(head.encode() + body)
    return s


def read_status(s: socket.socket) -> tuple[int, bytes]:
    """Status and the whole answer (headers, then as many body bytes as Content-Length says)."""
    data = b""
    while True:
        head, sep, body = data.partition(b"\r\n\r\n")
        length = re.search(rb"(?i)content-length: *(\d+)", head)
        if sep and length and len(body) >= int(length.group(1)):
            break
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    return int(data.split(b" ", 2)[1]), data


def signed(body: bytes, ts: int | None = None, secret: str = SLACK_SECRET) -> dict[str, str]:
    ts = int(time.time()) if ts is None else ts
    sig = hmac.new(secret.encode(), f"v0:{ts}:".encode() + body, hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": str(ts), "X-Slack-Signature": f"v0={sig}"}


def slash(text: str) -> bytes:
    return urllib.parse.urlencode({"command": "/triage", "text": text, "user_id": "U1"}).encode()


def slack_call(port: int, body: bytes, headers: dict[str, str]) -> Answer:
    return call(
        port, "POST", "/v1/slack/command", body, {"Content-Type": "application/x-www-form-urlencoded", **headers}
    )


def expected_ids(data: bytes) -> list[str]:
    from triage.pipeline import run

    return [d.id for d in run(io.BytesIO(data), "x").diagnoses]


def alive(pid: int) -> bool:
    """Whether a process runs (a zombie, killed and not yet reaped, counts as gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][:1] != "Z"
    except (OSError, IndexError):
        return False


def children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def idle(port: int) -> bool:
    """Every slot free and every worker (successors of killed ones too) ready: the server is at rest."""
    svc = service(port)
    return wait_for(lambda: svc.slots.taken == 0 and not svc.pool.busy_pids()) and svc.pool.wait_all_ready(120)


def analysing(port: int) -> bool:
    """A slot is taken and its worker is busy (what a HANG request looks like once it runs)."""
    svc = service(port)
    return wait_for(lambda: svc.slots.taken > 0 and bool(svc.pool.busy_pids()))


def with_fd_limit(soft: int, argv: list[str]) -> list[str]:
    """argv run under `ulimit -n soft` (set in the child before exec: no preexec_fn in a threaded parent)."""
    code = (
        "import os, resource, sys; r = resource.RLIMIT_NOFILE; "
        f"resource.setrlimit(r, ({soft}, resource.getrlimit(r)[1])); os.execv(sys.executable, sys.argv[1:])"
    )
    return [sys.executable, "-c", code, sys.executable, *argv]


def read_all(socks: list[socket.socket], seconds: float) -> list[bytes]:
    """What each connection got until the server closed it (bounded; an open one reads as None)."""
    got: dict[socket.socket, bytes] = {s: b"" for s in socks}
    sel = selectors.DefaultSelector()
    for s in socks:
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
    open_ = set(socks)
    deadline = time.monotonic() + seconds
    while open_ and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=1):
            s = key.fileobj
            try:
                chunk = s.recv(65536)
            except OSError:  # reset: closed all the same
                chunk = b""
            if chunk:
                got[s] += chunk
            else:
                sel.unregister(s)
                open_.discard(s)
    sel.close()
    return [got[s] if s not in open_ else None for s in socks]
