"""`vllm-triage serve`: the chat-ops backend, an HTTP API over the same `pipeline.run` as the CLI.

FastAPI and uvicorn are an optional extra (`vllm-triage[server]`), imported only when the
server starts. Requests never touch the disk: bodies are read into memory while counting
bytes against the limit, parsed in worker processes (`workers.py`) under a concurrency bound
and a time bound, and every answer is redacted. The access log names method, path and status only.
"""

import argparse
import hashlib
import hmac
import io
import ipaddress
import json
import logging
import os
import socket
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

from . import __version__
from .errors import InputError, UsageError

EXTRA_MISSING = ("the server needs the [server] extra (vllm-triage is not on PyPI): pip install '.[server]' "
                 "in a checkout, or pip install \"vllm-triage[server] @ git+URL\"")
FORMATS = ("json", "markdown", "slack")
MEDIA = {"json": "application/json", "markdown": "text/markdown; charset=utf-8", "slack": "application/json"}
RAW_TYPES = ("text/plain", "application/gzip", "application/x-gzip", "application/octet-stream")
ACCEPTED = (*RAW_TYPES, "application/json", "multipart/form-data")
SLACK_MAX_AGE = 300  # seconds: an older signed request is refused as a replay
GZIP_EXPANSION = 10  # a compressed body may expand to this many times --max-bytes
MAX_NAME = 200
MAX_PARTS = 8
log = logging.getLogger("vllm_triage.serve")


@dataclass(frozen=True)
class ServerConfig:
    max_bytes: int = 20 << 20
    max_concurrency: int = 4
    timeout: float = 30.0
    token: str | None = None          # VLLM_TRIAGE_TOKEN; None: no auth (loopback or --insecure-no-auth)
    slack_secret: str | None = None   # SLACK_SIGNING_SECRET; None: the Slack endpoint is off
    extra_rules: tuple[str, ...] = ()


class ApiError(Exception):
    """An answer other than 200: a status and one line for `{"error": ...}`."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


class _Cancelled(Exception):
    """The request that wanted the work gave up before a worker took it."""


class _Job:
    """One unit of parse work; it holds a concurrency slot until the work has really stopped.

    The thread that waits for the worker process sees the cancel flag within
    `workers.POLL_SECONDS`, kills the worker, and only then gives the slot back: the
    bound counts work, not requests.
    """

    def __init__(self, slots: threading.BoundedSemaphore) -> None:
        self.cancel, self._slots, self._lock, self._state = threading.Event(), slots, threading.Lock(), "waiting"

    def run(self, fn: Callable[[threading.Event], Any]) -> Any:
        with self._lock:
            if self._state != "waiting":
                raise _Cancelled()
            self._state = "running"
        try:
            return fn(self.cancel)
        finally:
            self._free()

    def abandon(self) -> None:
        """The request is done (answered or gone): free the slot unless a worker still holds it."""
        self.cancel.set()
        with self._lock:
            if self._state == "waiting":
                self._state = "freed"
                self._slots.release()

    def _free(self) -> None:
        with self._lock:
            self._state = "freed"
            self._slots.release()


# ---- pure helpers (no framework) -------------------------------------------------------------

def verify_slack(secret: str, timestamp: str | None, signature: str | None, body: bytes, now: float) -> str | None:
    """Slack request signing: None when valid, else why not (replays and forgeries)."""
    if not timestamp or not signature:
        return "missing X-Slack-Request-Timestamp or X-Slack-Signature"
    try:
        ts = int(timestamp)
    except ValueError:
        return "X-Slack-Request-Timestamp is not a number"
    if abs(now - ts) > SLACK_MAX_AGE:
        return "the Slack request timestamp is more than 5 minutes off: refused as a possible replay"
    base = b"v0:" + timestamp.encode() + b":" + body
    expected = "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected.encode(), signature.encode("utf-8", "replace")):
        return "bad Slack signature"
    return None


def token_ok(expected: str, given: str | None) -> bool:
    return given is not None and hmac.compare_digest(expected.encode(), given.encode("utf-8", "replace"))


def pick_format(query: str | None, field: str | None, accept: str | None) -> str:
    """`?format=` beats the body's `format` field, which beats the Accept header; JSON by default."""
    for value in (query, field):
        if value:
            if value not in FORMATS:
                raise ApiError(400, f"unknown format {value[:40]!r}; must be one of: {', '.join(FORMATS)}")
            return value
    for part in (accept or "").split(","):
        media = part.split(";")[0].strip().lower()
        if media in ("text/markdown", "text/x-markdown"):
            return "markdown"
        if media in ("application/json", "*/*", "application/*"):
            return "json"
    return "json"


