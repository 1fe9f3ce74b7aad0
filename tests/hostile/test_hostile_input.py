"""Hostile input: any bytes in, a bounded answer out.

Property tests (hypothesis) drive reading, line peeling, parsing and the rule expression
language with arbitrary bytes and with mutations of real log lines: nothing raises but the
tool's own errors, every physical line is counted, every pathological shape gets a sound
answer, and the pipeline's work (counted calls, not time) grows linearly with the lines.
Explicit cases go through the CLI: empty input, NUL bytes, invalid UTF-8, UTF-16, a 100 MB
line, 10 million empty lines, binaries, gzip (and a gzip bomb), absurd figures, paths that
are not readable files.

The default run is sized for CI (about half a minute). A longer fuzz run:

    VLLM_TRIAGE_FUZZ=1 .venv/bin/python -m pytest tests/hostile/test_hostile_input.py

raises hypothesis' examples and the input sizes.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import line_shapes
import pytest
from conftest import FIXTURES, ROOT
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from line_shapes import PATHOLOGICAL

from triage.apps.cli import main
from triage.diagnose.match import RULE_OPS
from triage.errors import ExpressionError, InputError, TriageError
from triage.ingest import read
from triage.ingest.lines import Line, peel
from triage.ingest.read import InputStats, iter_lines
from triage.model import events as ev
from triage.parse.parse import parse_line_detail
from triage.rule_engine.expr import FactView, Trace, compile_expr
from triage.rule_engine.functions import FUNCTIONS
from triage.rule_engine.op_budget import Budget, BudgetExceeded
from triage.rule_engine.template import compile_template
from triage.timeline.facts import Fact

FUZZ = os.environ.get("VLLM_TRIAGE_FUZZ") == "1"
EXAMPLES = 3000 if FUZZ else 80
SCALE = 10 if FUZZ else 1
PROPERTY = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=not FUZZ,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

FAILED = FIXTURES / "kv_cache_insufficient" / "v1-0.9.2-tp2-qwen14b-4090-estimated-max-len.log"
REAL_LINES = sorted(
    {
        line
        for p in sorted(FIXTURES.glob("**/*.log"))
        for line in p.read_text(encoding="utf-8", errors="replace").splitlines()
        if line.strip()
    }
)
FAILURE_LOGS = sorted(p for p in FIXTURES.glob("*/*.log") if p.parent.name not in ("healthy", "damaged"))


def cli(argv: list[str], stdin: bytes | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, stdin=io.BytesIO(stdin) if stdin is not None else None, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def strict_json(text: str):
    """JSON as other tools read it: NaN and Infinity are not JSON."""

    def refuse(token: str):
        raise AssertionError(f"{token} in the JSON report")

    return json.loads(text, parse_constant=refuse)


def one_clear_line(err: str) -> str:
    """The contract for exit 2: exactly one line on stderr, prefixed, and no traceback."""
    assert err.count("\n") == 1 and err.startswith("vllm-triage: "), err
    assert "Traceback" not in err
    return err


def physical_lines(text: str) -> int:
    """Lines as a reader counts them: split on \\n only (a \\r redraws a progress bar)."""
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def read_all(data: bytes) -> tuple[list[str], InputStats]:
    stats = InputStats(name="fuzz")
    return list(iter_lines(io.BytesIO(data), stats)), stats


def expected_lines(data: bytes) -> int:
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return physical_lines(data.decode("utf-16", errors="replace"))
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    return physical_lines(data.decode("utf-8", errors="replace"))


# ---- strategies ---------------------------------------------------------------------------------

ANCHORS = [
    "CUDA out of memory. ",
    ": error: ",
    " is not divisible by ",
    "Error: ",
    " has no vLLM implementation",
    "[repeated 3x across cluster]",
    "Tried to allocate ",
    "GiB",
    "Traceback (most recent call last):",
    'File "x.py", line 1, in f',
    "max seq len (",
    "total_gpu_memory (",
    "# GPU blocks: ",
]


@st.composite
def mutated_line(draw) -> str:
    """A real log line, then edits: cut, insert, repeat, replace with hostile characters."""
    line = draw(st.sampled_from(REAL_LINES))
    for _ in range(draw(st.integers(0, 4))):
        i = draw(st.integers(0, len(line)))
        j = draw(st.integers(i, len(line)))
        edit = draw(st.sampled_from(["cut", "insert", "repeat", "replace", "splice"]))
        if edit == "cut":
            line = line[:i] + line[j:]
        elif edit == "insert":
            line = line[:i] + draw(st.text(max_size=20)) + line[i:]
        elif edit == "repeat":
            line = line[:i] + line[i:j] * draw(st.integers(2, 50 * SCALE)) + line[j:]
        elif edit == "replace":
            line = line[:i] + draw(st.sampled_from(PATHOLOGICAL)) * (j - i) + line[j:]
        else:
            line = line[:i] + draw(st.sampled_from(ANCHORS + REAL_LINES)) + line[j:]
    return line[: read.MAX_LINE_CHARS]


hostile_text = st.one_of(
    mutated_line(),
    st.text(max_size=300),
    st.lists(st.sampled_from(PATHOLOGICAL + ANCHORS), max_size=60).map("".join),
)


def to_line(text: str) -> Line:
    return peel(text, 7)


# ---- reading ------------------------------------------------------------------------------------


@PROPERTY
@given(st.binary(max_size=4000))
def test_any_bytes_read_or_refused_cleanly(data):
    try:
        lines, stats = read_all(data)
    except InputError as exc:  # binary, or damaged gzip: one clear line
        assert "\n" not in str(exc)
        return
    assert len(lines) == stats.lines
    if not data.startswith(b"\x1f\x8b"):
        assert stats.lines == expected_lines(data)
    assert all(len(line) <= read.MAX_LINE_CHARS for line in lines)


newline_soup = st.lists(
    st.sampled_from(["\n", "\r", "\r\n", " ", "x", "é", "\x00", "\ufffd", "INFO ", "\x1b[0m"]), max_size=200
).map("".join)


@PROPERTY
@given(
    st.one_of(newline_soup, st.lists(hostile_text, max_size=20).map("\n".join)),
    st.sampled_from(["utf-8", "utf-8-sig", "utf-16", "utf-16-be-bom", "latin-1"]),
    st.booleans(),
)
def test_text_in_any_encoding_counts_every_line(text, encoding, gz):
    if encoding == "utf-16-be-bom":
        data = b"\xfe\xff" + text.encode("utf-16-be", errors="replace")
    else:
        data = text.encode(encoding, errors="replace")
    try:
        lines, stats = read_all(gzip.compress(data) if gz else data)
    except InputError as exc:
        assert "binary" in str(exc)  # NUL-heavy text is refused as binary, never misread
        return
    assert stats.lines == len(lines) == expected_lines(data)
    assert stats.compressed == gz


@PROPERTY
@given(st.integers(1, 5), st.integers(0, 3 * read.MAX_LINE_CHARS), st.sampled_from([b"x", b"\r", b"ab\r", b"\xff"]))
def test_long_lines_are_capped_and_counted(n_lines, length, unit):
    body = (unit * (length // len(unit) + 1))[:length]
    data = b"\n".join([body] * n_lines)
    try:
        lines, stats = read_all(data)
    except InputError as exc:  # lines of nothing but invalid UTF-8 are no text (read.py's sniff)
        assert unit == b"\xff" and "binary" in str(exc)
        return
    assert stats.lines == len(lines) == expected_lines(data)
    assert all(len(line) <= read.MAX_LINE_CHARS for line in lines)
    assert stats.truncated_lines <= n_lines


# ---- lines, parse -------------------------------------------------------------------------------


@PROPERTY
@given(hostile_text)
def test_peel_and_parse_never_raise(text):
    line = to_line(text)
    assert isinstance(line.text, str) and line.no == 7
    events, ran_out = parse_line_detail(line)
    assert isinstance(ran_out, bool)
    for event in events:
        assert isinstance(event, ev.Event) and event.line == 7


@PROPERTY
@given(st.lists(mutated_line(), min_size=1, max_size=40))
def test_pipeline_on_mutated_logs_counts_every_line(lines):
    data = "\n".join(lines).encode("utf-8", errors="replace")
    code, out, err = cli(["-", "-f", "json"], stdin=data)
    if code == 2:  # only a refusal of the input as a whole (binary) may stop it
        assert "binary" in one_clear_line(err)
        return
    report = json.loads(out)
    assert code in (0, 1) and report["input"]["lines"] == expected_lines(data)


# ---- pathological shapes ---------------------------------------------------------------------------
# Every shape of line_shapes.py at full size through the reader it is aimed at: a sound answer.
# How the time grows is measured by benchmarks/linearity.py (the suite asserts no speed); that
# no regex can backtrack exponentially is checked statically (test_regex_shapes.py).

FULL = 30_000 * SCALE  # characters: under the 64 KiB line cap, 100x the shortest measured


@pytest.mark.parametrize(
    "label, reader, unit, prefix, suffix",
    [(label, fn, *s) for label, fn, shapes in line_shapes.families() for s in shapes],
    ids=[
        f"{label}-{repr(s[1] + s[0] + s[2])[1:-1][:24]}" for label, _, shapes in line_shapes.families() for s in shapes
    ],
)
def test_each_pathological_shape_gets_a_sound_answer(label, reader, unit, prefix, suffix):
    text = line_shapes.shape(unit, prefix, suffix)(FULL)
    out = reader(text)
    if label == "redact":
        assert isinstance(out, str) and len(out) <= 2 * len(text) + 64  # masks, does not multiply
    elif label == "peel+parse":
        assert all(isinstance(e, ev.Event) for e in out)


def _calls(fn, arg) -> int:
    """Python and C function calls made by fn(arg): a count of work that no load can change."""
    count = 0

    def profile(frame, event, _arg) -> None:
        nonlocal count
        if event == "call" or event == "c_call":
            count += 1

    sys.setprofile(profile)
    try:
        fn(arg)
    finally:
        sys.setprofile(None)
    return count


def test_whole_pipeline_work_grows_linearly_with_the_lines():
    """The calls the pipeline makes on 10x and 100x the lines: about 10x and 100x (each line
    costs the same), not 100x and 10000x (a rescan per line). Counted, not timed."""
    from triage.pipeline import run

    lines = random.Random(7).sample(REAL_LINES, 100)
    block = ("\n".join(lines) + "\n").encode()
    run(io.BytesIO(block), "warm")  # caches and lazy imports filled before counting
    one, ten, hundred = (_calls(lambda data: run(io.BytesIO(data), "x"), block * k) for k in (1, 10, 100))
    assert ten / one < 14, f"10x the lines made {ten / one:.1f}x the calls ({one} -> {ten})"
    assert hundred / one < 140, f"100x the lines made {hundred / one:.1f}x the calls ({one} -> {hundred})"


# ---- the CLI on hostile input ---------------------------------------------------------------------


def test_empty_input():
    code, out, err = cli(["-", "-f", "json"], stdin=b"")
    report = json.loads(out)
    assert code == 0 and err == "" and report["input"]["lines"] == 0 and report["outcome"] == "incomplete"
    assert "the input is empty" in report["notes"]


def test_only_whitespace():
    code, out, _ = cli(["-", "-f", "json"], stdin=b"  \n\t\n\r\n   \n \x0b ")
    assert code == 0 and json.loads(out)["input"]["lines"] == 5


def test_nul_bytes_in_a_log_are_read_past():
    data = FAILED.read_bytes()
    head, tail = data[:9000], data[9000:]
    code, out, _ = cli(["-", "-f", "json"], stdin=head + b"\x00" * 3000 + b"\n" + tail.replace(b" ", b" \x00", 50))
    report = json.loads(out)
    assert code == 1 and report["input"]["lines"] == data.count(b"\n") + 1
    assert report["diagnoses"][0]["id"] == "kv_cache_insufficient"


def test_nothing_but_nul_bytes_is_refused_as_binary():
    code, out, err = cli(["-"], stdin=b"\x00" * 10000)
    assert code == 2 and out == "" and "binary" in one_clear_line(err)


def test_invalid_utf8_is_replaced_not_fatal():
    data = FAILED.read_bytes()
    rng = random.Random(1)
    broken = bytearray(data)
    for _ in range(200):
        broken.insert(rng.randrange(len(broken)), rng.choice([0xFF, 0xC3, 0x80, 0xE2, 0xED]))
    code, out, _ = cli(["-", "-f", "json"], stdin=bytes(broken))
    report = json.loads(out)
    assert code in (0, 1) and report["input"]["lines"] == data.count(b"\n") + (not data.endswith(b"\n"))


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be"])
def test_utf16_with_bom_reads_like_utf8(encoding):
    text = FAILED.read_text(encoding="utf-8")
    bom = b"\xff\xfe" if encoding.endswith("le") else b"\xfe\xff"
    code, out, _ = cli(["-", "-f", "json"], stdin=bom + text.encode(encoding))
    _, plain, _ = cli([str(FAILED), "-f", "json"])
    report, expected = json.loads(out), json.loads(plain)
    assert code == 1
    assert report["input"]["lines"] == expected["input"]["lines"]
    assert [d["id"] for d in report["diagnoses"]] == [d["id"] for d in expected["diagnoses"]]


def _write_big(path: Path, unit: bytes, total: int) -> None:
    chunk = unit * ((1 << 20) // len(unit))
    with path.open("wb") as fh:
        for _ in range(total // len(chunk)):
            fh.write(chunk)


def _cli_in_subprocess(args: list[str]) -> dict:
    """Exit code, peak RSS (MiB), stdout and stderr of the CLI in a fresh process.

    The peak is the process's own (VmHWM): Linux's ru_maxrss of a child also holds the peak of
    the parent it was forked from (the test run, hundreds of MiB late in the suite)."""
    code = (
        "import io, json, resource\n"
        "from triage.apps.cli import main\n"
        "out, err = io.StringIO(), io.StringIO()\n"
        f"rc = main({args!r}, stdout=out, stderr=err)\n"
        "try:\n"
        "    hwm = [int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM:')][0]\n"
        "except (OSError, IndexError, ValueError):\n"
        "    hwm = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "print(json.dumps({'rc': rc, 'out': out.getvalue(), 'err': err.getvalue(), 'rss_mib': hwm // 1024}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def test_a_100_mb_single_line_is_cut_in_bounded_memory_and_time(tmp_path):
    size = 100 << 20
    big = tmp_path / "one-line.log"
    _write_big(big, b"CUDA out of memory. 1.5 GiB (x" * 3 + b"=" * 100, size)
    result = _cli_in_subprocess([str(big), "-f", "json"])
    report = json.loads(result["out"])
    assert result["rc"] in (0, 1), result["err"]
    assert report["input"]["lines"] == 1 and report["input"]["truncated_lines"] == 1
    assert report["input"]["bytes"] == big.stat().st_size
    assert result["rss_mib"] < 400, f"peak memory {result['rss_mib']} MiB for a {size >> 20} MiB line"


def test_a_100_mb_line_through_the_reader_yields_one_capped_line():
    stats = InputStats(name="big")

    class Endless(io.RawIOBase):
        left = 100 << 20

        def readable(self) -> bool:
            return True

        def readinto(self, buffer) -> int:
            n = min(len(buffer), self.left)
            buffer[:n] = b"y" * n
            self.left -= n
            return n

    lines = list(iter_lines(io.BufferedReader(Endless()), stats))
    assert len(lines) == 1 and len(lines[0]) == read.MAX_LINE_CHARS - read.CUT_WORD_CHARS and stats.truncated_lines == 1


def test_ten_million_empty_lines(tmp_path):
    n = 10_000_000
    path = tmp_path / "empty-lines.log"
    path.write_bytes(b"\n" * n)
    code, out, _ = cli([str(path), "-f", "json"])
    report = json.loads(out)
    assert code == 0 and report["input"]["lines"] == n and report["outcome"] == "incomplete"


@pytest.mark.parametrize(
    "head",
    [
        b"\x7fELF\x02\x01\x01\x00" + bytes(8) + b"\x02\x00\x3e\x00" + bytes(range(256)) * 8,
        b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 8,
        b"PK\x03\x04\x14\x00\x00\x00\x08\x00" + bytes(range(256)) * 8,
    ],
    ids=["elf", "png", "zip"],
)
def test_binary_files_are_refused_in_one_line(head, tmp_path):
    path = tmp_path / "thing.log"
    path.write_bytes(head)
    code, out, err = cli([str(path)])
    assert code == 2 and out == "" and "binary" in one_clear_line(err)


def test_gzip_is_detected_and_read(tmp_path):
    path = tmp_path / "startup.log.gz"
    path.write_bytes(gzip.compress(FAILED.read_bytes()))
    code, out, _ = cli([str(path), "-f", "json"])
    _, plain, _ = cli([str(FAILED), "-f", "json"])
    report = json.loads(out)
    assert code == 1 and report["input"]["compressed"] is True
    assert report["diagnoses"] == json.loads(plain)["diagnoses"]


def _bomb(path: Path, expanded: int) -> None:
    with gzip.open(path, "wb", compresslevel=9) as fh:
        block = b"INFO 01-01 00:00:00 [x.py:1] nothing to see here\n" * 20000
        for _ in range(expanded // len(block) + 1):
            fh.write(block)


def test_a_gzip_bomb_stops_at_the_expansion_cap(tmp_path, monkeypatch):
    monkeypatch.setattr(read, "MAX_GZIP_EXPANDED", 4 << 20)
    path = tmp_path / "bomb.log.gz"
    _bomb(path, 40 << 20)
    assert path.stat().st_size < (1 << 20)
    code, out, err = cli([str(path)])
    assert code == 2 and out == "" and "expands past" in one_clear_line(err)


def test_max_bytes_caps_the_expanded_size_of_gzip(tmp_path):
    path = tmp_path / "bomb.log.gz"
    _bomb(path, 8 << 20)
    code, _, err = cli([str(path), "--max-bytes", str(1 << 20)])
    assert code == 2 and "larger than the limit" in one_clear_line(err)


@pytest.mark.parametrize(
    "data", [gzip.compress(b"INFO hello\n" * 1000)[:60], b"\x1f\x8b\x08\x00garbage" * 20], ids=["cut", "garbage"]
)
def test_damaged_gzip_is_one_line(data):
    code, _, err = cli(["-"], stdin=data)
    assert code == 2 and "gzip" in one_clear_line(err)


ABSURD = ["1e30", "-5", "7.5", "0", "-0.0", "1" + "0" * 30, "9" * 5000, "1e309", "nan", "inf", "0.000000001"]


@pytest.mark.parametrize("value", ABSURD)
def test_absurd_figures_give_a_best_effort_report(value):
    """Every number of real failure logs replaced by an absurd one: no traceback, a report."""
    for path in FAILURE_LOGS[:: max(1, len(FAILURE_LOGS) // (12 * SCALE))]:
        text = re.sub(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])", value, path.read_text(encoding="utf-8", errors="replace"))
        code, out, err = cli(["-", "-f", "json"], stdin=text.encode())
        assert code in (0, 1), (path.name, err)
        assert strict_json(out)["schema_version"] == 1


@pytest.mark.parametrize("util", ["7.5", "nan", "inf", "-1", "1e400", "0", "'x'", "[0.9]"])
def test_named_absurd_figures(util):
    huge = "1" + "0" * 30
    log = "\n".join(
        [
            "(APIServer pid=7) INFO 10-02 21:07:48 [utils.py:328] non-default args: {'model': 'org/Model-7B', "
            f"'max_model_len': {huge}, 'gpu_memory_utilization': {util}, 'tensor_parallel_size': -2}}",
            f"INFO 05-02 11:00:00 [arg_utils.py:1] args: Namespace(model='x', gpu_memory_utilization={util}, "
            f"max_model_len={huge}, swap_space=1e30, block_size=0)",
            "INFO 05-02 11:00:00 [worker.py:1] Memory profiling takes 1.0 seconds. the current vLLM instance can use "
            f"total_gpu_memory (1e30GiB) x gpu_memory_utilization ({util}) = -3.00GiB",
            "INFO 05-02 11:00:00 [worker.py:1] model weights take -14.99GiB; non_torch_memory takes 1e30GiB; "
            "PyTorch activation peak memory takes 99999999999999999999999.00GiB; the rest of the memory reserved "
            "for KV Cache is -1e30GiB.",
            "INFO 05-02 11:00:00 [gpu_executor.py:1] # GPU blocks: -5, # CPU blocks: 1" + "0" * 40,
            "INFO 05-02 11:00:00 [gpu_model_runner.py:1] Model loading took 1e30 GiB and -3 seconds",
            "ERROR 06-17 08:19:53 [core.py:515] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1e30 GiB. "
            "GPU 0 has a total capacity of -1.00 GiB of which 7.5 EiB is free. Including non-PyTorch memory, this "
            f"process has {huge} GiB memory in use. Of the allocated memory -67.31 GiB is allocated by PyTorch",
            "ValueError: The model's max seq len (" + huge + ") is larger than the maximum number of tokens "
            "that can be stored in KV cache (-12). Try increasing `gpu_memory_utilization` or decreasing "
            "`max_model_len` when initializing the engine.",
        ]
    )
    short = (
        "(APIServer pid=7) INFO 10-02 21:07:48 [utils.py:328] non-default args: {'model': 'org/Model-7B', "
        f"'gpu_memory_utilization': {util}, 'max_model_len': {util}}}\n"
        "ERROR 06-17 08:19:53 [core.py:515] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
        "16.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 11.02 GiB is free.\n"
    )
    for text in (log, short):
        for fmt in ("json", "slack", "markdown", "terminal"):
            code, out, err = cli(["-", "-f", fmt], stdin=text.encode())
            assert code == 1 and out and err == "", err
            if fmt in ("json", "slack"):
                strict_json(out)


def test_a_directory_is_exit_2_in_one_line(tmp_path):
    code, out, err = cli([str(tmp_path)])
    assert code == 2 and out == "" and "directory" in one_clear_line(err)


def test_a_missing_file_is_exit_2_in_one_line(tmp_path):
    code, _, err = cli([str(tmp_path / "nope.log")])
    assert code == 2 and "no such file" in one_clear_line(err)


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads a chmod 000 file anyway")
def test_an_unreadable_file_is_exit_2_in_one_line(tmp_path):
    path = tmp_path / "secret.log"
    path.write_text("INFO hi\n")
    path.chmod(0)
    try:
        code, _, err = cli([str(path)])
    finally:
        path.chmod(0o600)
    assert code == 2 and "cannot read" in one_clear_line(err)


def test_a_permission_error_is_exit_2_in_one_line(tmp_path, monkeypatch):
    """The same contract where the suite runs as root: the open itself is made to fail."""
    path = tmp_path / "secret.log"
    path.write_text("INFO hi\n")
    real_open = open

    def deny(file, mode="r", *args, **kwargs):
        if str(file) == str(path):
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, mode, *args, **kwargs)

    real_os_open = os.open

    def deny_fd(file, flags, *args, **kwargs):
        if str(file) == str(path):
            raise PermissionError(13, "Permission denied", str(file))
        return real_os_open(file, flags, *args, **kwargs)

    monkeypatch.setattr("builtins.open", deny)
    monkeypatch.setattr(os, "open", deny_fd)  # the reader opens by file descriptor (read.open_source)
    code, _, err = cli([str(path)])
    assert code == 2 and "Permission denied" in one_clear_line(err)


# ---- expressions and templates on hostile text ----------------------------------------------------

NAMES = [
    "event",
    "facts",
    "failure",
    "seen",
    "x",
    "event.line",
    "event.requested",
    "facts.gpu_total_bytes",
    "failure.message",
    "__class__",
    "event.__class__",
    "event.model_fields",
    "event.mro",
    "x.__globals__",
    "facts.__init__",
    "event.model_dump",
    "x.real",
    "seen.append",
]
NUMBERS = ["0", "1", "-1", "2.5", "1e30", "1e309", "9" * 400, "1e-300", "16", "3 GiB", "1 bytes"]
CALLS = sorted(FUNCTIONS) + ["eval", "exec", "open", "__import__", "getattr", "type"]
atoms = st.one_of(st.sampled_from(NAMES), st.sampled_from(NUMBERS), st.sampled_from(["'a'", '"b"', "none", "true"]))


def _combine(children):
    return st.one_of(
        st.tuples(
            children,
            st.sampled_from(
                ["+", "-", "*", "/", "//", "%", "<", ">=", "==", "!=", " and ", " or ", " in ", " not in "]
            ),
            children,
        ).map("".join),
        st.tuples(st.sampled_from(CALLS), st.lists(children, max_size=3)).map(lambda t: f"{t[0]}({', '.join(t[1])})"),
        children.map(lambda c: f"({c})"),
        children.map(lambda c: f"-{c}"),
        children.map(lambda c: f"not {c}"),
        st.lists(children, max_size=3).map(lambda xs: f"[{', '.join(xs)}]"),
        st.tuples(children, children, children).map(lambda t: f"{t[0]} if {t[1]} else {t[2]}"),
    )


expressions = st.one_of(st.recursive(atoms, _combine, max_leaves=12 * SCALE), st.text(max_size=80))


def _context(x):
    event = ev.TorchOom(line=3, origin="", device="CUDA", requested=1 << 30)
    facts = FactView({"gpu_total_bytes": Fact(80 << 30, 2), "weird": Fact(x, 4)})
    return {"event": event, "facts": facts, "failure": None, "seen": ["torch_oom"], "x": x}


values = st.one_of(
    st.none(),
    st.integers(),
    st.floats(),
    st.text(max_size=10),
    st.lists(st.integers(), max_size=4),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=3),
)


@PROPERTY
@given(expressions, values)
def test_expressions_compile_or_refuse_and_evaluate_or_refuse(source, x):
    try:
        expr = compile_expr(source)
    except ExpressionError as exc:
        assert "\n" not in str(exc) or source.count("\n")
        return
    try:
        expr.evaluate(_context(x), Trace(budget=Budget(RULE_OPS)))  # the bound a rule runs under
    except (ExpressionError, BudgetExceeded):
        pass


@PROPERTY
@given(
    st.lists(
        st.one_of(
            st.text(max_size=12),
            expressions.map(lambda e: "{" + e + "}"),
            st.tuples(
                expressions,
                st.sampled_from(
                    ["gib", "int", "comma", "pct", "x", "nope", "pids", "list", "num", "fixed2", "mib", "human"]
                ),
            ).map(lambda t: "{" + t[0] + "|" + t[1] + "}"),
        ),
        max_size=6,
    ).map("".join),
    values,
)
def test_templates_render_text_or_none(source, x):
    try:
        template = compile_template(source)
    except ExpressionError:
        return
    try:
        out = template.render(_context(x))
    except ExpressionError:
        return
    assert out is None or isinstance(out, str)


@pytest.mark.parametrize(
    "source",
    [
        "round(5, -1000000000)",
        "round(1e30, 1000000000)",
        "divisors(999983)",
        "divisors(1000000, 'a')",
        "3 in 'abc'",
        "[1] in 'abc'",
        "min('a', 1)",
        "max([1, 'a'])",
        "sum(5)",
        "clamp(1, 'a', 2)",
        "gib(" + "9" * 29 + ")",
        "round_down(5, 0)",
        "len(5)",
        "last(5)",
        "int(1e30)",
        "1e30 * 1e30",
        "-(-(-1e30))",
    ],
)
def test_functions_on_hostile_arguments_are_quick_and_clean(source):
    try:
        compile_expr(source).evaluate(_context(1), Trace(budget=Budget(RULE_OPS)))
    except (ExpressionError, BudgetExceeded):
        pass


def test_errors_of_the_hierarchy_are_one_line():
    for exc in (InputError("x"), ExpressionError("y", where="rules/a.yaml:3")):
        assert isinstance(exc, TriageError) and "\n" not in str(exc)
