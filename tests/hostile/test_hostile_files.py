"""Special files and odd encodings: every input is opened by kind, and never hangs or floods.

A FIFO's open() waits for a writer, `/dev/urandom` never ends, `/dev/zero` has an
`st_size` of 0: each of them once hung `--follow`, `batch` or `rules check`, or filled the
memory. Regular files and pipes are read as before; a named pipe is read as `cat` reads it
(a bounded wait for its writer; none, or an empty one, is "no input", exit 2); devices and sockets are refused in one line; `batch` reads regular files only, as long as
they were when opened; rule packs are read with a hard byte cap. A UTF-16 BOM must be
followed by UTF-16 text, and the binary sniff looks at 64 KiB, not a few bytes.

Whatever could hang runs in a child process with a generous limit: a regression fails the
test instead of stopping the suite. No bound here is a timing assertion.
"""

from __future__ import annotations

import io
import json
import os
import random
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import CORPUS, FIXTURES, ROOT
from secret_cases import FAILED

from triage.apps.cli import main
from triage.errors import InputError
from triage.ingest.read import InputStats, iter_chunks, open_source
from triage.rule_engine.load import MAX_PACK_BYTES

HEALTHY_START = b"INFO 07-01 10:00:00 [api_server.py:1043] vLLM API server version 0.8.5\n"
HANG_LIMIT = 120  # seconds a child may take before it counts as hung: far above any honest run


