"""`GET /metrics` (Prometheus, scraped and parsed here) and `?name=` on /v1/triage."""

from __future__ import annotations

import os
import signal

import pytest

for _mod in ("fastapi", "uvicorn", "prometheus_client"):
    pytest.importorskip(_mod, reason=f"the server tests need the [server] extra ({_mod} is not installed)")

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402
from serve_support import APPS, LOG, TOKEN, alive, call, expected_ids, post, running, wait_for  # noqa: E402

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def scrape(port: int, headers: dict[str, str] | None = None) -> dict[tuple[str, tuple], float]:
    """Every sample of /metrics: (name, sorted labels) -> value."""
    answer = call(port, "GET", "/metrics", headers=headers or {})
    assert answer.status == 200 and answer.headers["content-type"].startswith("text/plain")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(answer.text)
        for s in family.samples
    }


def test_metrics_count_requests_outcomes_causes_rejections_and_restarts():
    with running(max_bytes=len(LOG) + 100, max_concurrency=1, timeout=600) as p:
        cause = expected_ids(LOG)[0]
        assert post(p, LOG).status == 200
        assert post(p, b"INFO 07-01 10:00:00 [api_server.py:1] vLLM API server version 0.8.5\n").status == 200
        assert post(p, LOG * 3).status == 413
        assert post(p, b"<x/>", "application/xml").status == 415
        assert call(p, "GET", "/no/such/page").status == 404
        pool = APPS[p].state.service.pool
        (worker,) = pool.pids()
        os.kill(worker, signal.SIGKILL)  # died while idle: the next request gets a successor
        assert wait_for(lambda: not alive(worker))
        assert post(p, LOG).status == 200
        m = scrape(p)
    assert m[("vllm_triage_reports_total", (("cause", cause), ("outcome", "failed")))] == 2
    assert (
        sum(v for (name, labels), v in m.items() if name == "vllm_triage_reports_total" and ("cause", "none") in labels)
        == 1
    )
    assert m[("vllm_triage_http_requests_total", (("method", "POST"), ("path", "/v1/triage"), ("status", "200")))] == 3
    assert m[("vllm_triage_http_requests_total", (("method", "GET"), ("path", "other"), ("status", "404")))] == 1
    assert m[("vllm_triage_rejected_bodies_total", (("reason", "too_large"),))] == 1
    assert m[("vllm_triage_rejected_bodies_total", (("reason", "wrong_type"),))] == 1
    assert m[("vllm_triage_worker_restarts_total", ())] == 1
    assert m[("vllm_triage_http_request_duration_seconds_count", (("path", "/v1/triage"),))] == 5


def test_metrics_sit_behind_the_token():
    with running(token=TOKEN, slack_secret=None) as p:
        assert call(p, "GET", "/metrics").status == 401
        assert ("vllm_triage_worker_restarts_total", ()) in scrape(p, AUTH)


def test_query_name_is_honoured_or_refused():
    with running() as p:
        r = post(p, LOG, path="/v1/triage?name=node7.log")
        assert r.status == 200 and r.json()["input"]["name"] == "node7.log"
        r = post(p, LOG, path="/v1/triage?name=../../etc/passwd&format=markdown")
        assert r.status == 200 and "passwd" in r.text and "../" not in r.text
        r = post(p, LOG, path="/v1/triage?name=")
        assert r.status == 400 and "name" in r.json()["error"]
