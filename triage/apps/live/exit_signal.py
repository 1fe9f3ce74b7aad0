"""How `vllm-triage run`'s command died, when its log does not say: a signal gets a diagnosis.

A server killed with SIGKILL prints nothing about it (the kernel's OOM killer, a container
limit, a supervisor's `kill -9`), so its log just stops. The exit status still says it:
-N from Python when signal N killed the command, 128+N when a shell between reported it.
The causes are taxonomy ids: the OOM killer is host_memory_exhausted, a SIGBUS the full
/dev/shm of shared_memory_exhausted; any other signal is named, as unknown_failure.
"""

from __future__ import annotations

import signal

from triage.model.report import Diagnosis, Failure, Remedy, Report

RULE = "run-exit-signal"
_SHELL_BASE = 128
# signal -> (cause, title, confidence, explanation, remedies)
_KNOWN: dict[int, tuple[str, str, float, str, list[str]]] = {
    signal.SIGKILL: (
        "host_memory_exhausted",
        "The command was killed with SIGKILL: the kernel's OOM killer, or a supervisor",
        0.6,
        "Nothing in the output explains the stop: SIGKILL cannot be caught, so the process printed nothing. "
        "On Linux the usual sender is the kernel's OOM killer (host RAM or the container's memory limit ran "
        "out, e.g. while loading weights); otherwise a supervisor killed it (Kubernetes, systemd, Slurm, "
        "docker stop after its grace period, a timeout).",
        [
            "check the kernel log for the OOM killer: dmesg -T | grep -i -E 'killed process|out of memory'",
            "or: journalctl -k --since '-1 hour' | grep -i -E 'oom|killed process'",
            "in Kubernetes: kubectl describe pod POD (Last State: OOMKilled, exit code 137)",
            "in Docker: docker inspect --format '{{.State.OOMKilled}}' CONTAINER",
            "if it was the OOM killer: give the host or container more RAM, or lower --cpu-offload-gb and --swap-space",
        ],
    ),
    signal.SIGBUS: (
        "shared_memory_exhausted",
        "The command died of SIGBUS: usually /dev/shm is full",
        0.5,
        "A SIGBUS while vLLM runs is most often a write to shared memory (/dev/shm) that has no room left; "
        "containers get 64 MiB by default.",
        [
            "check: df -h /dev/shm",
            "docker: run with --ipc=host or --shm-size 16g; Kubernetes: mount an emptyDir with medium: Memory "
            "at /dev/shm",
        ],
    ),
}
_CRASHES = {signal.SIGSEGV, signal.SIGABRT, signal.SIGILL, signal.SIGFPE}


def signal_of(code: int) -> int | None:
    """The signal that ended the command: -N (Python's returncode) or 128+N (a shell's), else None."""
    number = -code if code < 0 else code - _SHELL_BASE if code > _SHELL_BASE else None
    if number is None:
        return None
    try:
        return int(signal.Signals(number))
    except ValueError:
        return None


def with_exit_signal(report: Report, code: int) -> Report:
    """The report, with a diagnosis of the signal when the command died of one and no cause was found."""
    number = signal_of(code)
    if number is None:
        return report
    name = signal.Signals(number).name
    how = (
        f"exit status {code}: 128+{number}, as a shell reports {name}"
        if code > 0
        else f"signal {number}; vllm-triage run exits {_SHELL_BASE + number}"
    )
    stopped = number not in _KNOWN and number not in _CRASHES  # SIGTERM, SIGINT, SIGHUP: asked to stop
    if report.diagnoses or (stopped and report.outcome == "healthy"):
        return report.model_copy(update={"notes": [*report.notes, f"the command then died of {name} ({how})"]})
    cause, title, confidence, explanation, remedies = _KNOWN.get(number) or _other(number, name)
    diagnosis = Diagnosis(
        id=cause,
        title=title,
        confidence=confidence,
        explanation=f"{explanation} ({how})",
        remedies=[Remedy(text=t) for t in remedies],
        rule=RULE,
        figures={"signal": name},
    )
    failure = report.failure or Failure(
        line=max(report.input.lines, 1),
        message=f"the command was killed by {name} ({how}) after its last line of output",
    )
    return report.model_copy(update={"outcome": "failed", "failure": failure, "diagnoses": [diagnosis]})


def _other(number: int, name: str) -> tuple[str, str, float, str, list[str]]:
    if number in _CRASHES:
        return (
            "unknown_failure",
            f"The command crashed with {name}",
            0.5,
            f"{name} is a native crash (a CUDA or driver library, a compiled extension such as a kernel "
            "package), not a Python error, so no traceback was printed.",
            [
                "run it again with CUDA_LAUNCH_BLOCKING=1 and faulthandler on (PYTHONFAULTHANDLER=1) to see "
                "where it crashed",
                "check that torch, vLLM and their compiled extensions were built for "
                "each other (pip list | grep -i -E 'torch|vllm|flash|xformers')",
            ],
        )
    return (
        "unknown_failure",
        f"The command was stopped by {name} from outside",
        0.5,
        f"Something other than vllm-triage sent {name}: a supervisor (systemd, Kubernetes, Slurm, "
        "docker stop), a timeout or a user.",
        ["check who stopped it: journalctl -u UNIT, kubectl describe pod POD (Events), or the job scheduler's log"],
    )
