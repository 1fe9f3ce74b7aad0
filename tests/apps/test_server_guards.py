"""The server under attack, over real sockets on 127.0.0.1: slow-header floods, half-sent
requests under `ulimit -n 1024`, ambiguous framing, chunk floods and forged access-log lines.

No test measures time: each counts answers and closed connections, with loops bounded in
rounds and waits bounded far above the normal wait.
"""

from __future__ import annotations

import io
import logging
import os
import re
import resource
import socket
import subprocess
import threading

import pytest

for _mod in ("fastapi", "uvicorn", "python_multipart"):
    pytest.importorskip(_mod, reason=f"the server tests need the [server] extra ({_mod} is not installed)")

from conftest import ROOT  # noqa: E402
from serve_support import GUARDS, call, read_all, read_status, running, wait_for, with_fd_limit  # noqa: E402

from triage.apps.serve.framing import CHUNKS_FREE, chunk_budget  # noqa: E402
from triage.apps.serve.protocol import ConnectionGuard  # noqa: E402
from triage.apps.serve.serve_cli import log_to  # noqa: E402


def _raise_fd_limit(need: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < need:
        pytest.skip(f"this test needs an open-files hard limit of {need} (it is {hard})")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, need), hard))


def _statuses(answers: list[bytes | None]) -> list[int]:
    return [int(a.split(b" ", 2)[1]) for a in answers if a]


# ---- slow headers ---------------------------------------------------------------------------


def test_slow_header_flood_is_timed_out_while_a_real_request_is_answered():
    _raise_fd_limit(2600)  # the server runs in this process: its sockets and the clients' together
    socks: list[socket.socket] = []
    with running(header_timeout=2, max_connections=1000) as port:
        try:
            for _ in range(1000):
                s = socket.create_connection(("127.0.0.1", port), timeout=60)
                s.sendall(b"GET /healthz HTTP/1.1\r\nHo")
                socks.append(s)
            for byte in (b"s", b"t", b":"):  # dripped: the header deadline is not moved by activity
                for s in socks:
                    try:
                        s.send(byte)
                    except OSError:  # already timed out or shed: closed all the same
                        pass
            r = call(port, "GET", "/healthz")
            assert r.status == 200, r.text  # the cap is full of slow clients: the oldest one makes room
            answers = read_all(socks, 120)
        finally:
            for s in socks:
                s.close()
    assert all(a is not None for a in answers), f"{sum(a is None for a in answers)} slow connections left open"
    statuses = _statuses(answers)
    assert statuses.count(408) > 900 and set(statuses) <= {408, 503}
    assert all(b"within 2 s" in a for a in answers if a and a.startswith(b"HTTP/1.1 408"))


def _guard_with(cap: int, reserve: int) -> ConnectionGuard:
    return ConnectionGuard(cap, 10.0, 0, 1.0, reserve)


class _Waiting:
    """A stand-in connection that waits for its request head until it is shed."""

    def __init__(self, guard: ConnectionGuard, kind: str, idle: bool = True) -> None:
        self.guard, self.kind, self.idle, self.was_shed = guard, kind, idle, False

    def shed(self) -> bool:
        if not self.idle:
            self.guard.wait(self, False)
            return False
        self.was_shed = True
        self.guard.release(self)
        return True


def test_the_cap_sheds_the_oldest_waiting_connection_then_admits_health_checks_then_refuses():
    guard = _guard_with(cap=3, reserve=1)
    conns = []
    for _ in range(3):
        conns.append(_Waiting(guard, guard.admit()))
        guard.wait(conns[-1], True)
    conns[0].idle = False  # in a request now, though still listed: skipped, never shed
    assert guard.admit() == "full" and conns[1].was_shed and not conns[0].was_shed
    guard.wait(conns[2], False)
    assert guard.admit() == "probation"  # nothing waits: one more, for /healthz only
    assert guard.admit() is None and guard.refused == 1
    assert guard.counts == {"full": 3, "probation": 1}


def test_a_client_that_stops_reading_its_answers_is_cut_off():
    """Pipelined requests whose answers are never read: the server's writes stall, and the
    connection (no longer waiting for a head, so never shed) is dropped at the write deadline."""
    with running(timeout=2) as port:
        guard = GUARDS[port]
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(("127.0.0.1", port))
        try:
            s.sendall(b"GET /static/page.js HTTP/1.1\r\nHost: x\r\n\r\n" * 2000)  # 2000 answers of 7 KiB, unread
            assert wait_for(lambda: guard.open == 1)
            assert wait_for(lambda: guard.open == 0, 120), "a client that reads nothing still holds its connection"
        finally:
            s.close()


# ---- descriptor exhaustion -----------------------------------------------------------------------