def clean_name(name: Any, default: str) -> str:
    if not isinstance(name, str) or not name.strip():
        return default
    name = "".join(ch for ch in os.path.basename(name.replace("\\", "/")) if ch.isprintable())
    return name[:MAX_NAME] or default


def parse_json_body(body: bytes) -> tuple[bytes, str | None, str]:
    """`{"log": "...", "format": "...", "name": "..."}` -> (log bytes, format, name)."""
    try:
        data = json.loads(body)
    except UnicodeDecodeError:
        raise ApiError(400, "the JSON body is not UTF-8") from None
    except ValueError as exc:
        raise ApiError(400, f"the body is not valid JSON: {str(exc)[:120]}") from None
    if not isinstance(data, dict):
        raise ApiError(400, 'the JSON body must be an object: {"log": "...", "format": "json", "name": "..."}')
    unknown = sorted(set(data) - {"log", "format", "name"})
    if unknown:
        raise ApiError(400, f"unknown field {unknown[0][:40]!r} in the JSON body; known: log, format, name")
    if not isinstance(data.get("log"), str):
        raise ApiError(400, 'the JSON body needs "log": the startup log as a string')
    fmt = data.get("format")
    if fmt is not None and not isinstance(fmt, str):
        raise ApiError(400, '"format" must be a string')
    return data["log"].encode("utf-8", "replace"), fmt, clean_name(data.get("name"), "request.log")


def _too_large(exc: InputError) -> bool:
    return "larger than the limit" in exc.message or "expands past" in exc.message


def render_answer(report, fmt: str) -> str:
    """The report in one format; the last guard of redaction runs on the final text."""
    from .redact import redact_data, redact_text
    from .render import render

    if fmt == "json":
        return render(report, "json")
    if fmt == "markdown":
        return redact_text(render(report, "markdown"))
    return json.dumps(redact_data(slack_message(report)), ensure_ascii=False)


def slack_message(report) -> dict[str, Any]:
    """A Slack message (`text` + `blocks`): the registry's slack renderer when there is one."""
    from .render import render

    try:
        out = json.loads(render(report, "slack"))
        return out if isinstance(out, dict) else {"text": f"vllm-triage: {report.outcome}", "blocks": out}
    except (UsageError, ValueError):
        return _slack_fallback(report)


def _mrkdwn(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text[:2900]}}


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _slack_fallback(report) -> dict[str, Any]:
    from .render.common import command_line, headline

    blocks = [_mrkdwn(f"*vllm-triage: {report.outcome}*\n{_esc(headline(report))}")]
    if report.failure:
        blocks.append(_mrkdwn("```" + _esc(report.failure.message[:1500]).replace("`", "'") + "```"))
    if report.outcome == "failed" and not report.diagnoses:
        blocks.append(_mrkdwn("No known cause matched; see the failure above."))
    for i, d in enumerate(report.diagnoses[:5], 1):
        lines = [f"*{i}. {_esc(d.title)}*  `{d.id}` · confidence {d.confidence:.2f}", _esc(d.explanation)]
        for r in d.remedies:
            cmd = command_line(r).replace("`", "'")
            lines.append(f"• {'`' + _esc(cmd) + '`: ' if cmd else ''}{_esc(r.text)}")
        blocks += [{"type": "divider"}, _mrkdwn("\n".join(x for x in lines if x))]
    return {"text": f"vllm-triage: {report.outcome}", "blocks": blocks}


