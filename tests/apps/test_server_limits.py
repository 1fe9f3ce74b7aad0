"""The server's own limits, each attacked over a real socket on 127.0.0.1.

Slow clients, hang-ups, unsigned floods, parser bombs, refused bodies and a connection flood
under a low open-files limit. No test measures time: each waits for an observable event
(a worker busy, a connection closed, a process gone) with a bound far above the normal wait.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import resource
import socket
import subprocess

import pytest

for _mod in ("fastapi", "uvicorn", "python_multipart"):
    pytest.importorskip(_mod, reason=f"the server tests need the [server] extra ({_mod} is not installed)")

from conftest import ROOT  # noqa: E402
from serve_support import (  # noqa: E402
    HANG,
    LOG,
    alive,
    analysing,
    call,
    idle,
    multipart,
    post,
    raw,
    read_all,
    read_status,
    running,
    service,
    signed,
    slash,
    wait_for,
    with_fd_limit,
)

SLOW_HEAD = "POST /v1/triage HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: {n}\r\n\r\n"


@pytest.fixture(scope="module")
def port():
    with running(max_concurrency=1, timeout=600, max_bytes=4096) as p:
        yield p


def _idle(port: int) -> None:
    assert idle(port)


# ---- 2. slow bodies do not take analysis slots ------------------------------------------------


def test_slow_uploads_do_not_take_the_analysis_slots(port):
    slow = [raw(port, SLOW_HEAD.format(n=4000), b"INFO partial\n") for _ in range(2)]  # 2 > --max-concurrency
    try:
        assert wait_for(lambda: service(port).receiving == 2)  # both are in the handler, reading
        r = post(port, LOG[:4000])
        assert r.status == 200, r.text  # the slot is taken when the analysis starts, not before the body
    finally:
        for s in slow:
            s.close()
    assert wait_for(lambda: service(port).receiving == 0)


# ---- 3. a hang-up is noticed while analysing ----------------------------------------------------


@pytest.mark.parametrize("path", ["/v1/triage", "/v1/slack/command"])
def test_a_client_that_hangs_up_has_its_worker_killed(port, path):
    _idle(port)
    pool = service(port).pool
    if path == "/v1/triage":
        s = raw(port, SLOW_HEAD.format(n=len(HANG)), HANG)
    else:
        body = b"text=HANG"
        head = "".join(f"{k}: {v}\r\n" for k, v in signed(body).items())
        s = raw(
            port,
            f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\n"
            f"{head}Content-Length: {len(body)}\r\n\r\n",
            body,
        )
    assert analysing(port)
    (busy,) = pool.busy_pids()
    s.close()  # --timeout is 600 s and a HANG log never ends: only the hang-up can stop this worker
    assert wait_for(lambda: not alive(busy) and busy not in pool.pids())
    _idle(port)
    assert post(port, LOG[:4000]).status == 200  # the slot came back


# ---- 4. Slack: headers and size before the body ------------------------------------------------


def test_unsigned_slack_requests_are_refused_before_the_body(port):
    head = (
        "POST /v1/slack/command HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\n"
        "Content-Length: 19922944\r\n{extra}\r\n"
    )
    with raw(port, head.format(extra="")) as s:  # no body is sent: the answer cannot wait for it
        status, data = read_status(s)
    assert status == 401 and b"X-Slack-Signature" in data
    stale = "X-Slack-Request-Timestamp: 1000\r\nX-Slack-Signature: v0=00\r\n"
    with raw(port, head.format(extra=stale)) as s:
        assert read_status(s)[0] == 401
    fresh = "".join(f"{k}: {v}\r\n" for k, v in signed(b"x").items())
    with raw(port, head.format(extra=fresh)) as s:  # signed headers, 19 MiB announced: over the 64 KB cap
        status, data = read_status(s)
    assert status == 413 and b"65536 bytes" in data
    big = slash("x" * 70000)
    r = call(
        port,
        "POST",
        "/v1/slack/command",
        iter([big]),
        {"Content-Type": "application/x-www-form-urlencoded", **signed(big)},
        chunked=True,
    )
    assert r.status == 413  # no Content-Length: counted while it streams in


# ---- 5. parser errors are 400s ------------------------------------------------------------------


def test_parser_bombs_get_400_not_500(port):
    body, ctype = multipart({"file": ("a.log", b"INFO x\n")}, boundary="b" * 300)
    r = post(port, body, ctype)
    assert r.status == 400 and "multipart" in r.json()["error"]
    r = post(port, b"[" * 2000 + b"]" * 2000, "application/json")
    assert r.status == 400 and "nested too deeply" in r.json()["error"]
    r = post(port, b'{"log": ' + b"[" * 2000 + b"]" * 2000 + b"}", "application/json")
    assert r.status == 400
    r = post(port, b"garbage that is no multipart body", "multipart/form-data; boundary=B")
    assert r.status == 400 and "malformed multipart body" in r.json()["error"]


# ---- 6. a refused body is drained, so the client reads the answer ---------------------------------


@pytest.mark.parametrize("connection", ["close", "keep-alive"])
def test_a_refused_body_is_drained_so_the_client_reads_the_413(port, connection):
    body = b"INFO x\n" * ((64 << 20) // 7)  # 64 MiB, sent whole before reading, as urllib and requests do
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request("POST", "/v1/triage", body=body, headers={"Content-Type": "text/plain", "Connection": connection})
        r = conn.getresponse()
        assert r.status == 413 and "4096 bytes" in json.loads(r.read())["error"]
    finally:
        conn.close()
    assert post(port, LOG[:4000]).status == 200


# ---- 1. a connection flood under a low open-files limit ---------------------------------------------


def test_a_connection_flood_under_ulimit_1024_is_capped_and_timed_out():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1400:
        pytest.skip(f"this test opens 1100 connections and needs an open-files hard limit of 1400 (it is {hard})")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1400), hard))
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
        "2",
        "--no-access-log",
    ]
    proc = subprocess.Popen(
        with_fd_limit(1024, argv), cwd=ROOT, env=env, text=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    socks: list[socket.socket] = []
    try:
        first = [proc.stderr.readline() for _ in range(3)]
        port = int(re.search(r"127\.0\.0\.1:(\d+)", first[-1]).group(1))
        assert "connections (lowered from 1000" in first[1]
        for _ in range(1100):  # half a request line each, never finished (slow-loris)
            s = socket.create_connection(("127.0.0.1", port), timeout=60)
            s.sendall(b"POST /v1/triage HTTP/1.1\r\nHost: x\r\n")
            socks.append(s)
        answers = read_all(socks, 120)
        assert all(a is not None for a in answers), f"{sum(a is None for a in answers)} connections left open"
        statuses = [int(a.split(b" ", 2)[1]) for a in answers if a]
        assert statuses.count(408) > 500 and set(statuses) <= {408, 503}
        assert call(port, "GET", "/healthz").status == 200
    finally:
        for s in socks:
            s.close()
        proc.terminate()
        err = proc.communicate(timeout=60)[1]
    assert "Traceback" not in err and "Too many open files" not in err
    assert len(err) < 5000 and err.count("connection cap reached") <= 2
