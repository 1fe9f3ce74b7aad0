"""The HTTP backend (`vllm-triage serve`), tested over real HTTP on 127.0.0.1.

Each server runs uvicorn in a background thread on a port the kernel picked; requests go
through http.client or a raw socket (for slow and partial bodies), never a test client.
"""

from __future__ import annotations

import gzip
import io
import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

for _mod in ("fastapi", "uvicorn", "python_multipart"):
    pytest.importorskip(
        _mod,
        reason=f"the server tests need the [server] extra ({_mod} is not installed): pip install -e '.[test,server]'",
    )

from conftest import ROOT  # noqa: E402
from serve_support import (  # noqa: E402
    APPS,
    HANG,
    LOG,
    SLACK_SECRET,
    TOKEN,
    alive,
    analysing,
    call,
    children,
    expected_ids,
    idle,
    multipart,
    post,
    raw,
    read_status,
    running,
    signed,
    slack_call,
    slash,
    wait_for,
)

from triage import __version__  # noqa: E402
from triage.apps.serve.serve_cli import EXTRA_MISSING  # noqa: E402
from triage.apps.serve.slack_command import slack_unescape, verify_slack  # noqa: E402

HF = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh"  # 34 letters
SK = "sk-" + "proj1234567890abcdefghijklmn"
BEARER = "eyJhbGciOiJIUzI1NiJ9.payload0123456789.sig"
SECRETS = (HF, SK, BEARER, "hunter2hunter2")
SECRET_LOG = (
    "\n".join(
        [
            "INFO 07-01 10:00:00 [__init__.py:239] Automatically detected platform cuda.",
            "INFO 07-01 10:00:00 [api_server.py:1043] vLLM API server version 0.8.5",
            f"INFO 07-01 10:00:00 [cli_args.py:297] non-default args: {{'api_key': '{SK}', 'hf_token': '{HF}'}}",
            f"DEBUG 07-01 10:00:01 [http.py:9] headers: Authorization: Bearer {BEARER}",
            "Traceback (most recent call last):",
            '  File "/app/serve.py", line 3, in <module>',
            f"RuntimeError: login failed for token {HF} with api_key='{SK}' password=hunter2hunter2 "
            f"Authorization: Bearer {BEARER}",
        ]
    ).encode()
    + b"\n"
)
BINARY = b"\x7fELF\x02\x01\x01" + b"\x00" * 4000


@pytest.fixture(scope="module")
def port():
    with running() as p:
        yield p


@pytest.fixture(scope="module")
def auth_port():
    with running(token=TOKEN, slack_secret=None) as p:
        yield p


@pytest.fixture(scope="module")
def small_port():
    with running(max_bytes=4096) as p:
        yield p


# ---- the basics --------------------------------------------------------------------------------


def test_healthz_rules_and_docs(port):
    from triage.pipeline import load_rules

    assert call(port, "GET", "/healthz").json() == {"status": "ok", "version": __version__}
    listed = call(port, "GET", "/v1/rules").json()["rules"]
    assert [r["id"] for r in listed] == [r.id for r in load_rules()]
    assert all(set(r) == {"id", "cause", "title"} and r["title"] for r in listed)
    spec = call(port, "GET", "/openapi.json").json()
    assert {"/healthz", "/v1/rules", "/v1/triage", "/v1/slack/command"} <= set(spec["paths"])
    assert set(spec["paths"]["/v1/triage"]["post"]["requestBody"]["content"]) == {
        "text/plain",
        "application/json",
        "multipart/form-data",
    }
    docs = call(port, "GET", "/docs")
    assert docs.status == 200 and docs.headers["content-type"].startswith("text/html")
    assert "/static/docs.js" in docs.text and "swagger" not in docs.text.lower()
    missing = call(port, "GET", "/nope")
    assert missing.status == 404 and "error" in missing.json()


