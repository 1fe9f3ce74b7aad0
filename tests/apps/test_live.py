"""Live use: `run -- CMD` wraps a child process, `--follow FILE` tails a growing log."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from conftest import FIXTURES, ROOT

from triage.apps.cli import main

FAILING = FIXTURES / "kv_cache_insufficient" / "v0-0.6.6-llama8b-a10g-max-seq-len-exceeds-kv.log"
HEALTHY = FIXTURES / "healthy" / "v1-0.10.2-qwen3-8b-h100-apiserver-prefix-free-memory-advice.log"
CAT = "import sys; sys.stdout.buffer.write(open(sys.argv[1], 'rb').read()); sys.exit(int(sys.argv[2]))"
PY = sys.executable


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def _gone(pid: int) -> bool:
    """No such process (a zombie waiting for a non-reaping init counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    except (OSError, IndexError):
        return True


def _wrapper(*child_args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [PY, "-m", "triage", "run", "--", PY, "-c", *child_args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


# ----------------------------------------------------------------------------- run --


def test_run_failing_child_exit_code_passthrough_report_and_log(tmp_path):
    log = tmp_path / "startup.log"
    code, out, err = _run(["run", "--log", str(log), "--", PY, "-c", CAT, str(FAILING), "1"])
    assert code == 1
    assert out == FAILING.read_text(encoding="utf-8")
    assert log.read_bytes() == FAILING.read_bytes()
    assert "kv_cache_insufficient" in err and "startup.log" in err


def test_run_healthy_child_prints_nothing_extra():
    code, out, err = _run(["run", "--", PY, "-c", CAT, str(HEALTHY), "0"])
    assert code == 0
    assert out == HEALTHY.read_text(encoding="utf-8")
    assert err == ""


def test_run_report_format_and_output_file(tmp_path):
    report = tmp_path / "report.json"
    code, _, err = _run(["run", "-f", "json", "-o", str(report), "--", PY, "-c", CAT, str(FAILING), "3"])
    assert code == 3
    data = json.loads(report.read_text())
    assert data["outcome"] == "failed" and data["diagnoses"][0]["id"] == "kv_cache_insufficient"
    assert "report written to" in err


def test_run_usage_errors():
    assert _run(["run"])[0] == 2
    assert _run(["run", "--log"])[0] == 2
    code, _, err = _run(["run", "--", "/nonexistent/vllm-triage-test-binary"])
    assert code == 127 and "cannot run" in err


def test_run_passes_bytes_through_unchanged_and_reports_while_child_runs(tmp_path):
    """Raw bytes (a `\\r` progress bar, invalid UTF-8) reach stdout as they are; the report comes
    once the fatal burst is over, before the child is done: the child waits for a file that
    the test writes only once it has read the report (an event, not a clock), then exits 0."""
    go = tmp_path / "go"
    script = (
        "import os, sys, time; o = sys.stdout.buffer; o.write(b'Loading: 50%\\rLoading: 100%\\n\\xff\\xfe odd\\n');"
        "o.write(open(sys.argv[1], 'rb').read()); o.flush(); t = time.monotonic()\n"
        "while not os.path.exists(sys.argv[2]) and time.monotonic() - t < 120: time.sleep(0.05)\n"
        "o.write(b'bye\\n' if os.path.exists(sys.argv[2]) else b'never told\\n')"
    )
    proc = _wrapper(script, str(FAILING), str(go))
    err_line = proc.stderr.readline()  # the report's first line, while the child still waits
    go.write_text("reported")
    out, err = proc.stdout.read(), proc.stderr.read()
    assert proc.wait(timeout=120) == 0
    assert out == b"Loading: 50%\rLoading: 100%\n\xff\xfe odd\n" + FAILING.read_bytes() + b"bye\n"
    assert err_line and "kv_cache_insufficient" in (err_line + err).decode()


CHILD_SIGINT = """
import os, signal, sys, time
def stop(signum, frame):
    open(sys.argv[1], "w").write("got SIGINT")
    sys.exit(7)
signal.signal(signal.SIGINT, stop)
print("pid", os.getpid(), flush=True)
time.sleep(30)
"""

CHILD_STUBBORN = """
import os, signal, subprocess, sys, time
signal.signal(signal.SIGINT, lambda signum, frame: print("ignored SIGINT", flush=True))
grandchild = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); "
                               "print('ready', flush=True); time.sleep(60)"], stdout=subprocess.PIPE)
grandchild.stdout.readline()  # it ignores SIGINT from here on: a SIGINT while it starts would kill it
print("pid", os.getpid(), grandchild.pid, flush=True)
for _ in range(60):
    time.sleep(1)
"""


def test_sigint_is_forwarded_and_the_child_exit_code_returned(tmp_path):
    marker = tmp_path / "marker"
    proc = _wrapper(CHILD_SIGINT, str(marker))
    try:
        pid = int(proc.stdout.readline().split()[1])
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 7
    assert marker.read_text() == "got SIGINT"
    assert _gone(pid)
    assert proc.stderr.read() == b""  # interrupted on purpose, nothing failed: no report


def test_second_sigint_kills_the_whole_group():
    proc = _wrapper(CHILD_STUBBORN)
    try:
        pids = [int(p) for p in proc.stdout.readline().split()[1:]]
        proc.send_signal(signal.SIGINT)
        assert proc.stdout.readline() == b"ignored SIGINT\n"  # forwarded, and shrugged off: an event, not a sleep
        assert proc.poll() is None  # the child keeps running
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signal.SIGKILL
    deadline = time.monotonic() + 120  # a generous bound: the kill is immediate, the reaping is not
    while not all(_gone(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(_gone(p) for p in pids)


# ----------------------------------------------------------------------------- --follow


def _writer(path: Path, data: bytes, delay: float = 0.3, pieces: int = 8) -> threading.Thread:
    """Create PATH after DELAY and append DATA to it in PIECES, then stop (the file stays)."""

    def write() -> None:
        time.sleep(delay)
        step = len(data) // pieces + 1
        with open(path, "ab") as fh:
            for i in range(0, len(data), step):
                fh.write(data[i : i + step])
                fh.flush()
                time.sleep(0.02)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


def _until(text: bytes, marker: bytes) -> bytes:
    cut = text.index(marker)
    return text[: text.index(b"\n", cut) + 1]


def test_follow_stops_at_readiness(tmp_path):
    log = tmp_path / "startup.log"  # does not exist yet
    _writer(log, _until(HEALTHY.read_bytes(), b"Application startup complete."))
    code, out, _ = _run(["--follow", str(log), "--timeout", "120"])
    assert code == 0  # only readiness prints this line; the timeout would print the incomplete report
    assert out.count("\n") == 1 and "startup.log: ready" in out


def test_follow_reports_a_fatal_event(tmp_path, monkeypatch):
    from triage.apps.live import follow as follow_mod

    settled = []  # the watch said the failure's burst was over: the follow ended there, not at the timeout
    real = follow_mod.Watch.settled
    monkeypatch.setattr(follow_mod.Watch, "settled", lambda self, last: settled.append(real(self, last)) or settled[-1])
    log = tmp_path / "startup.log"
    _writer(log, FAILING.read_bytes())
    code, out, _ = _run(["--follow", str(log), "--timeout", "120", "-f", "json"])
    assert code == 1
    assert json.loads(out)["diagnoses"][0]["id"] == "kv_cache_insufficient"
    assert settled and settled[-1] is True


def test_follow_timeout_reports_what_is_known(tmp_path):
    log = tmp_path / "startup.log"
    log.write_bytes(_until(HEALTHY.read_bytes(), b"Loading weights took"))  # all there before the follow
    code, out, _ = _run(["--follow", str(log), "--timeout", "1", "-f", "json"])
    assert code == 0
    assert json.loads(out)["outcome"] == "incomplete"


def test_follow_missing_file_and_usage(tmp_path):
    code, _, err = _run(["--follow", str(tmp_path / "never.log"), "--timeout", "0.2"])
    assert code == 2 and err.count("\n") == 1 and "no such file" in err
    assert _run(["--timeout", "3", str(HEALTHY)])[0] == 2
    assert _run(["--follow", str(HEALTHY), str(HEALTHY)])[0] == 2
    assert _run([])[0] == 2


def test_tail_reads_again_after_truncation_and_rotation(tmp_path):
    from triage.apps.live.follow import _Tail

    path = tmp_path / "a.log"
    path.write_bytes(b"first run\n")
    tail = _Tail(str(path))
    assert tail.open() and tail.read() == b"first run\n" and tail.read() == b""
    path.write_bytes(b"new\n")  # truncated and rewritten
    assert tail.read() == b"" and tail.read() == b"new\n"
    path.rename(tmp_path / "a.log.1")
    path.write_bytes(b"rotated\n")
    assert tail.read() == b"rotated\n"
    tail.close()


def test_pipeline_reads_a_live_feed_incrementally():
    """The fatal event is seen while the feed is still open (the reader does not wait for EOF)."""
    from triage.apps.live.feed import Watch
    from triage.pipeline import Options, load_rules

    watch = Watch("live", Options(), load_rules())
    watch.feed.write(FAILING.read_bytes())
    deadline = time.monotonic() + 120  # generous: the point is that it comes before the feed closes
    while watch.fatal_at is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert watch.fatal_at is not None
    assert watch.finish().diagnoses[0].id == "kv_cache_insufficient"


def _line_by_line(monkeypatch, log: Path) -> None:
    """The follow's reader hands the log over one line per read, as a server writing it would."""
    from triage.apps.live import follow as follow_mod

    lines = log.read_bytes().splitlines(keepends=True)

    class LineTail:
        fifo = ended = False  # a regular file: the FIFO's end and "no input" do not apply
        received = True

        def __init__(self, path: str) -> None:
            self.left = list(lines)

        def open(self) -> bool:
            return True

        def read(self) -> bytes:
            return self.left.pop(0) if self.left else b""

        def close(self) -> None:
            pass

    monkeypatch.setattr(follow_mod, "_Tail", LineTail)


def test_follow_a_port_bind_after_startup_complete_is_a_failure(monkeypatch):
    """uvicorn says `Application startup complete.` before it binds: the bind error after it counts."""
    _line_by_line(monkeypatch, FIXTURES / "port_in_use" / "v054-bind-after-startup-complete.log")
    code, out, _ = _run(["--follow", "x.log", "--timeout", "120", "-q"])
    assert code == 1
    assert "port_in_use" in out and out.count("\n") == 1  # -q: one line, not the full report


def test_follow_the_engine_built_is_not_ready(monkeypatch):
    """`init engine ... took` comes before the API server binds its port: not ready yet."""
    log = FIXTURES / "port_in_use" / "v092-healthy-vllm-port-env-retry.log"
    _line_by_line(monkeypatch, log)
    code, out, _ = _run(["--follow", "x.log", "--timeout", "120"])
    assert code == 0 and "ready" in out
    assert "init engine" not in out and "Available routes" not in out
    assert "line 58: 'Avg prompt throughput:'" in out  # the log goes on: served, not just started


def test_follow_uvicorn_running_is_ready_at_once(monkeypatch):
    log = FIXTURES / "port_in_use" / "v063post1-healthy-readiness-poll-port-8000.log"
    _line_by_line(monkeypatch, log)
    code, out, _ = _run(["--follow", "x.log", "--timeout", "120"])
    assert code == 0 and "line 41: 'Uvicorn running on'" in out


def test_run_takes_the_main_commands_report_flags(tmp_path):
    """-q, --width, --color, --exit-zero, --rules, --no-redact: what `vllm-triage LOG` takes."""
    pack = tmp_path / "empty.yaml"
    pack.write_text("schema: 1\nrules: []\n")
    code, out, err = _run(
        [
            "run",
            "-q",
            "--width",
            "60",
            "--color",
            "never",
            "--exit-zero",
            "--rules",
            str(pack),
            "--",
            PY,
            "-c",
            CAT,
            str(FAILING),
            "3",
        ]
    )
    assert code == 0 and out == FAILING.read_text(encoding="utf-8")
    assert err.count("\n") == 1 and "kv_cache_insufficient" in err
    code, _, err = _run(["run", "--no-redact", "-q", "--", PY, "-c", CAT, str(FAILING), "1"])
    assert code == 1 and "--no-redact shows secrets" in err
