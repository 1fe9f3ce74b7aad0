"""Prometheus metrics of one server (`GET /metrics`), with the official client library.

What an operator asks of a triage service: how many requests, answered how (HTTP status),
what the logs showed (outcome and cause of each report), how long requests took, how often
an analysis worker had to be replaced (killed after a timeout or a hang-up, or dead), and
how many bodies were refused (too large, wrong type, too slow, bad). Each app has its own
registry, so servers in one process (tests) do not share counts. Paths are the app's routes
or "other": a scanner's random paths never become label values.
"""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST as CONTENT_TYPE
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily

ROUTES = ("/healthz", "/metrics", "/v1/rules", "/v1/triage", "/v1/slack/command", "/", "/openapi.json")
# Statuses that refuse a request's body, by what they say about it.
REJECTED = {400: "bad", 408: "too_slow", 413: "too_large", 415: "wrong_type"}
BODY_ROUTES = ("/v1/triage", "/v1/slack/command")

__all__ = ["CONTENT_TYPE", "Metrics"]


class _Restarts:
    """Reads the worker pool's replacement count at scrape time (the pool counts, not the routes)."""

    def __init__(self, pool: Any) -> None:
        self.pool = pool

    def collect(self):
        family = CounterMetricFamily(
            "vllm_triage_worker_restarts",
            "Analysis worker processes replaced (killed after a timeout or a hang-up, or found dead)",
        )
        family.add_metric([], getattr(self.pool, "restarts", 0))
        yield family


class Metrics:
    """The counters and histograms of one app, and the ASGI middleware that fills them."""

    def __init__(self, pool: Any) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "vllm_triage_http_requests",
            "HTTP requests by route, method and status",
            ("path", "method", "status"),
            registry=self.registry,
        )
        self.seconds = Histogram(
            "vllm_triage_http_request_duration_seconds",
            "Time to answer a request",
            ("path",),
            registry=self.registry,
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
        )
        self.reports = Counter(
            "vllm_triage_reports",
            "Logs analysed, by the report's outcome and leading cause (none: no diagnosis)",
            ("outcome", "cause"),
            registry=self.registry,
        )
        self.rejected = Counter(
            "vllm_triage_rejected_bodies", "Request bodies refused, by why", ("reason",), registry=self.registry
        )
        self.registry.register(_Restarts(pool))

    def report(self, answer: Any) -> None:
        """Count an analysed log from its answer's outcome and cause (see answer.Answer)."""
        outcome = getattr(answer, "outcome", None)
        if outcome is not None:
            self.reports.labels(outcome, getattr(answer, "cause", None) or "none").inc()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    def middleware(self, app):
        """ASGI middleware counting each HTTP request once it is answered."""

        async def counted(scope, receive, send) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            status = {"code": 500}

            async def watch(message) -> None:
                if message["type"] == "http.response.start":
                    status["code"] = message["status"]
                await send(message)

            start = time.perf_counter()
            try:
                await app(scope, receive, watch)
            finally:
                self._count(scope, status["code"], time.perf_counter() - start)

        return counted

    def _count(self, scope, code: int, seconds: float) -> None:
        path = scope.get("path", "")
        label = path if path in ROUTES else "other"
        method = scope.get("method", "")
        self.requests.labels(label, method if method in ("GET", "POST", "HEAD") else "other", str(code)).inc()
        self.seconds.labels(label).observe(seconds)
        if label in BODY_ROUTES and code in REJECTED:
            self.rejected.labels(REJECTED[code]).inc()