def tool(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The CLI in a child process; a hang is a failed test (TimeoutExpired), not a stuck suite."""
    return subprocess.run(
        [sys.executable, "-m", "triage", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=HANG_LIMIT,
        env={**os.environ, **(env or {})},
    )


def one_line(err: str) -> str:
    assert err.count("\n") == 1 and err.startswith("vllm-triage: "), err
    return err


def cli(argv: list[str], stdin: bytes | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, stdin=io.BytesIO(stdin) if stdin is not None else None, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def write_fifo(path: Path, data: bytes, hold: threading.Event | None = None) -> threading.Thread:
    """A writer on PATH (its open waits for the reader), which writes DATA, then holds the
    pipe open until HOLD is set (a server still running), then closes it."""

    def write() -> None:
        with open(path, "wb") as fh:
            fh.write(data)
            fh.flush()
            if hold is not None:
                hold.wait(HANG_LIMIT)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


# ---- FIFOs ------------------------------------------------------------------------------------


def test_follow_a_fifo_without_a_writer_is_no_input_at_its_timeout(tmp_path):
    fifo = tmp_path / "vllm.log"
    os.mkfifo(fifo)
    proc = tool("--follow", str(fifo), "--timeout", "2", "-f", "json")
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout
    assert "no input" in one_line(proc.stderr) and "within 2 s" in proc.stderr


def test_follow_a_fifo_whose_writer_closes_empty_is_no_input(tmp_path):
    fifo = tmp_path / "vllm.log"
    os.mkfifo(fifo)
    writer = write_fifo(fifo, b"")  # opens, writes nothing, closes
    proc = tool("--follow", str(fifo), "--timeout", str(HANG_LIMIT // 2), "-f", "json")
    writer.join(HANG_LIMIT)
    assert proc.returncode == 2 and proc.stdout == ""
    assert "no input" in one_line(proc.stderr)


def test_follow_a_fifo_ends_when_its_writer_closes(tmp_path):
    fifo = tmp_path / "vllm.log"
    os.mkfifo(fifo)
    writer = write_fifo(fifo, HEALTHY_START)  # a start that is neither ready nor failed, then the close
    proc = tool("--follow", str(fifo), "-f", "json")  # no --timeout: only the writer's close ends it
    writer.join(HANG_LIMIT)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["input"]["bytes"] == len(HEALTHY_START)


def test_follow_a_fifo_reads_what_its_writer_writes(tmp_path):
    fifo = tmp_path / "vllm.log"
    os.mkfifo(fifo)
    hold = threading.Event()
    writer = write_fifo(fifo, FAILED.read_bytes(), hold)
    try:
        proc = tool("--follow", str(fifo), "--timeout", str(HANG_LIMIT // 2), "-f", "json")
    finally:
        hold.set()
        writer.join(HANG_LIMIT)
    assert proc.returncode == 1, proc.stderr
    assert json.loads(proc.stdout)["diagnoses"][0]["id"] == "kv_cache_insufficient"


def test_a_fifo_log_is_read_like_a_pipe(tmp_path):
    fifo = tmp_path / "vllm.log"
    os.mkfifo(fifo)
    writer = write_fifo(fifo, FAILED.read_bytes())
    proc = tool(str(fifo), "-f", "json")
    writer.join(HANG_LIMIT)
    assert proc.returncode == 1 and json.loads(proc.stdout)["diagnoses"][0]["id"] == "kv_cache_insufficient"


def test_a_fifo_whose_writer_closes_empty_is_no_input_not_a_healthy_log(tmp_path):
    fifo = tmp_path / "vllm.log"
    os.mkfifo(fifo)
    writer = write_fifo(fifo, b"")
    proc = tool(str(fifo), "-f", "json")
    writer.join(HANG_LIMIT)
    assert proc.returncode == 2 and proc.stdout == ""
    assert "no input" in one_line(proc.stderr) and "closed it without writing" in proc.stderr


def test_a_fifo_without_a_writer_is_no_input_after_a_bounded_wait(tmp_path):
    fifo = tmp_path / "vllm.log"
    os.mkfifo(fifo)
    proc = tool(str(fifo), "-f", "json", env={"VLLM_TRIAGE_FIFO_WAIT": "1"})
    assert proc.returncode == 2 and proc.stdout == ""
    assert "no input" in one_line(proc.stderr) and "within 1 s" in proc.stderr
    writer = write_fifo(fifo, FAILED.read_bytes())  # the pipe still works for the next reader
    proc = tool(str(fifo), "-f", "json")
    writer.join(HANG_LIMIT)
    assert proc.returncode == 1


# ---- devices and sockets ----------------------------------------------------------------------


@pytest.fixture
def unix_socket(tmp_path):
    path = tmp_path / "s.log"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    yield path
    sock.close()


def test_devices_and_sockets_are_refused_in_one_line(tmp_path, unix_socket):
    link = tmp_path / "random.log"
    link.symlink_to("/dev/urandom")
    for path, kind in ((link, "character device"), (Path("/dev/zero"), "character device"), (unix_socket, "socket")):
        proc = tool(str(path))
        assert proc.returncode == 2 and kind in one_line(proc.stderr) and proc.stdout == ""
        proc = tool("--follow", str(path), "--timeout", "1")
        assert proc.returncode == 2 and kind in one_line(proc.stderr)


def test_batch_never_blocks_on_an_entry(tmp_path, unix_socket):
    (tmp_path / "good.log").write_bytes(FAILED.read_bytes())
    os.mkfifo(tmp_path / "pipe.log")
    (tmp_path / "random.log").symlink_to("/dev/urandom")
    proc = tool("batch", str(tmp_path), "--jobs", "1", "-f", "jsonl")
    assert proc.returncode == 1, proc.stderr
    records = {Path(r["input"]["name"]).name: r for r in map(json.loads, proc.stdout.splitlines())}
    assert records["good.log"]["diagnoses"][0]["id"] == "kv_cache_insufficient"
    assert "named pipe" in records["pipe.log"]["error"]
    assert "character device" in records["random.log"]["error"]
    assert "socket" in records["s.log"]["error"]


def test_batch_reads_a_growing_file_as_long_as_it_was_when_opened(tmp_path):
    path = tmp_path / "growing.log"
    path.write_bytes(b"INFO first line\n")
    stream, _ = open_source(str(path), regular_only=True)
    with stream, open(path, "ab") as fh:
        fh.write(b"INFO written after the open\n" * 1000)
        fh.flush()
        assert stream.read() == b"INFO first line\n"


# ---- rule packs -------------------------------------------------------------------------------


def test_rule_packs_are_read_with_a_hard_cap_and_must_be_regular_files(tmp_path):
    zero = tmp_path / "zero.yaml"
    zero.symlink_to("/dev/zero")  # st_size 0, endless: a size check by stat would read it forever
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)  # nobody writes: an open() for reading would wait forever
    big = tmp_path / "big.yaml"
    big.write_bytes(b"#" * (MAX_PACK_BYTES + 1))
    for pack, words in ((zero, "character device"), (fifo, "named pipe"), (big, "larger than")):
        proc = tool("rules", "check", str(pack))
        assert proc.returncode == 2 and words in one_line(proc.stderr), proc.stderr
        proc = tool(str(FAILED), "--rules", str(pack))
        assert proc.returncode == 2 and words in one_line(proc.stderr)


# ---- encodings and the binary sniff -----------------------------------------------------------


def test_a_utf16_bom_followed_by_utf8_text_is_read_as_utf8():
    """PowerShell's `>` begins a file with a UTF-16LE BOM; `cat >>` then appends UTF-8."""
    data = FAILED.read_bytes()
    for bom in (b"\xff\xfe", b"\xfe\xff"):
        code, out, err = cli(["-", "-f", "json"], stdin=bom + data)
        report = json.loads(out)
        assert code == 1 and report["outcome"] == "failed", err
        assert report["diagnoses"][0]["id"] == "kv_cache_insufficient"
        assert report["input"]["bytes"] == len(data) + 2 and report["input"]["lines"] == data.count(b"\n")


def test_real_utf16_is_still_read_as_utf16():
    for encoding in ("utf-16", "utf-16-be"):
        data = FAILED.read_text(encoding="utf-8").encode(encoding)
        if encoding == "utf-16-be":
            data = b"\xfe\xff" + data
        code, out, _ = cli(["-", "-f", "json"], stdin=data)
        assert code == 1 and json.loads(out)["diagnoses"][0]["id"] == "kv_cache_insufficient"


def test_random_files_are_refused_as_binary(tmp_path):
    for seed in range(50):
        path = tmp_path / f"random-{seed}.log"
        data = random.Random(seed).randbytes(1 << 20)
        path.write_bytes(data if data[:2] != b"\x1f\x8b" else b"x" + data)  # gzip is its own path
        code, out, err = cli([str(path)])
        assert code == 2 and out == "" and "binary" in one_line(err), f"seed {seed} read as text"
        path.unlink()


def every_known_log() -> list[Path]:
    logs = sorted(p for p in FIXTURES.rglob("*") if p.is_file() and not p.name.endswith(".yaml"))
    if CORPUS.is_dir():
        logs += sorted(p for p in CORPUS.rglob("*") if p.is_file() and not p.name.endswith((".yaml", ".md")))
    return logs


def test_every_fixture_and_corpus_log_passes_the_binary_sniff():
    logs = every_known_log()
    assert len(logs) > 100
    for path in logs:
        with open(path, "rb") as fh:
            try:
                next(iter(iter_chunks(fh, InputStats(path.name))), None)
            except InputError as exc:
                pytest.fail(f"{path.relative_to(path.parents[2])}: {exc}")
