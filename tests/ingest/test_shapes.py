"""Shapes around a log that are not vLLM's (issue 10): peeled or repaired, so the message
inside reads as it would have printed. Each test builds the shape around our own lines."""

from __future__ import annotations

import io

import pytest

from triage.ingest.lines import peel
from triage.ingest.reshape import mend_cut_start, unfold
from triage.pipeline import run

ERR = "ERROR 07-18 09:31:06 [core.py:718] ValueError: boom"


@pytest.mark.parametrize(
    "raw, origin",
    [
        ("(task, pid=13917) " + ERR, "task pid=13917"),  # SkyPilot, one node
        ("(worker1, rank=1, pid=4242, ip=10.0.0.2) " + ERR, "worker1 rank=1"),  # SkyPilot, multi-node
        ("\tLine 57: (EngineCore_DP0 pid=9) " + ERR, "EngineCore_DP0 pid=9"),  # Notepad++ Find in Files
        ("  Line 12: " + ERR, ""),  # another search tool's indent
        ("python.exe : " + ERR, ""),  # PowerShell's native-command wrapper
    ],
)
def test_wrappers_are_peeled_to_the_message(raw, origin):
    line = peel(raw, 1)
    assert (line.text, line.level, line.origin) == ("ValueError: boom", "ERROR", origin)


@pytest.mark.parametrize(
    "raw",
    [
        "At line:1 char:1",
        "    + CategoryInfo          : NotSpecified: (ERROR 07-18 09:3...lueError: boom:String) [], RemoteException",
        "    + FullyQualifiedErrorId : NativeCommandError",
    ],
)
def test_powershell_error_records_state_nothing(raw):
    assert peel(raw, 1).text == ""


def test_a_tmux_position_marker_is_cut_but_a_progress_bar_is_kept():
    assert (
        peel("INFO 07-18 09:31:06 [gpu_worker.py:1] Available KV cache memory: 1.2 GiB[31/357]", 1).text
        == "Available KV cache memory: 1.2 GiB"
    )
    bar = "Loading safetensors checkpoint shards: 100% Completed | 5/5 [00:04<00:00,  1.12it/s]"
    assert peel(bar, 1).text == bar


def test_nim_logger_header_with_a_year_is_a_header():
    line = peel("INFO 2024-06-05 17:41:59.436 ngc_profile.py:222] Running without LoRA.", 1)
    assert (line.level, line.headed, line.text) == ("INFO", True, "Running without LoRA.")


@pytest.mark.parametrize(
    "cut, whole",
    [
        (
            'le "/usr/lib/python3.12/site-packages/vllm/config.py", line 82, in f',
            '  File "/usr/lib/python3.12/site-packages/vllm/config.py", line 82, in f',
        ),
        ("RROR 07-18 09:31:06 [core.py:718] x", "ERROR 07-18 09:31:06 [core.py:718] x"),
        (
            "ngineCore_DP0 pid=9) INFO 07-18 09:31:06 [core.py:1] x",
            "(EngineCore_DP0 pid=9) INFO 07-18 09:31:06 [core.py:1] x",
        ),
        ("le of the model", "le of the model"),  # no head's shape: left alone
        ("INFO 07-18 09:31:06 [core.py:1] x", "INFO 07-18 09:31:06 [core.py:1] x"),
    ],
)
def test_a_paste_that_starts_mid_word_gets_its_head_back(cut, whole):
    assert mend_cut_start(cut) == whole


FOLDED = (
    "E0219 10:54:28.679378 1 model.py:245] Failed to initialize: Traceback (most recent call last):\\n"
    '  File "/opt/tritonserver/backends/vllm/model.py", line 240, in initialize\\n'
    "    self.engine = make()\\n"
    '  File "/usr/lib/python3.10/site-packages/acme_kernels/ops.py", line 12, in make\\n'
    '    raise RuntimeError(\\"acme kernels not built for sm_75\\")\\n'
    "RuntimeError: acme kernels not built for sm_75\\n"
)


def test_a_traceback_folded_into_one_glog_line_is_unfolded():
    pieces = unfold(FOLDED)
    assert pieces[-1] == "RuntimeError: acme kernels not built for sm_75"
    assert pieces[1].startswith('  File "/opt/tritonserver')
    assert unfold(r"a message that quotes \n once") == [r"a message that quotes \n once"]
    report = run(io.BytesIO((FOLDED + "\n").encode()), "triton.log")
    assert report.outcome == "failed" and report.failure is not None
    assert report.failure.exception == "RuntimeError"
    assert "acme_kernels" in report.diagnoses[0].explanation