def test_text_plain_gives_the_json_report(port):
    r = post(port, LOG)
    assert r.status == 200 and r.headers["content-type"].startswith("application/json")
    report = r.json()
    assert report["schema_version"] == 1 and report["outcome"] == "failed"
    assert report["input"]["name"] == "request.log" and report["input"]["bytes"] == len(LOG)
    assert [d["id"] for d in report["diagnoses"]] == expected_ids(LOG)


def test_json_body_with_format_and_name(port):
    body = json.dumps({"log": LOG.decode(), "format": "markdown", "name": "node7/startup.log"}).encode()
    r = post(port, body, "application/json")
    assert r.status == 200 and r.headers["content-type"].startswith("text/markdown")
    assert r.text.startswith("## vllm-triage: failed") and "startup.log" in r.text
    r = post(port, json.dumps({"log": LOG.decode()}).encode(), "application/json; charset=utf-8")
    assert r.json()["outcome"] == "failed"


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
def test_multipart_upload(port, compress):
    data = gzip.compress(LOG) if compress else LOG
    body, ctype = multipart({"file": ("startup.log.gz" if compress else "startup.log", data)})
    report = post(port, body, ctype).json()
    assert report["input"]["compressed"] is compress and report["input"]["bytes"] == len(LOG)
    assert report["input"]["name"] == ("startup.log.gz" if compress else "startup.log")
    assert [d["id"] for d in report["diagnoses"]] == expected_ids(LOG)


def test_gzip_body_as_text_plain_is_detected_by_magic(port):
    assert post(port, gzip.compress(LOG)).json()["input"]["compressed"] is True


def test_format_selection(port):
    assert post(port, LOG, path="/v1/triage?format=markdown").text.startswith("## vllm-triage")
    assert post(port, LOG, Accept="text/markdown").text.startswith("## vllm-triage")
    assert post(port, LOG, Accept="application/json").json()["schema_version"] == 1
    slack = post(port, json.dumps({"log": LOG.decode(), "format": "slack"}).encode(), "application/json").json()
    assert isinstance(slack["blocks"], list) and slack["blocks"]
    body, ctype = multipart({"file": ("a.log", LOG), "format": (None, b"slack")})
    assert "blocks" in post(port, body, ctype).json()
    # the query beats the body's field, the field beats Accept
    both = post(
        port,
        json.dumps({"log": LOG.decode(), "format": "slack"}).encode(),
        "application/json",
        path="/v1/triage?format=json",
        Accept="text/markdown",
    )
    assert both.json()["schema_version"] == 1
    bad = post(port, LOG, path="/v1/triage?format=pdf")
    assert bad.status == 400 and "must be one of: json, markdown, slack" in bad.json()["error"]


# ---- refusals ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body, ctype, status, words",
    [
        (BINARY, "text/plain", 400, "binary"),
        (b"{not json", "application/json", 400, "not valid JSON"),
        (b'["a list"]', "application/json", 400, "must be an object"),
        (b'{"log": 7}', "application/json", 400, '"log"'),
        (b'{"log": "x", "extra": 1}', "application/json", 400, "unknown field"),
        (b"", "text/plain", 400, "empty"),
        (gzip.compress(LOG)[:2000], "text/plain", 400, "gzip"),
        (b"\x1f\x8b\x08\x00garbage" * 10, "text/plain", 400, "gzip"),
        (b"log=abc", "application/x-www-form-urlencoded", 415, "text/plain"),
        (b"<xml/>", "application/xml", 415, "unsupported content type"),
    ],
    ids=[
        "binary",
        "bad-json",
        "json-list",
        "json-log-type",
        "json-extra",
        "empty",
        "cut-gzip",
        "bad-gzip",
        "form",
        "xml",
    ],
)
def test_garbage_gets_a_clear_one_line_error(port, body, ctype, status, words):
    r = post(port, body, ctype)
    assert r.status == status, r.text
    message = r.json()["error"]
    assert words in message and "\n" not in message and len(message) < 300


