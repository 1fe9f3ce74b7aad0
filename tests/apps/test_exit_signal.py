"""`vllm-triage run`: a command killed by a signal gets a diagnosis of its own."""

from __future__ import annotations

import io
import json
import sys

import pytest

from triage.apps.cli import main
from triage.apps.live.exit_signal import signal_of, with_exit_signal
from triage.model.report import Diagnosis, InputInfo, Report

STARTED = (
    "print('INFO 06-02 05:17:00 [api_server.py:1896] vLLM API server version 0.10.2', flush=True); "
    'print("INFO 06-02 05:17:01 [core.py:76] Initializing a V1 LLM engine (v0.10.2) with config: '
    "model='m'\", flush=True); "
)


def incomplete() -> Report:
    return Report(input=InputInfo(name="out", lines=40, bytes=1000), outcome="incomplete")


@pytest.mark.parametrize("code", [-9, 137])
def test_sigkill_is_the_oom_killer_or_a_supervisor(code):
    report = with_exit_signal(incomplete(), code)
    assert report.outcome == "failed" and report.failure.line == 40 and "SIGKILL" in report.failure.message
    d = report.diagnoses[0]
    assert d.id == "host_memory_exhausted" and "OOM killer" in d.title and "supervisor" in d.title
    remedies = " ".join(r.text for r in d.remedies)
    for check in ("dmesg", "journalctl -k", "kubectl describe pod"):
        assert check in remedies


def test_sigbus_is_a_full_dev_shm_and_other_signals_are_named():
    assert with_exit_signal(incomplete(), -7).diagnoses[0].id == "shared_memory_exhausted"
    segv = with_exit_signal(incomplete(), -11).diagnoses[0]
    assert segv.id == "unknown_failure" and "SIGSEGV" in segv.title
    term = with_exit_signal(incomplete(), -15).diagnoses[0]
    assert term.id == "unknown_failure" and "SIGTERM" in term.title


def test_a_found_cause_stays_first_and_the_signal_becomes_a_note():
    found = incomplete().model_copy(
        update={
            "outcome": "failed",
            "diagnoses": [Diagnosis(id="kv_cache_insufficient", title="t", confidence=0.9, explanation="e")],
        }
    )
    report = with_exit_signal(found, -9)
    assert [d.id for d in report.diagnoses] == ["kv_cache_insufficient"] and "SIGKILL" in report.notes[-1]


def test_a_healthy_server_stopped_by_sigterm_is_not_a_failure():
    healthy = incomplete().model_copy(update={"outcome": "healthy"})
    stopped = with_exit_signal(healthy, -15)
    assert stopped.outcome == "healthy" and not stopped.diagnoses and "SIGTERM" in stopped.notes[-1]
    assert with_exit_signal(healthy, -9).diagnoses[0].id == "host_memory_exhausted"  # killed while serving


def test_plain_exit_codes_are_not_signals():
    assert signal_of(0) is None and signal_of(1) is None and signal_of(2) is None and signal_of(200) is None
    assert with_exit_signal(incomplete(), 1) == incomplete()


def test_run_reports_a_child_killed_with_sigkill(tmp_path):
    target = tmp_path / "r.json"
    child = STARTED + "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    code = main(
        ["run", "-f", "json", "-o", str(target), "--", sys.executable, "-c", child],
        stdout=io.StringIO(),
        stderr=io.StringIO(),
    )
    assert code == 137
    report = json.loads(target.read_text())
    assert report["outcome"] == "failed" and report["diagnoses"][0]["id"] == "host_memory_exhausted"
    assert report["diagnoses"][0]["figures"] == {"signal": "SIGKILL"}
