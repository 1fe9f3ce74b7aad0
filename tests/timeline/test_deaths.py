"""A failure seen without known text (issue 10): a process that died (a signal, a native
abort, an exit status, a supervisor's word) or an ERROR line followed by a death ends the
attempt; a warning that only mentions a crash, or an ERROR line the process survived, does not."""

from __future__ import annotations

import pytest
from conftest import triage_text

from triage.ingest.lines import peel
from triage.parse.parse import parse_line

HEAD = (
    "INFO 07-18 09:30:06 [api_server.py:1395] vLLM API server version 0.9.2\n"
    "INFO 07-18 09:30:07 [model_runner.py:1] Starting to load model acme/model-7b...\n"
)
READY = "INFO:     Application startup complete.\n"


@pytest.mark.parametrize(
    "text, kind, detail",
    [
        ("Segmentation fault (core dumped)", "process_crash", "SIGSEGV"),
        (
            "./serve.sh: line 4:  3307 Illegal instruction     (core dumped) vllm serve acme/model-7b",
            "process_crash",
            "SIGILL",
        ),
        ("Fatal Python error: Aborted", "process_crash", "SIGABRT"),
        ("Aborted (core dumped)", "process_crash", "SIGABRT"),
        ("terminate called after throwing an instance of 'c10::Error'", "process_crash", "SIGABRT"),
        (
            "Memory access fault by GPU node-2 (Agent handle: 0x5a1) on address 0x7f00. Reason: Page not present or "
            "supervisor privilege.",
            "device_error",
            None,
        ),  # the HSA abort: a device fault, which ends the process
        ("vllm-1 exited with code 3", "process_died", 3),
        ("    Exit Code:    2", "process_died", 2),
        ("vllm-openai   Exited (1) 5 seconds ago", "process_died", 1),
        ("vllm-openai   Exited (137) 5 seconds ago", "killed", "SIGKILL"),
        (
            "  Warning  BackOff  12s (x4 over 70s)  kubelet  Back-off restarting failed container vllm in pod vllm-0",
            "process_died",
            None,
        ),
        ("Feb 23 16:58:05 host systemd[1]: vllm.service: Failed with result 'core-dump'.", "process_died", None),
    ],
)
def test_death_texts_are_events(text, kind, detail):
    events = parse_line(peel(text, 1))
    assert [e.kind for e in events] == [kind]
    got = getattr(events[0], "signal", None) if kind != "process_died" else events[0].exit_code
    assert detail is None or got == detail


def test_a_crash_without_any_error_text_fails_the_attempt():
    report = triage_text(HEAD + "Segmentation fault (core dumped)\n")
    assert report.outcome == "failed" and report.diagnoses[0].rule == "process-crashed"
    assert "SIGSEGV" in report.diagnoses[0].explanation


def test_a_warning_that_mentions_a_crash_is_not_one():
    report = triage_text(
        HEAD + "WARNING 07-18 09:30:08 [utils.py:1] forcing this on may lead to Segmentation fault\n" + READY
    )
    assert report.outcome == "healthy" and report.diagnoses == []


def test_a_crash_after_ready_ends_the_server():
    report = triage_text(HEAD + READY + "Segmentation fault (core dumped)\n")
    assert report.outcome == "failed"


def test_an_error_line_counts_only_when_a_death_follows():
    line = "ERROR 07-18 09:30:08 [launcher.py:9] the model store refused the manifest; giving up\n"
    assert triage_text(HEAD + line).outcome == "incomplete"
    assert triage_text(HEAD + line + READY).outcome == "healthy"
    died = triage_text(HEAD + line + "vllm-1 exited with code 1\n")
    assert died.outcome == "failed" and died.failure is not None and died.failure.line == 3
    assert "refused the manifest" in died.diagnoses[0].explanation


def test_an_error_after_a_warning_level_traceback_is_the_failure():
    survived = (
        "WARNING 07-18 09:30:08 [import_utils.py:1] Traceback (most recent call last):\n"
        'WARNING 07-18 09:30:08 [import_utils.py:1]   File "/x/site-packages/acme/__init__.py", line 3, in <module>\n'
        "WARNING 07-18 09:30:08 [import_utils.py:1] ModuleNotFoundError: No module named 'acme._C'\n"
    )
    fatal = (
        "ERROR 07-18 09:30:20 [core.py:1] Traceback (most recent call last):\n"
        'ERROR 07-18 09:30:20 [core.py:1]   File "/x/site-packages/beta/ops.py", line 9, in run\n'
        "ERROR 07-18 09:30:20 [core.py:1] NotImplementedError: no kernel for this shape\n"
    )
    report = triage_text(HEAD + survived + fatal)
    assert report.failure is not None and report.failure.exception == "NotImplementedError"
    assert "beta" in report.diagnoses[0].explanation  # the package whose frame raised it


def test_system_exit_with_a_failing_status_is_a_failure_and_a_clean_one_is_not():
    tb = 'Traceback (most recent call last):\n  File "/srv/launch.py", line 40, in <module>\n    sys.exit(main())\n'
    failed = triage_text(HEAD + tb + "SystemExit: 2\n")
    assert failed.outcome == "failed" and failed.failure is not None and failed.failure.exception == "SystemExit"
    assert triage_text(HEAD + tb + "SystemExit: 0\n").outcome == "incomplete"