def test_multipart_without_a_file_part(port):
    body, ctype = multipart({"log": (None, LOG[:100])})
    r = post(port, body, ctype)
    assert r.status == 400 and "'file'" in r.json()["error"]
    r = post(port, b"--x--\r\n", "multipart/form-data")
    assert r.status == 400 and "boundary" in r.json()["error"]


def test_oversized_bodies_get_413(small_port):
    # refused on Content-Length, before any of the body is read
    s = raw(
        small_port,
        "POST /v1/triage HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 999999999\r\n\r\n",
    )
    with s:
        status, data = read_status(s)
    assert status == 413 and b"larger than the limit" in data
    # no Content-Length (chunked): counted while it streams in
    r = call(
        small_port, "POST", "/v1/triage", iter([b"INFO x\n" * 400] * 3), {"Content-Type": "text/plain"}, chunked=True
    )
    assert r.status == 413 and "4096 bytes" in r.json()["error"]
    body, ctype = multipart({"file": ("big.log", b"INFO x\n" * 1000)})
    r = call(small_port, "POST", "/v1/triage", iter([body]), {"Content-Type": ctype}, chunked=True)
    assert r.status == 413
    # a small gzip that expands past the limit the body size allows
    bomb = gzip.compress(b"INFO 07-01 10:00:00 [x.py:1] nothing to see here\n" * 20000)
    assert len(bomb) < 4096
    r = post(small_port, bomb)
    assert r.status == 413 and "limit" in r.json()["error"]
    assert post(small_port, LOG[:3000]).status == 200


# ---- auth --------------------------------------------------------------------------------------


def test_bearer_token_accepted_and_refused(auth_port):
    ok = post(auth_port, LOG, Authorization=f"Bearer {TOKEN}")
    assert ok.status == 200 and ok.json()["outcome"] == "failed"
    for headers in (
        {},
        {"Authorization": "Bearer wrong-token"},
        {"Authorization": TOKEN},
        {"Authorization": f"Basic {TOKEN}"},
        {"Authorization": f"Bearer {TOKEN}x"},
    ):
        r = post(auth_port, LOG, **headers)
        assert r.status == 401 and r.headers.get("www-authenticate") == "Bearer", headers
        assert r.json() == {"error": "missing or wrong bearer token"}
    assert call(auth_port, "GET", "/v1/rules").status == 401
    assert call(auth_port, "GET", "/v1/rules", headers={"Authorization": f"Bearer {TOKEN}"}).status == 200
    assert call(auth_port, "GET", "/healthz").status == 200  # probes need no token
    assert (
        call(
            auth_port,
            "POST",
            "/v1/slack/command",
            slash("x"),
            {"Content-Type": "application/x-www-form-urlencoded", **signed(slash("x"))},
        ).status
        == 404
    )


# ---- Slack -------------------------------------------------------------------------------------


def test_slack_signed_command_gets_ephemeral_blocks(port):
    body = slash(LOG.decode())
    r = slack_call(port, body, signed(body))
    assert r.status == 200, r.text
    answer = r.json()
    assert answer["response_type"] == "ephemeral" and answer["blocks"] and answer["text"]
    empty = slack_call(port, slash(""), signed(slash("")))
    assert empty.status == 200 and "Paste a vLLM startup log" in empty.json()["text"]


def test_slack_bad_signature_and_replay_refused(port):
    body = slash(LOG.decode())
    forged = slack_call(port, body, signed(body, secret="not-the-secret"))
    assert forged.status == 401 and forged.json()["error"] == "bad Slack signature"
    tampered = slack_call(port, body + b"&x=1", signed(body))
    assert tampered.status == 401
    old = int(time.time()) - 301
    replay = slack_call(port, body, signed(body, ts=old))  # correctly signed, but too old
    assert replay.status == 401 and "replay" in replay.json()["error"]
    assert slack_call(port, body, {}).status == 401