def test_healthz_answers_under_1100_half_sent_requests_with_ulimit_1024():
    _raise_fd_limit(1400)
    env = {k: v for k, v in os.environ.items() if k not in ("VLLM_TRIAGE_TOKEN", "SLACK_SIGNING_SECRET")}
    argv = [
        "-m",
        "triage",
        "serve",
        "--port",
        "0",
        "--max-concurrency",
        "1",
        "--header-timeout",
        "600",
        "--timeout",
        "600",
    ]
    proc = subprocess.Popen(
        with_fd_limit(1024, argv), cwd=ROOT, env=env, text=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    socks: list[socket.socket] = []
    try:
        first = [proc.stderr.readline() for _ in range(3)]
        port = int(re.search(r"127\.0\.0\.1:(\d+)", first[-1]).group(1))
        for _ in range(1100):  # whole headers, a tenth of the body: each sits in the app, reading
            s = socket.create_connection(("127.0.0.1", port), timeout=60)
            s.sendall(
                b"POST /v1/triage HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n"
                b"Content-Length: 100\r\n\r\nINFO part"
            )
            socks.append(s)
        for _ in range(3):  # the deployment's probe, three times over
            r = call(port, "GET", "/healthz")
            assert r.status == 200, r.text
        r = call(port, "POST", "/v1/triage", b"INFO x\n", {"Content-Type": "text/plain"})
        assert r.status == 503 and "only /healthz" in r.json()["error"]  # shed, in one clear line
    finally:
        for s in socks:
            s.close()
        proc.terminate()
        err = proc.communicate(timeout=60)[1]
    assert "Traceback" not in err and "Too many open files" not in err
    assert err.count("connection cap reached") <= 2


# ---- framing -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def port():
    with running(max_concurrency=1) as p:
        yield p


def _exchange(port: int, data: bytes) -> bytes:
    """Send `data`, then read every byte the server sends until it closes (bounded)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    try:
        s.sendall(data)
        got = b""
        for _ in range(1000):
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
        return got
    finally:
        s.close()


@pytest.mark.parametrize("order", ["cl-first", "te-first"])
def test_both_framing_headers_close_the_connection_and_a_smuggled_request_is_not_answered(port, order):
    framing = ["Content-Length: 5", "Transfer-Encoding: chunked"]
    if order == "te-first":
        framing.reverse()
    head = "POST /v1/triage HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n" + "\r\n".join(framing) + "\r\n\r\n"
    got = _exchange(port, head.encode() + b"0\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    assert got.startswith(b"HTTP/1.1 400") and b"RFC 9112" in got
    assert got.count(b"HTTP/1.1 ") == 1 and b'"status"' not in got  # the smuggled /healthz got no answer


def test_chunk_budget_lets_a_line_per_chunk_through_and_stops_byte_chunks():
    assert all(n <= chunk_budget(n * 40) for n in (1, 10_000, 1_000_000))  # 40-byte lines, one per chunk
    assert chunk_budget(CHUNKS_FREE * 2) < CHUNKS_FREE * 2  # one-byte chunks run out soon after the free ones


def test_a_million_one_byte_chunks_are_refused_and_health_checks_answered(port):
    head = b"POST /v1/triage HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n"
    s = socket.create_connection(("127.0.0.1", port), timeout=120)
    flood = threading.Thread(target=lambda: _send_quietly(s, head + b"1\r\nx\r\n" * 1_000_000 + b"0\r\n\r\n"))
    flood.start()
    try:
        status, data = read_status(s)
        health = [call(port, "GET", "/healthz").status for _ in range(3)]
    finally:
        flood.join(120)
        s.close()
    assert status == 413 and b"chunks" in data, data[:300]
    assert health == [200, 200, 200]


def _send_quietly(s: socket.socket, data: bytes) -> None:
    try:
        s.sendall(data)
    except OSError:  # the server refused and closed: the rest is not wanted
        pass


def test_chunked_uploads_of_real_sizes_still_work(port):
    lines = [b"INFO 07-01 10:00:00 [api_server.py:1043] vLLM API server version 0.8.5\n"] * 6000
    r = call(port, "POST", "/v1/triage", iter(lines), {"Content-Type": "text/plain"}, chunked=True)
    assert r.status == 200, r.text  # 6000 chunks, one line each: past the free chunks, within the budget


# ---- the access log ------------------------------------------------------------------------------


def test_the_access_log_writes_the_raw_path_one_line_per_request(port):
    paths = ("/healthz%0AINFO%20forged%20line", "/healthz%1B[2J%1B]52;c;aGk=%07", "/x%0D%0A%0D%0A")
    stream = io.StringIO()
    log_to(stream, True)
    try:
        for path in paths:
            call(port, "GET", path)
        # logged as each answer goes out (a line of an earlier test's request may come too)
        assert wait_for(lambda: all(f"GET {path} 404" in stream.getvalue() for path in paths))
    finally:
        for name in ("vllm_triage.serve", "uvicorn", "asyncio"):
            for handler in list(logging.getLogger(name).handlers):
                if getattr(handler, "stream", None) is stream:
                    logging.getLogger(name).removeHandler(handler)
    lines = stream.getvalue().splitlines()
    assert all(re.match(r"\d{4}-\d\d-\d\d [\d:,]+ vllm-triage [A-Z]+ ", line) for line in lines), lines
    assert [sum(f"GET {path} 404" in line for line in lines) for path in paths] == [1, 1, 1]
    assert not any(ch in stream.getvalue() for ch in "\x1b\x07\r")