def slack_unescape(text: str) -> str:
    """Slack sends `&`, `<` and `>` of a slash command's text as HTML entities."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def analyse_bytes(data: bytes, name: str, fmt: str, rules, limit: int) -> str:
    """In a worker process: the pipeline (redacting, as always) and the renderer."""
    from .pipeline import Options, run

    report = run(io.BytesIO(data), name, Options(max_bytes=limit), rules)
    return render_answer(report, fmt)


# ---- the application -------------------------------------------------------------------------

class _Service:
    """The state behind the routes: limits, rules, the concurrency slots."""

    def __init__(self, config: ServerConfig) -> None:
        from .pipeline import load_rules
        from .workers import WorkerPool

        self.config = config
        self.rules = load_rules(config.extra_rules)
        self.slots = threading.BoundedSemaphore(config.max_concurrency)
        self.pool = WorkerPool(config.max_concurrency, config.extra_rules)  # one process per slot

    def close(self) -> None:
        self.pool.close()

    def authorize(self, credentials) -> None:
        if self.config.token is None:
            return
        if credentials is None or not token_ok(self.config.token, credentials.credentials):
            raise ApiError(401, "missing or wrong bearer token", {"WWW-Authenticate": "Bearer"})

    def check_length(self, headers) -> None:
        """Refuse early on Content-Length; the stream is counted as it arrives as well."""
        length = headers.get("content-length")
        if length is None:
            return
        if not length.isdigit():
            raise ApiError(400, "bad Content-Length header")
        if int(length) > self.config.max_bytes:
            raise self.too_large()

    def too_large(self) -> ApiError:
        mib = self.config.max_bytes / (1 << 20)
        return ApiError(413, f"the body is larger than the limit of {mib:g} MiB ({self.config.max_bytes} bytes)")

    def take_slot(self) -> _Job:
        if not self.slots.acquire(blocking=False):
            raise ApiError(503, f"busy: {self.config.max_concurrency} analyses are running; retry shortly",
                           {"Retry-After": "2"})
        return _Job(self.slots)

    async def read_body(self, request) -> bytes:
        from starlette.requests import ClientDisconnect

        buf = bytearray()
        try:
            async for chunk in request.stream():
                if len(buf) + len(chunk) > self.config.max_bytes:
                    raise self.too_large()
                buf += chunk
        except ClientDisconnect:
            raise ApiError(400, "the client went away before the body was complete") from None
        return bytes(buf)

    async def read_multipart(self, request) -> tuple[bytes, str | None, str]:
        """The `file` part (and optional `format`, `name` fields), parsed in memory as it streams."""
        from python_multipart.multipart import MultipartParser, parse_options_header
        from starlette.requests import ClientDisconnect

        _, params = parse_options_header(request.headers.get("content-type", ""))
        if not params.get(b"boundary"):
            raise ApiError(400, "the multipart body has no boundary")
        parts: list[dict[str, Any]] = []
        field, value = bytearray(), bytearray()

        def header_end() -> None:
            parts[-1]["headers"][bytes(field).lower()] = bytes(value)
            field.clear()
            value.clear()

        def begin() -> None:
            if len(parts) >= MAX_PARTS:
                raise ApiError(400, f"the multipart body has more than {MAX_PARTS} parts")
            parts.append({"headers": {}, "data": bytearray()})

        parser = MultipartParser(params[b"boundary"], {
            "on_part_begin": begin,
            "on_header_field": lambda d, s, e: field.extend(d[s:e]),
            "on_header_value": lambda d, s, e: value.extend(d[s:e]),
            "on_header_end": header_end,
            "on_part_data": lambda d, s, e: parts[-1]["data"].extend(d[s:e]),
        })
        total = 0
        try:
            async for chunk in request.stream():
                total += len(chunk)
                if total > self.config.max_bytes:
                    raise self.too_large()
                parser.write(chunk)
            parser.finalize()
        except ClientDisconnect:
            raise ApiError(400, "the client went away before the body was complete") from None
        except ValueError as exc:  # python-multipart's parse errors
            raise ApiError(400, f"malformed multipart body: {str(exc)[:120]}") from None
        return _multipart_fields(parts, parse_options_header)

    async def analyse(self, job: _Job, data: bytes, name: str, fmt: str, deadline: float) -> str:
        """Pipeline and renderer in a worker process (waited on from a thread), within the deadline."""
        import anyio
        from functools import partial

        from .workers import InternalError, WorkerDied

        work = partial(self.pool.run, data, name, fmt, self.config.max_bytes * GZIP_EXPANSION)
        try:
            with anyio.fail_after(max(0.0, deadline - time.monotonic())):
                return await anyio.to_thread.run_sync(job.run, work, abandon_on_cancel=True)
        except WorkerDied as exc:
            raise ApiError(500, f"{exc}; it may have run out of memory") from None
        except InternalError as exc:
            raise ApiError(500, f"internal error while analysing the log ({exc}); please report it") from None
        except TimeoutError:
            raise ApiError(504, f"the analysis took longer than the limit of {self.config.timeout:g} s") from None
        except InputError as exc:
            raise ApiError(413 if _too_large(exc) else 400, str(exc)) from None
        except zlib.error as exc:  # the reader lets some damaged deflate data through as this
            raise ApiError(400, f"damaged gzip input: {exc}") from None

    async def within(self, deadline: float, coro):
        """Await reading the body within the deadline (a slow upload cannot hold a slot forever)."""
        import anyio

        try:
            with anyio.fail_after(max(0.0, deadline - time.monotonic())):
                return await coro
        except TimeoutError:
            raise ApiError(408, f"the request body did not arrive within {self.config.timeout:g} s") from None


def _multipart_fields(parts: list[dict[str, Any]], parse_options_header) -> tuple[bytes, str | None, str]:
    found: dict[str, tuple[bytes, str | None]] = {}
    for part in parts:
        _, disp = parse_options_header(part["headers"].get(b"content-disposition", b""))
        name = disp.get(b"name", b"").decode("utf-8", "replace")
        filename = disp.get(b"filename")
        found.setdefault(name, (bytes(part["data"]), filename.decode("utf-8", "replace") if filename else None))
    if "file" not in found:
        raise ApiError(400, "the multipart body has no 'file' part: upload the log as the field 'file'")
    data, filename = found["file"]
    fmt = found["format"][0].decode("utf-8", "replace").strip() if "format" in found else None
    given = found["name"][0][:MAX_NAME].decode("utf-8", "replace") if "name" in found else None
    return data, fmt or None, clean_name(given or filename, "upload.log")


def _media_type(header: str | None) -> str:
    return (header or "").split(";")[0].strip().lower()


TRIAGE_OPENAPI = {"requestBody": {"required": True, "content": {
    "text/plain": {"schema": {"type": "string"}},
    "application/json": {"schema": {
        "type": "object", "required": ["log"], "additionalProperties": False,
        "properties": {"log": {"type": "string"}, "format": {"type": "string", "enum": list(FORMATS)},
                       "name": {"type": "string"}}}},
    "multipart/form-data": {"schema": {
        "type": "object", "required": ["file"],
        "properties": {"file": {"type": "string", "format": "binary", "description": "the log; gzip is detected"},
                       "format": {"type": "string", "enum": list(FORMATS)}, "name": {"type": "string"}}}},
}}}


def create_app(config: ServerConfig):
    """The FastAPI application; importing this module does not import FastAPI, calling this does."""
    from contextlib import asynccontextmanager

    from fastapi import Depends, FastAPI, Query, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse, Response
    from fastapi.security import HTTPBearer
    from pydantic import BaseModel
    from starlette.exceptions import HTTPException

    from .report import Report

    class ErrorBody(BaseModel):
        error: str

    service = _Service(config)
    bearer = HTTPBearer(auto_error=False, description="VLLM_TRIAGE_TOKEN of the server")
    errors = {s: {"model": ErrorBody} for s in (400, 401, 408, 413, 415, 500, 503, 504)}
    @asynccontextmanager
    async def lifespan(_app):
        yield
        service.close()  # the worker processes go with the server

    app = FastAPI(title="vllm-triage", version=__version__, lifespan=lifespan,
                  description="Why did a vLLM server fail to start? Post its startup log.")
    app.add_middleware(_AccessLog)
    app.state.service = service

    def error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
        from .redact import redact_text

        return JSONResponse({"error": redact_text(message)}, status, headers=headers)

    @app.exception_handler(ApiError)
    async def _api_error(request, exc: ApiError):
        return error(exc.status, exc.message, exc.headers)

    @app.exception_handler(HTTPException)
    async def _http_error(request, exc: HTTPException):
        return error(exc.status_code, str(exc.detail), getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def _invalid(request, exc: RequestValidationError):
        where = ", ".join(".".join(map(str, e.get("loc", ()))) + ": " + str(e.get("msg", "")) for e in exc.errors()[:3])
        return error(400, f"invalid request: {where}")

    def authorized(credentials=Depends(bearer)) -> None:
        service.authorize(credentials)

    @app.get("/healthz", summary="Liveness")
    async def healthz() -> dict[str, str]:
        return {"status": "ok", "version": __version__}

    @app.get("/v1/rules", dependencies=[Depends(authorized)], summary="The loaded rules", responses=errors)
    async def rules() -> dict[str, list[dict[str, str]]]:
        return {"rules": [{"id": r.id, "cause": r.cause, "title": r.title} for r in service.rules]}

    @app.post("/v1/triage", dependencies=[Depends(authorized)], summary="Diagnose a startup log",
              openapi_extra=TRIAGE_OPENAPI, responses={
                  200: {"model": Report, "description": "the report (JSON by default; Markdown or Slack blocks "
                        "with ?format=, the JSON field `format` or Accept: text/markdown)",
                        "content": {"text/markdown": {"schema": {"type": "string"}}}}, **errors})
    async def triage(request: Request, format: str | None = Query(None, json_schema_extra={"enum": list(FORMATS)})) -> Response:
        ctype = _media_type(request.headers.get("content-type"))
        if ctype not in ACCEPTED:
            raise ApiError(415, f"unsupported content type {ctype[:60] or '(none)'!r}: send the log as text/plain, "
                           'as application/json {"log": ...} or as a multipart/form-data upload (field \'file\')')
        pick_format(format, None, None)
        service.check_length(request.headers)
        deadline = time.monotonic() + config.timeout
        job = service.take_slot()
        try:
            if ctype == "multipart/form-data":
                data, field, name = await service.within(deadline, service.read_multipart(request))
            elif ctype == "application/json":
                data, field, name = parse_json_body(await service.within(deadline, service.read_body(request)))
            else:
                data, field, name = await service.within(deadline, service.read_body(request)), None, "request.log"
            fmt = pick_format(format, field, request.headers.get("accept"))
            if not data.strip():
                raise ApiError(400, "the body is empty: send a vLLM startup log")
            text = await service.analyse(job, data, name, fmt, deadline)
        finally:
            job.abandon()
        return Response(text, media_type=MEDIA[fmt], headers={"Cache-Control": "no-store"})

    @app.post("/v1/slack/command", summary="Slack slash command (signed by Slack)", responses=errors)
    async def slack(request: Request) -> Response:
        if config.slack_secret is None:
            raise ApiError(404, "the Slack endpoint is off: the server has no SLACK_SIGNING_SECRET")
        if _media_type(request.headers.get("content-type")) != "application/x-www-form-urlencoded":
            raise ApiError(415, "a Slack command is application/x-www-form-urlencoded")
        service.check_length(request.headers)
        deadline = time.monotonic() + config.timeout
        body = await service.within(deadline, service.read_body(request))
        problem = verify_slack(config.slack_secret, request.headers.get("x-slack-request-timestamp"),
                               request.headers.get("x-slack-signature"), body, time.time())
        if problem:
            raise ApiError(401, problem)
        return JSONResponse(await _slack_answer(service, body, deadline), headers={"Cache-Control": "no-store"})

    return app


async def _slack_answer(service: _Service, body: bytes, deadline: float) -> dict[str, Any]:
    """A verified command: blocks for the user alone; a problem is said in the channel, not as an HTTP error."""
    from urllib.parse import parse_qs

    text = slack_unescape(parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True).get("text", [""])[0])
    if not text.strip():
        return {"response_type": "ephemeral", "text": "Paste a vLLM startup log after the command: `/triage <log>`"}
    try:
        job = service.take_slot()
        try:
            message = json.loads(await service.analyse(job, text.encode("utf-8"), "slack.log", "slack", deadline))
        finally:
            job.abandon()
    except ApiError as exc:
        from .redact import redact_text

        return {"response_type": "ephemeral", "text": f"vllm-triage: {redact_text(exc.message)}"}
    return {"response_type": "ephemeral", **message}


class _AccessLog:
    """ASGI middleware: one line per request (method, path, status, time), never a query or a body.

    It also turns an unexpected exception into a bare 500, so no traceback (which may quote
    request content) reaches the server's log.
    """

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state = {"status": 500, "started": False}

        async def watch(message) -> None:
            if message["type"] == "http.response.start":
                state["status"], state["started"] = message["status"], True
            await send(message)

        start = time.perf_counter()
        try:
            await self.app(scope, receive, watch)
        except Exception as exc:  # noqa: BLE001 - the server's last guard
            log.error("internal error: %s", type(exc).__name__)
            if not state["started"]:
                await _send_json(send, 500, {"error": "internal error"})
        finally:
            from .redact import redact_text

            path = redact_text(scope.get("path", ""))[:200]
            log.info("%s %s %s %.0fms", scope.get("method"), path, state["status"], (time.perf_counter() - start) * 1e3)


async def _send_json(send, status: int, data: dict[str, Any]) -> None:
    body = json.dumps(data).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


# ---- the command ----------------------------------------------------------------------------

def _env(name: str, default: str) -> str:
    return os.environ.get(name) or default


def _parser() -> argparse.ArgumentParser:
    from .cli import _Parser

    p = _Parser(prog="vllm-triage serve", description="Serve the triage over HTTP (the chat-ops backend).",
                epilog="Auth: set VLLM_TRIAGE_TOKEN (bearer token). Slack: set SLACK_SIGNING_SECRET.")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8080, help="port (default 8080; 0 picks a free one)")
    p.add_argument("--max-bytes", default=_env("VLLM_TRIAGE_MAX_BYTES", "20MiB"),
                   help="largest request body, e.g. 20MiB (env VLLM_TRIAGE_MAX_BYTES; default 20MiB)")
    p.add_argument("--max-concurrency", default=_env("VLLM_TRIAGE_MAX_CONCURRENCY", "4"),
                   help="analyses at once; more get 503 (env VLLM_TRIAGE_MAX_CONCURRENCY; default 4)")
    p.add_argument("--timeout", default=_env("VLLM_TRIAGE_TIMEOUT", "30"),
                   help="seconds per request; then 504 (env VLLM_TRIAGE_TIMEOUT; default 30)")
    p.add_argument("--rules", action="append", default=[], metavar="DIR_OR_FILE", help="add a rule pack")
    p.add_argument("--insecure-no-auth", action="store_true",
                   help="allow a non-loopback address without VLLM_TRIAGE_TOKEN (anyone can call it)")
    p.add_argument("--no-access-log", action="store_true", help="do not log requests at all")
    return p


def _limits(args: argparse.Namespace) -> tuple[int, int, float]:
    from .units import parse_size

    try:
        max_bytes, concurrency, timeout = parse_size(args.max_bytes), int(args.max_concurrency), float(args.timeout)
    except ValueError as exc:
        raise UsageError(f"bad limit: {exc}") from None
    if max_bytes < 1 or concurrency < 1 or not 0 < timeout < 86400:
        raise UsageError("--max-bytes and --max-concurrency must be at least 1, --timeout above 0")
    return max_bytes, concurrency, timeout


def bind(host: str, port: int) -> socket.socket:
    """Bind before uvicorn starts, so the real address (port 0, a hostname) is known and checked."""
    try:
        family, kind, proto, _, addr = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                                                          flags=socket.AI_PASSIVE)[0]
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


def serve_command(argv: list[str], stdin, stdout: IO[str], stderr: IO[str]) -> int:
    """`vllm-triage serve --host H --port P`: runs until interrupted."""
    args = _parser().parse_args(argv)
    max_bytes, concurrency, timeout = _limits(args)
    try:
        import fastapi  # noqa: F401
        import python_multipart  # noqa: F401
        import uvicorn
    except ImportError:
        raise UsageError(EXTRA_MISSING) from None
    token = os.environ.get("VLLM_TRIAGE_TOKEN") or None
    config = ServerConfig(max_bytes, concurrency, timeout, token, os.environ.get("SLACK_SIGNING_SECRET") or None,
                          tuple(args.rules))
    refuse = UsageError(f"refusing to listen on {args.host} without VLLM_TRIAGE_TOKEN: set it, "
                        "listen on 127.0.0.1, or pass --insecure-no-auth")
    open_to_all = token is None and not args.insecure_no_auth
    if open_to_all and not is_loopback(args.host) and _is_ip(args.host):
        raise refuse  # before binding anything
    sock = bind(args.host, args.port)
    host, port = sock.getsockname()[:2]
    if open_to_all and not is_loopback(host):
        sock.close()
        raise refuse
    app = create_app(config)
    _log_to(stderr, not args.no_access_log)
    if token is None:
        stderr.write("vllm-triage: VLLM_TRIAGE_TOKEN is not set: requests are NOT authenticated"
                     f"{'' if is_loopback(host) else ' (--insecure-no-auth, on a non-loopback address)'}\n")
    stderr.write(f"vllm-triage: Slack endpoint {'on' if config.slack_secret else 'off (no SLACK_SIGNING_SECRET)'}; "
                 f"limits: {max_bytes} bytes, {concurrency} at once, {timeout:g} s\n")
    stderr.write(f"vllm-triage: listening on http://{'[' + host + ']' if ':' in host else host}:{port} "
                 "(API docs at /docs)\n")
    stderr.flush()
    server = uvicorn.Server(uvicorn.Config(app, access_log=False, server_header=False, log_level="warning"))
    try:
        server.run(sockets=[sock])
    finally:
        app.state.service.close()
    return 0


def _log_to(stream: IO[str], access: bool) -> None:
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(asctime)s vllm-triage %(levelname)s %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO if access else logging.WARNING)
    log.propagate = False