def test_slack_helpers():
    body = b"text=abc"
    now = 1_700_000_000
    assert verify_slack(SLACK_SECRET, str(now), signed(body, now)["X-Slack-Signature"], body, now + 299) is None
    assert "replay" in verify_slack(SLACK_SECRET, str(now), signed(body, now)["X-Slack-Signature"], body, now + 301)
    assert verify_slack(SLACK_SECRET, "soon", "v0=00", body, now) is not None
    assert verify_slack(SLACK_SECRET, str(now), "v0=\u00e9", body, now) == "bad Slack signature"
    assert slack_unescape("a &lt;b&gt; &amp;lt;") == "a <b> &lt;"


# ---- secrets ----------------------------------------------------------------------------------


def test_planted_secrets_absent_from_every_answer(port, caplog):
    from triage.pipeline import Options, run

    raw_report = run(io.BytesIO(SECRET_LOG), "x", Options(redact=False)).model_dump_json()
    assert HF in raw_report and SK in raw_report  # the secrets do reach the report before redaction
    caplog.set_level(logging.INFO, logger="vllm_triage.serve")
    answers = [
        post(port, SECRET_LOG, path=f"/v1/triage?format={fmt}&note={HF}") for fmt in ("json", "markdown", "slack")
    ]
    answers.append(
        post(port, json.dumps({"log": SECRET_LOG.decode(), "name": f"run-{HF}.log"}).encode(), "application/json")
    )
    body, ctype = multipart({"file": (f"{HF}.log", gzip.compress(SECRET_LOG))})
    answers.append(post(port, body, ctype))
    answers.append(post(port, BINARY, path=f"/v1/triage?{HF}"))
    answers.append(post(port, json.dumps({"log": "\x00" * 500, "name": f"{HF}.log"}).encode(), "application/json"))
    slack_body = slash(SECRET_LOG.decode())
    answers.append(slack_call(port, slack_body, signed(slack_body)))
    assert all(a.status in (200, 400) for a in answers)
    assert sum(a.status == 200 for a in answers) == 6
    for a in answers:
        for secret in SECRETS:
            assert secret not in a.text
    assert "[REDACTED]" in answers[0].text
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "POST /v1/triage 200" in logged and "note=" not in logged
    assert not any(secret in logged for secret in SECRETS)


# ---- concurrency and time bounds (a HANG log never finishes: no test waits on parse speed) ----------


def test_busy_server_answers_503_then_recovers():
    with running(max_concurrency=1, timeout=600) as p:
        hung = raw(
            p,
            f"POST /v1/triage HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: {len(HANG)}\r\n\r\n",
            HANG,
        )
        assert analysing(p)  # the only slot is analysing
        busy = post(p, LOG)
        assert busy.status == 503 and busy.headers.get("retry-after") and "busy" in busy.json()["error"]
        hung.close()  # the client goes away: its worker is killed and its slot freed
        assert idle(p)
        assert post(p, LOG).status == 200


def test_slow_body_408_and_slow_analysis_504():
    with running(max_concurrency=1, timeout=3) as p:
        with raw(
            p,
            "POST /v1/triage HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 5000\r\n\r\n",
            b"INFO partial\n",
        ) as slow:
            status, _ = read_status(slow)
        assert status == 408
        r = post(p, HANG + LOG)
        assert r.status == 504 and "3 s" in r.json()["error"]


def test_a_timed_out_analysis_is_killed_not_left_running():
    with running(max_concurrency=1, timeout=3) as p:
        pool = APPS[p].state.service.pool
        (before,) = pool.pids()
        assert post(p, HANG + LOG).status == 504
        assert wait_for(lambda: pool.pids() not in ([], [before]))  # killed and replaced
        assert wait_for(lambda: not alive(before))
        assert idle(p)  # the successor has loaded its rules: an event, not a stopwatch
        assert post(p, LOG).status == 200


