"""The FastAPI application: routes, error answers, the access log.

Handlers find the server's state on `request.app.state.service`; every error is
`{"error": "..."}` (redacted) with the statuses `openapi.py` declares.
"""

from __future__ import annotations

import hmac
import logging
import time
from contextlib import asynccontextmanager

from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException

from triage import __version__
from triage.apps.serve import openapi, page
from triage.apps.serve.limits import ACCEPTED, MEDIA, SLACK_MAX_BYTES, ApiError, ServerConfig
from triage.apps.serve.requests import check_length, clean_name, media_type, parse_json_body, pick_format
from triage.apps.serve.service import Service
from triage.apps.serve.slack_command import slack_answer, slack_headers_problem, verify_slack
from triage.apps.serve.workers import WorkerPool
from triage.diagnose.redaction import SERVER

log = logging.getLogger("vllm_triage.serve")
NO_STORE = {"Cache-Control": "no-store"}
router = APIRouter()


def _service(request: Request) -> Service:
    return request.app.state.service


def _authorize(request: Request) -> None:
    expected = _service(request).config.token
    if expected is None:
        return
    scheme, _, given = (request.headers.get("authorization") or "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(
        expected.encode(), given.strip().encode("utf-8", "replace")
    ):
        raise ApiError(401, "missing or wrong bearer token", {"WWW-Authenticate": "Bearer"})


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok", "version": __version__}


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    """Prometheus text exposition; behind the bearer token when the server has one."""
    from triage.apps.serve.metrics import CONTENT_TYPE

    _authorize(request)
    return Response(request.app.state.metrics.exposition(), media_type=CONTENT_TYPE, headers=NO_STORE)


@router.get("/v1/rules")
async def rules(request: Request) -> dict[str, list[dict[str, str]]]:
    _authorize(request)
    return {"rules": [{"id": r.id, "cause": r.cause, "title": r.title} for r in _service(request).rules]}


async def _read_log(service: Service, request: Request, ctype: str, deadline: float):
    if ctype == "multipart/form-data":
        return await service.read_multipart(request, deadline)
    body = await service.read_body(request, service.config.max_bytes, deadline)
    if ctype == "application/json":
        return parse_json_body(body)
    return body, None, "request.log"


@router.post("/v1/triage")
async def triage(request: Request) -> Response:
    _authorize(request)
    service = _service(request)
    ctype = media_type(request.headers.get("content-type"))
    if ctype not in ACCEPTED:
        raise ApiError(
            415,
            f"unsupported content type {ctype[:60] or '(none)'!r}: send the log as text/plain, "
            "as application/json {\"log\": ...} or as a multipart/form-data upload (field 'file')",
        )
    query = request.query_params.get("format")
    pick_format(query, None, None)
    given_name = _query_name(request)
    check_length(request.headers, service.config.max_bytes)
    deadline = time.monotonic() + service.config.timeout
    data, field, name = await _read_log(service, request, ctype, deadline)
    fmt = pick_format(query, field, request.headers.get("accept"))
    if not data.strip():
        raise ApiError(400, "the body is empty: send a vLLM startup log")
    text = await service.analyse(request.receive, data, given_name or name, fmt, deadline)  # type: ignore[arg-type]
    request.app.state.metrics.report(text)
    return Response(text, media_type=MEDIA[fmt], headers=NO_STORE)


def _query_name(request: Request) -> str | None:
    """`?name=` names the log in the report (it wins over the body's); an empty one is refused."""
    if "name" not in request.query_params:
        return None
    name = clean_name(request.query_params["name"], "")
    if not name:
        raise ApiError(400, "?name= is empty: give the log's file name, or leave the parameter out")
    return name


