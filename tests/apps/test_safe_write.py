"""Report files are written where they are named, never through a link planted there.

`-o FILE`, `batch --jsonl FILE` and the GitHub step summary: a link at FILE (to a file outside
the folder, or dangling) is refused in one line and what it points to is left as it was; the
report is written to a new file beside FILE and renamed over it, so it is never written
through a link; FILE naming an input log (itself, or a hard link to it) is refused and the
log kept; a file replaced keeps its permission bits.
"""

from __future__ import annotations

import io
import os
import stat

import pytest
from conftest import FIXTURES

from triage.apps.cli import main

LOG = FIXTURES / "kv_cache_insufficient" / "v1-0.9.2-tp2-qwen14b-4090-estimated-max-len.log"


def cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "outside.txt").write_text("keep me\n")
    (tmp_path / "out" / "run.log").write_bytes(LOG.read_bytes())
    return tmp_path


def _one_line_error(code: int, err: str, *words: str) -> None:
    assert code == 2 and err.count("\n") == 1 and err.startswith("vllm-triage: "), err
    assert all(w in err for w in words), err


@pytest.mark.parametrize(
    "argv",
    [
        ["{log}", "-f", "markdown", "-o", "{target}"],
        ["batch", "{log}", "--jobs", "1", "--jsonl", "{target}"],
    ],
)
def test_a_link_planted_at_the_output_is_not_followed(folder, argv):
    log = str(folder / "out" / "run.log")
    target = folder / "out" / "report"
    target.symlink_to(folder / "outside.txt")
    code, _, err = cli([a.format(log=log, target=target) for a in argv])
    _one_line_error(code, err, "symbolic link")
    assert (folder / "outside.txt").read_text() == "keep me\n" and target.is_symlink()
    dangling = folder / "out" / "dangling"
    dangling.symlink_to(folder / "created-outside.txt")
    code, _, err = cli([a.format(log=log, target=dangling) for a in argv])
    _one_line_error(code, err, "symbolic link")
    assert not (folder / "created-outside.txt").exists()
    assert sorted(p.name for p in (folder / "out").iterdir()) == ["dangling", "report", "run.log"]  # no temp left


@pytest.mark.parametrize(
    "argv",
    [
        ["{log}", "-o", "{target}"],
        ["{log}", "-f", "json", "-o", "{target}"],
        ["batch", "{log}", "--jobs", "1", "--jsonl", "{target}"],
    ],
)
def test_an_input_log_is_never_replaced_by_its_report(folder, argv):
    log = folder / "out" / "run.log"
    os.link(log, folder / "out" / "hard.log")
    for target in (log, folder / "out" / "hard.log", folder / "out" / ".." / "out" / "run.log"):
        code, _, err = cli([a.format(log=log, target=target) for a in argv])
        # batch reads no file it writes: the log is left out, and with it the only input
        _one_line_error(code, err, "no log files found" if argv[0] == "batch" else "input log")
        assert log.read_bytes() == LOG.read_bytes()


def test_a_replaced_report_keeps_its_mode_and_a_new_one_follows_the_umask(folder):
    target = folder / "out" / "report.md"
    target.write_text("old\n")
    target.chmod(0o640)
    code, _, err = cli([str(folder / "out" / "run.log"), "-o", str(target)])
    assert code == 1 and err == "" and target.read_text().startswith("## vllm-triage")
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    fresh = folder / "out" / "fresh.md"
    old = os.umask(0o027)
    try:
        code, _, _ = cli([str(folder / "out" / "run.log"), "-o", str(fresh)])
    finally:
        os.umask(old)
    assert code == 1 and stat.S_IMODE(fresh.stat().st_mode) == 0o640


def test_the_step_summary_is_not_appended_through_a_link(folder, monkeypatch):
    summary = folder / "out" / "summary.md"
    summary.symlink_to(folder / "outside.txt")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    code, _, err = cli([str(folder / "out" / "run.log"), "-f", "github"])
    _one_line_error(code, err, "GITHUB_STEP_SUMMARY")
    assert (folder / "outside.txt").read_text() == "keep me\n"


def test_a_device_is_written_in_place(folder):
    code, _, err = cli([str(folder / "out" / "run.log"), "-o", os.devnull])
    assert code == 1 and err == "" and os.path.exists(os.devnull) and not os.path.isfile(os.devnull)


def test_run_s_log_copy_is_not_written_through_a_link(folder):
    import sys

    log = folder / "out" / "child.log"
    log.symlink_to(folder / "outside.txt")
    code, _, err = cli(["run", "--log", str(log), "--", sys.executable, "-c", "print('hello')"])
    _one_line_error(code, err, "symbolic link")
    assert (folder / "outside.txt").read_text() == "keep me\n"


def test_a_writable_report_in_a_folder_closed_to_new_files_is_written_in_place(folder):
    if os.geteuid() == 0:
        pytest.skip("root may add files to any folder")
    target = folder / "out" / "report.md"
    target.write_text("old\n")
    (folder / "out").chmod(0o555)
    try:
        code, _, err = cli([str(folder / "out" / "run.log"), "-o", str(target)])
    finally:
        (folder / "out").chmod(0o755)
    assert (code, err) == (1, "") and target.read_text().startswith("## vllm-triage")