def test_a_worker_that_dies_is_replaced():
    with running(max_concurrency=1, timeout=600) as p:
        pool = APPS[p].state.service.pool
        (idle,) = pool.pids()
        os.kill(idle, signal.SIGKILL)  # while idle: the next request gets a fresh worker
        assert wait_for(lambda: not alive(idle))
        assert post(p, LOG).status == 200
        answer: list = []
        thread = threading.Thread(target=lambda: answer.append(post(p, HANG + LOG)))
        thread.start()
        assert analysing(p)  # the worker is analysing
        (busy,) = pool.busy_pids()
        os.kill(busy, signal.SIGKILL)
        thread.join(120)
        assert answer[0].status == 500 and "ended before it answered" in answer[0].json()["error"]
        assert post(p, LOG).status == 200


def test_analyses_run_in_separate_processes():
    with running(max_concurrency=2) as p:
        pids = APPS[p].state.service.pool.pids()
        assert len(pids) == 2 and os.getpid() not in pids


# ---- the command --------------------------------------------------------------------------------


def test_importing_the_cli_does_not_import_fastapi():
    code = "import sys, triage.apps.cli, triage.apps.serve; print('fastapi' in sys.modules, 'uvicorn' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "False False"


def test_missing_extra_is_one_line(monkeypatch):
    from triage.apps.cli import main

    monkeypatch.setitem(sys.modules, "fastapi", None)
    err = io.StringIO()
    assert main(["serve", "--port", "0"], stdout=io.StringIO(), stderr=err) == 2
    assert err.getvalue() == f"vllm-triage: {EXTRA_MISSING}\n"


def test_no_token_refuses_a_public_address(monkeypatch):
    from triage.apps.cli import main

    monkeypatch.delenv("VLLM_TRIAGE_TOKEN", raising=False)
    err = io.StringIO()
    assert main(["serve", "--host", "0.0.0.0", "--port", "0"], stdout=io.StringIO(), stderr=err) == 2
    assert err.getvalue().count("\n") == 1 and "--insecure-no-auth" in err.getvalue()
    err = io.StringIO()
    assert main(["serve", "--max-concurrency", "0"], stdout=io.StringIO(), stderr=err) == 2


def test_serve_command_end_to_end():
    env = {k: v for k, v in os.environ.items() if k not in ("VLLM_TRIAGE_TOKEN", "SLACK_SIGNING_SECRET")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "triage", "serve", "--port", "0", "--timeout", "20"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines = []
        while not any("listening on" in x for x in lines):
            line = proc.stderr.readline()
            assert line, f"the server stopped: {''.join(lines)}"
            lines.append(line)
        assert any("NOT authenticated" in x for x in lines)
        port = int(re.search(r"http://127\.0\.0\.1:(\d+)", lines[-1]).group(1))
        assert call(port, "GET", "/healthz").json()["status"] == "ok"
        assert post(port, SECRET_LOG, path=f"/v1/triage?x={HF}").status == 200
        # parser bombs: 400s, and the parsers' own complaints stay out of stderr
        body, ctype = multipart({"file": ("a.log", b"INFO x\n")}, boundary="b" * 300)
        assert post(port, body, ctype).status == 400
        assert post(port, b"garbage, not multipart", "multipart/form-data; boundary=B").status == 400
        assert post(port, b"[" * 5000 + b"]" * 5000, "application/json").status == 400
        workers = children(proc.pid)
        assert len(workers) >= 4  # one worker process per slot (and multiprocessing's helper)
        proc.send_signal(signal.SIGINT)  # Ctrl-C: the server stops, and its workers with it
        _, err = proc.communicate(timeout=20)
        assert proc.returncode in (0, 130), err  # 130: stopped by SIGINT, as shells count it
        assert wait_for(lambda: not any(alive(pid) for pid in workers)), "worker processes outlived the server"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)
    logged = "".join(lines) + err
    assert "POST /v1/triage 200" in logged and "x=" not in logged and HF not in logged
    assert "POST /v1/triage 400" in logged and "Traceback" not in logged
    for line in logged.splitlines():  # every line is the server's: its start lines or its log format
        assert line.startswith("vllm-triage: ") or re.match(r"\d{4}-\d\d-\d\d [\d:,]+ vllm-triage [A-Z]+ ", line), line
