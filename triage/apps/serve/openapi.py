"""The OpenAPI document, written out route by route so that it says what the server does.

FastAPI would derive the answers from the handlers' return types: one JSON model per route,
a 422 for validation errors. This server answers the JSON report, Slack Block Kit JSON or
Markdown from one route, and its errors are `{"error": "..."}` with the statuses listed
here, so the document is built from this table and checked against real answers in the tests.
"""

from __future__ import annotations

from typing import Any

from triage import __version__
from triage.apps.serve.limits import FORMATS, SLACK_MAX_BYTES
from triage.model.report import Report

ERROR_WHY = {
    400: "not a log: binary, broken JSON, gzip or multipart, no `file` part, an unknown format, an empty body",
    401: "a missing or wrong bearer token (Slack: a missing, stale or wrong signature)",
    404: "the Slack endpoint is off: the server has no SLACK_SIGNING_SECRET",
    408: "the body did not arrive within --timeout",
    413: "the body is over --max-bytes (a gzip body may expand to 10x that)",
    415: "another content type",
    500: "the analysis worker died (out of memory?) or met a bug",
    503: "busy: --max-concurrency analyses are running (see Retry-After)",
    504: "the analysis ran past --timeout",
}
TRIAGE_STATUSES = (400, 401, 408, 413, 415, 500, 503, 504)
SLACK_STATUSES = (401, 404, 408, 413, 415)
RULES_STATUSES = (401,)

SLACK_MESSAGE = {
    "type": "object",
    "required": ["text", "blocks"],
    "description": "a Slack Block Kit message (`?format=slack`), ready for chat.postMessage",
    "properties": {"text": {"type": "string"}, "blocks": {"type": "array", "items": {"type": "object"}}},
}
SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object",
        "required": ["error"],
        "additionalProperties": False,
        "properties": {"error": {"type": "string", "description": "one line, redacted"}},
    },
    "Health": {
        "type": "object",
        "required": ["status", "version"],
        "properties": {"status": {"const": "ok"}, "version": {"type": "string"}},
    },
    "RuleList": {
        "type": "object",
        "required": ["rules"],
        "properties": {
            "rules": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["id", "cause", "title"],
                    "properties": {"id": {"type": "string"}, "cause": {"type": "string"}, "title": {"type": "string"}},
                },
            }
        },
    },
    "SlackMessage": SLACK_MESSAGE,
    "SlackCommandAnswer": {
        "type": "object",
        "required": ["response_type", "text"],
        "properties": {
            "response_type": {"const": "ephemeral"},
            "text": {"type": "string"},
            "blocks": {"type": "array", "items": {"type": "object"}},
        },
    },
}
TRIAGE_BODY = {
    "required": True,
    "content": {
        "text/plain": {"schema": {"type": "string", "description": "the log (gzip detected by its magic bytes)"}},
        "application/json": {
            "schema": {
                "type": "object",
                "required": ["log"],
                "additionalProperties": False,
                "properties": {
                    "log": {"type": "string"},
                    "format": {"type": "string", "enum": list(FORMATS)},
                    "name": {"type": "string"},
                },
            }
        },
        "multipart/form-data": {
            "schema": {
                "type": "object",
                "required": ["file"],
                "properties": {
                    "file": {"type": "string", "format": "binary", "description": "the log; gzip is detected"},
                    "format": {"type": "string", "enum": list(FORMATS)},
                    "name": {"type": "string"},
                },
            }
        },
    },
}
SLACK_BODY = {
    "required": True,
    "content": {
        "application/x-www-form-urlencoded": {
            "schema": {
                "type": "object",
                "properties": {"command": {"type": "string"}, "text": {"type": "string"}},
                "description": f"Slack's slash-command form, signed; at most {SLACK_MAX_BYTES} bytes",
            }
        }
    },
}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors(statuses: tuple[int, ...]) -> dict[str, Any]:
    return {str(s): _json(_ref("Error"), ERROR_WHY[s]) for s in statuses}


def _triage() -> dict[str, Any]:
    ok = {
        "description": "the report: JSON by default; Slack blocks or Markdown when asked with ?format=, "
        "the body's `format` field or Accept: text/markdown (that order)",
        "content": {
            "application/json": {"schema": {"oneOf": [_ref("Report"), _ref("SlackMessage")]}},
            "text/markdown": {"schema": {"type": "string"}},
        },
    }
    return {
        "summary": "Diagnose a startup log",
        "operationId": "triage",
        "security": [{"bearer": []}],
        "parameters": [
            {"name": "format", "in": "query", "required": False, "schema": {"type": "string", "enum": list(FORMATS)}},
            {
                "name": "name",
                "in": "query",
                "required": False,
                "schema": {"type": "string"},
                "description": "the log's name in the report (wins over the body's); an empty one is refused (400)",
            },
        ],
        "requestBody": TRIAGE_BODY,
        "responses": {"200": ok, **_errors(TRIAGE_STATUSES)},
    }


def _paths() -> dict[str, Any]:
    return {
        "/healthz": {
            "get": {
                "summary": "Liveness (no token)",
                "operationId": "healthz",
                "responses": {"200": _json(_ref("Health"), "the server is up")},
            }
        },
        "/v1/rules": {
            "get": {
                "summary": "The loaded rules",
                "operationId": "rules",
                "security": [{"bearer": []}],
                "responses": {
                    "200": _json(_ref("RuleList"), "id, cause and title of each rule"),
                    **_errors(RULES_STATUSES),
                },
            }
        },
        "/metrics": {
            "get": {
                "summary": "Prometheus metrics: requests by route and status, reports by outcome "
                "and cause, latencies, worker restarts, rejected bodies",
                "operationId": "metrics",
                "security": [{"bearer": []}],
                "responses": {
                    "200": {
                        "description": "Prometheus text exposition format 0.0.4",
                        "content": {"text/plain": {"schema": {"type": "string"}}},
                    },
                    **_errors(RULES_STATUSES),
                },
            }
        },
        "/v1/triage": {"post": _triage()},
        "/v1/slack/command": {
            "post": {
                "summary": "Slack slash command (signed by Slack)",
                "operationId": "slackCommand",
                "parameters": [
                    {"name": h, "in": "header", "required": True, "schema": {"type": "string"}}
                    for h in ("X-Slack-Request-Timestamp", "X-Slack-Signature")
                ],
                "requestBody": SLACK_BODY,
                "responses": {
                    "200": _json(
                        _ref("SlackCommandAnswer"),
                        "the report as blocks for the caller alone; a busy server or a bad log is said in `text`",
                    ),
                    **_errors(SLACK_STATUSES),
                },
            }
        },
    }


def _report_schemas() -> dict[str, Any]:
    schema = Report.model_json_schema(ref_template="#/components/schemas/{model}")
    defs = schema.pop("$defs", {})
    return {**defs, "Report": schema}


def build() -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "vllm-triage",
            "version": __version__,
            "description": "Why did a vLLM server fail to start? Post its startup log.",
        },
        "paths": _paths(),
        "components": {
            "schemas": {**_report_schemas(), **SCHEMAS},
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer", "description": "VLLM_TRIAGE_TOKEN of the server"}
            },
        },
    }