@router.post("/v1/slack/command")
async def slack(request: Request) -> Response:
    """Headers first (secret, type, signature headers, length), then at most 64 KB of body, then the HMAC."""
    service = _service(request)
    secret = service.config.slack_secret
    if secret is None:
        raise ApiError(404, "the Slack endpoint is off: the server has no SLACK_SIGNING_SECRET")
    if media_type(request.headers.get("content-type")) != "application/x-www-form-urlencoded":
        raise ApiError(415, "a Slack command is application/x-www-form-urlencoded")
    stamp, signature = request.headers.get("x-slack-request-timestamp"), request.headers.get("x-slack-signature")
    problem = slack_headers_problem(stamp, signature, time.time())
    if problem:
        raise ApiError(401, problem)
    check_length(request.headers, SLACK_MAX_BYTES)
    deadline = time.monotonic() + service.config.timeout
    body = await service.read_body(request, SLACK_MAX_BYTES, deadline)
    problem = verify_slack(secret, stamp, signature, body, time.time())
    if problem:
        raise ApiError(401, problem)

    async def analyse(text: bytes) -> str:
        answer = await service.analyse(request.receive, text, "slack.log", "slack", deadline)  # type: ignore[arg-type]
        request.app.state.metrics.report(answer)
        return answer

    return JSONResponse(await slack_answer(body, analyse), headers=NO_STORE)


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": SERVER.text(message)}, status, headers=headers)


async def _api_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return _error(exc.status, exc.message, exc.headers)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    return _error(exc.status_code, str(exc.detail), getattr(exc, "headers", None))


async def _invalid(request: Request, exc: Exception) -> JSONResponse:
    return _error(400, "invalid request")


def _page_routes(app: FastAPI) -> None:
    files = page.load()
    for path, (data, media) in files.items():

        async def serve_file(data: bytes = data, media: str = media) -> Response:
            return Response(data, media_type=media, headers=page.PAGE_HEADERS)

        app.add_api_route(path, serve_file, methods=["GET"], include_in_schema=False)


def create_app(config: ServerConfig, pool: WorkerPool | None = None) -> FastAPI:
    """The application; `pool` replaces the worker pool (tests give one whose workers can hang)."""
    service = Service(config, pool)

    @asynccontextmanager
    async def lifespan(_app):
        yield
        service.close()  # the worker processes go with the server

    app = FastAPI(title="vllm-triage", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None)
    app.openapi = openapi.build  # type: ignore[method-assign]
    app.state.service = service
    app.state.metrics = _metrics(service)
    app.add_middleware(AccessLog)
    app.add_middleware(lambda app, metrics: metrics.middleware(app), metrics=app.state.metrics)
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _invalid)
    app.include_router(router)
    _page_routes(app)
    return app


def logged_path(scope) -> str:
    """The path as the client sent it (still %-encoded), every byte outside printable ASCII as `\\xNN`.

    The decoded path would let `%0A` start a forged log line and `%1B` write a terminal
    escape into the operator's log; the raw one cannot, whatever the request holds."""
    raw = scope.get("raw_path") or scope.get("path", "").encode("utf-8", "surrogateescape")
    return "".join(chr(b) if 0x21 <= b <= 0x7E and b != 0x5C else f"\\x{b:02x}" for b in raw[:600])


def _metrics(service: Service):
    from triage.apps.serve.metrics import Metrics

    return Metrics(service.pool)


class AccessLog:
    """ASGI middleware: one line per request (method, raw path, status, time), never a query or a body.

    It also turns an unexpected exception into a bare 500, so no traceback (which may quote
    request content) reaches the server's log, and marks every answer `nosniff`.
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
                message = {**message, "headers": [*message.get("headers", []), (b"x-content-type-options", b"nosniff")]}
            await send(message)

        start = time.perf_counter()
        try:
            await self.app(scope, receive, watch)
        except Exception as exc:  # noqa: BLE001 - the server's last guard
            log.error("internal error: %s", type(exc).__name__)
            if not state["started"]:
                await _error(500, "internal error")(scope, receive, send)
        finally:
            path = SERVER.text(logged_path(scope))[:200]
            log.info("%s %s %s %.0fms", scope.get("method"), path, state["status"], (time.perf_counter() - start) * 1e3)
