"""/openapi.json says what the server does: validated, and every documented answer produced.

Each documented (path, method, status) is produced by a real request here, its Content-Type
is one the document declares for it, and a JSON body validates against the declared schema;
no request produces an undocumented status. README's HTTP section names the same routes
and error statuses.
"""

from __future__ import annotations

import json
import os
import re
import signal
import threading

import pytest

for _mod in ("fastapi", "uvicorn", "python_multipart"):
    pytest.importorskip(_mod, reason=f"the server tests need the [server] extra ({_mod} is not installed)")

from conftest import ROOT  # noqa: E402
from serve_support import (  # noqa: E402
    HANG,
    LOG,
    TOKEN,
    Answer,
    analysing,
    call,
    idle,
    post,
    raw,
    read_status,
    running,
    service,
    signed,
    slack_call,
    slash,
)

PAGES = {"/", "/docs", "/openapi.json"}  # for people and tools, outside the API document
AUTH = {"Authorization": f"Bearer {TOKEN}"}
FORM = "application/x-www-form-urlencoded"


@pytest.fixture(scope="module")
def spec():
    from triage.apps.serve.openapi import build

    return build()


def test_the_document_is_valid_openapi(spec):
    validator = pytest.importorskip("openapi_spec_validator", reason="needs openapi-spec-validator (the test extra)")
    validator.validate(spec)
    with running() as p:
        assert call(p, "GET", "/openapi.json").json() == json.loads(json.dumps(spec))
    triage_ok = spec["paths"]["/v1/triage"]["post"]["responses"]["200"]["content"]
    assert set(triage_ok) == {"application/json", "text/markdown"}
    assert triage_ok["application/json"]["schema"]["oneOf"] == [
        {"$ref": "#/components/schemas/Report"},
        {"$ref": "#/components/schemas/SlackMessage"},
    ]
    assert "422" not in json.dumps(spec["paths"])


def _documented(spec) -> set[tuple[str, str, int]]:
    return {
        (path, method.upper(), int(status))
        for path, ops in spec["paths"].items()
        for method, op in ops.items()
        for status in op["responses"]
    }


def _check(spec, path: str, method: str, answer: Answer, seen: set) -> None:
    """The answer's media type and body are what the document declares for its status."""
    declared = spec["paths"][path][method.lower()]["responses"].get(str(answer.status))
    assert declared is not None, f"{method} {path} answered an undocumented {answer.status}: {answer.body[:200]!r}"
    media = answer.headers["content-type"].split(";")[0]
    assert media in declared["content"], (path, answer.status, media)
    if media == "application/json":
        import jsonschema

        schema = {**declared["content"][media]["schema"], "components": spec["components"]}
        jsonschema.validate(answer.json(), schema)
    seen.add((path, method, answer.status))


def _in_thread(fn) -> tuple[threading.Thread, list]:
    out: list = []
    thread = threading.Thread(target=lambda: out.append(fn()))
    thread.start()
    return thread, out


def _busy_and_broken(p: int, spec, seen: set) -> None:
    """503 (the slot is busy), 504 (the analysis runs past --timeout), 500 (its worker dies)."""
    pool = service(p).pool
    thread, out = _in_thread(lambda: post(p, HANG + LOG[:2000], **AUTH))
    assert analysing(p)
    _check(spec, "/v1/triage", "POST", post(p, LOG[:2000], **AUTH), seen)  # 503
    thread.join(120)
    _check(spec, "/v1/triage", "POST", out[0], seen)  # 504
    assert idle(p)
    thread, out = _in_thread(lambda: post(p, HANG + LOG[:2000], **AUTH))
    assert analysing(p)
    os.kill(pool.busy_pids()[0], signal.SIGKILL)
    thread.join(120)
    assert out[0].status == 500, out[0].text
    _check(spec, "/v1/triage", "POST", out[0], seen)  # 500
    assert idle(p)


def _slow(p: int, path: str, headers: str) -> Answer:
    with raw(p, f"POST {path} HTTP/1.1\r\nHost: x\r\n{headers}Content-Length: 3000\r\n\r\n", b"text=abc") as s:
        status, data = read_status(s)
    head, _, body = data.partition(b"\r\n\r\n")
    ctype = re.search(rb"(?i)content-type: *([^\r]+)", head).group(1).decode()
    return Answer(status, {"content-type": ctype}, body)


def test_every_documented_status_is_produced(spec):
    seen: set = set()
    with running(token=TOKEN, max_bytes=4096, max_concurrency=1, timeout=4) as p:
        _check(spec, "/healthz", "GET", call(p, "GET", "/healthz"), seen)
        _check(spec, "/v1/rules", "GET", call(p, "GET", "/v1/rules", headers=AUTH), seen)
        _check(spec, "/v1/rules", "GET", call(p, "GET", "/v1/rules"), seen)
        _check(spec, "/metrics", "GET", call(p, "GET", "/metrics", headers=AUTH), seen)
        _check(spec, "/metrics", "GET", call(p, "GET", "/metrics"), seen)
        for answer in (
            post(p, LOG[:4000], **AUTH),
            post(p, LOG[:4000], path="/v1/triage?format=slack", **AUTH),
            post(p, LOG[:4000], path="/v1/triage?format=markdown", **AUTH),
            post(p, LOG[:4000], path="/v1/triage?format=pdf", **AUTH),
            post(p, LOG[:4000]),
            _slow(p, "/v1/triage", f"Authorization: Bearer {TOKEN}\r\nContent-Type: text/plain\r\n"),
            post(p, LOG * 10, **AUTH),
            post(p, b"<x/>", "application/xml", **AUTH),
        ):
            _check(spec, "/v1/triage", "POST", answer, seen)
        _busy_and_broken(p, spec, seen)
        body = slash(LOG[:3000].decode())
        signed_head = "".join(f"{k}: {v}\r\n" for k, v in signed(b"").items())
        for answer in (
            slack_call(p, body, signed(body)),
            slack_call(p, body, {}),
            _slow(p, "/v1/slack/command", f"Content-Type: {FORM}\r\n{signed_head}"),
            slack_call(p, slash("x" * 70000), signed(slash("x" * 70000))),
            call(p, "POST", "/v1/slack/command", body, {"Content-Type": "text/plain", **signed(body)}),
        ):
            _check(spec, "/v1/slack/command", "POST", answer, seen)
    with running(slack_secret=None) as p:
        _check(spec, "/v1/slack/command", "POST", slack_call(p, body, signed(body)), seen)
    assert seen == _documented(spec)


def test_readme_http_section_agrees_with_the_document(spec):
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## The HTTP backend", 1)[1].split("\n## ", 1)[0]
    table = [line for line in section.splitlines() if line.startswith("| `")]
    routes = {(m, p) for line in table for m, p in re.findall(r"`(GET|POST) (/[^`\s]*)`", line)}
    documented = {(method, path) for path, method, _ in _documented(spec)}
    assert {r for r in routes if r[1] not in PAGES} == documented
    assert {p for _, p in routes} >= PAGES
    errors = section.split("Errors are", 1)[1].split("\n\n", 1)[0]
    said = {int(s) for s in re.findall(r"\b([45]\d\d)\b", errors)}
    assert said == {status for _, _, status in _documented(spec) if status >= 400}
