"""A failed startup attempt followed by a relaunch that reached ready: outcome `recovered`.

The server is up (exit code 0), but the failure before it is worth a word: the report keeps
the failed attempt's causes, its failure line and figures, and a note on the relaunch.
"""

from __future__ import annotations

import io
from pathlib import Path

from triage.apps.cli import main
from triage.pipeline import run
from triage.render import FORMATS, render

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
FAILED = FIXTURES / "kv_cache_insufficient" / "v1-0.10.2-llava7b-16g-weights-crowd-negative-kv.log"
RECOVERED = FIXTURES / "kv_cache_insufficient" / "v1-0.10.2-llava7b-16g-relaunch-util095-recovered.log"
HEALTHY = FIXTURES / "healthy" / "v1-0.10.2-qwen3-8b-h100-request-log-quotes-errors.log"


def _report(data: bytes):
    return run(io.BytesIO(data), "startup.log")


def test_a_relaunch_that_reached_ready_is_recovered_with_the_failed_attempts_causes():
    report = _report(RECOVERED.read_bytes())
    assert report.outcome == "recovered"
    assert [d.id for d in report.diagnoses][:1] == ["kv_cache_insufficient"]
    assert report.failure is not None and report.failure.phase == "kv_cache_allocation"
    assert any("relaunch" in n and "reached ready" in n for n in report.notes)
    assert [a.outcome for a in report.attempts] == ["failed", "healthy"]


def test_a_failure_after_a_healthy_start_is_still_failed():
    """The order matters: ready first, then a failed relaunch, is a failure."""
    report = _report(HEALTHY.read_bytes() + b"\n" + FAILED.read_bytes())
    assert report.outcome == "failed"


def test_recovered_exits_zero_and_every_format_renders_it():
    out, err = io.StringIO(), io.StringIO()
    assert main([str(RECOVERED)], stdout=out, stderr=err) == 0
    report = _report(RECOVERED.read_bytes())
    for fmt in FORMATS:
        text = render(report, fmt)
        assert text.strip(), fmt
    assert "recovered" in render(report, "terminal")
    assert 'failures="0"' in render(report, "junit")
    assert render(report, "github").startswith("::warning")
