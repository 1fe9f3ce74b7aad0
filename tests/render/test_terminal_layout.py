"""The terminal report at 80 and 120 columns: what a tired engineer reads first, and copies.

Snapshots show the layout; the assertions hold its promises for every fixture: the top
cause and confidence open the first line, each remedy command is one whole line however
long, evidence shows the message without its logger prefix, and no tab reaches the screen.
"""

from __future__ import annotations

import pytest
from conftest import FIXTURES, fixture_cases, triage_file

from triage.model.report import Diagnosis, Evidence, Failure, InputInfo, Remedy, Report
from triage.render import render
from triage.render.common import command_line

LAYOUT = [
    "kv_cache_insufficient/v1-0.9.2-tp2-qwen14b-4090-estimated-max-len.log",
    "foreign_gpu_processes/v0-0.6.6-h100-kv-alloc-oom-other-process-18g.log",
    "unknown_failure/v0102-plugin-model-import-error-load-weights.log",
]
WIDTHS = (80, 120)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("rel", LAYOUT, ids=[r.split("/")[0] for r in LAYOUT])
def test_layout_snapshot(rel, width, snapshot_txt):
    assert render(triage_file(FIXTURES / rel), "terminal", width=width) == snapshot_txt


def _promises(report, width: int) -> None:
    text = render(report, "terminal", width=width)
    lines = text.splitlines()
    commands = {command_line(r) for d in report.diagnoses for r in d.remedies if command_line(r)}
    if report.diagnoses:
        top = report.diagnoses[0]
        assert lines[0].startswith(f"{top.id} (confidence {top.confidence:.2f})")
    for cmd in commands:
        assert any(line.strip() == " ".join(cmd.split()) for line in lines), cmd
    for line in lines:
        assert "\t" not in line
        if line.strip() not in {" ".join(c.split()) for c in commands}:
            assert len(line) <= width, line


@pytest.mark.parametrize("width", WIDTHS)
def test_every_fixture_keeps_the_promises(width):
    for log, _ in fixture_cases()[::3]:
        _promises(triage_file(log), width)


def test_long_commands_and_tabs():
    long_value = "/models/" + "very-long-model-directory-name/" * 6 + "weights"
    evidence = [
        Evidence(
            line=12,
            origin="(VllmWorker rank=1 pid=77)",
            text="ERROR 06-02 05:17:18 [core.py:387] Value\terror:\tthe message itself",
        ),
        Evidence(line=1234, text="INFO 06-02 05:17:18 [loader.py:1] plain line"),
    ]
    d = Diagnosis(
        id="unknown_failure",
        title="A title",
        confidence=0.5,
        explanation="why\twith a tab",
        evidence=evidence,
        remedies=[Remedy(text="use it", flags={"--model": long_value}, env={"HF_HOME": "/a/b"})],
    )
    report = Report(
        input=InputInfo(name="t.log", lines=2000, bytes=1),
        outcome="failed",
        failure=Failure(line=12, message="Value\terror:\tthe message itself"),
        diagnoses=[d],
    )
    _promises(report, 80)
    text = render(report, "terminal", width=80)
    assert f"     HF_HOME=/a/b --model {long_value}\n" in text  # one line, longer than 80: it scrolls
    evidence_lines = [line for line in text.splitlines() if "│" in line]
    assert evidence_lines[0].split("│")[1].strip() == "VllmWorker rank=1"  # the origin, in its column
    assert evidence_lines[0].split("│")[2].startswith(" Value error: the message")  # no logger prefix
    assert "  1234 │" in evidence_lines[1] or "1234 │" in evidence_lines[1]
