"""`vllm-triage batch`: many logs, in parallel processes, counted by cause; JSON Lines out."""

from __future__ import annotations

import gzip
import io
import json
import shutil

from conftest import FIXTURES

from triage.apps.cli import main

FAILED = FIXTURES / "kv_cache_insufficient" / "v1-0.9.2-tp2-qwen14b-4090-estimated-max-len.log"
HEALTHY = FIXTURES / "healthy" / "v1-0.8.5-llama8b-h100-ctrl-c-shutdown-traceback.log"


def run(argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(["batch", *argv], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def _folder(tmp_path):
    logs = tmp_path / "logs"
    (logs / "sub").mkdir(parents=True)
    shutil.copy(FAILED, logs / "a-failed.log")
    shutil.copy(HEALTHY, logs / "b-healthy.log")
    (logs / "sub" / "c-failed.log.gz").write_bytes(gzip.compress(FAILED.read_bytes()))
    (logs / "sub" / "d-binary.log").write_bytes(bytes(range(32)) * 400)
    (logs / "notes.md").write_text("not a log")
    return logs


def test_counts_causes_and_writes_one_json_line_per_log_in_order(tmp_path):
    logs = _folder(tmp_path)
    out_file = tmp_path / "reports.jsonl"
    code, out, _ = run([str(logs), "--jsonl", str(out_file), "--jobs", "2"])
    assert code == 1  # failures found
    assert "4 logs" in out and "2 failed, 1 healthy, 0 incomplete, 1 unreadable" in out
    assert "kv_cache_insufficient" in out and "d-binary.log" in out
    rows = [json.loads(line) for line in out_file.read_text().splitlines()]
    names = [r["input"]["name"] for r in rows]
    assert names == sorted(names) and len(rows) == 4
    assert rows[0]["diagnoses"][0]["id"] == "kv_cache_insufficient"
    assert rows[1]["outcome"] == "healthy"
    assert rows[2]["input"]["compressed"] is True
    assert "binary" in rows[3]["error"]


def test_parallel_and_serial_runs_agree(tmp_path):
    logs = _folder(tmp_path)
    _, serial, _ = run([str(logs), "-f", "jsonl", "-j", "1"])
    _, parallel, table = run([str(logs), "-f", "jsonl", "-j", "2"])
    assert serial == parallel
    assert "primary cause" in table  # the table goes to stderr when stdout has the JSON Lines


def test_globs_and_files(tmp_path):
    logs = _folder(tmp_path)
    code, out, _ = run([str(logs / "b-*.log")])
    assert code == 0 and "1 logs" in out and "1 healthy" in out
    code, out, _ = run([str(logs / "**" / "*.gz"), str(logs / "a-failed.log")])
    assert code == 1 and "2 logs" in out and "2 failed" in out


def test_usage_errors_exit_2(tmp_path):
    assert run([str(tmp_path / "nothing-*.log")])[0] == 2
    assert run([str(_folder(tmp_path)), "--jobs", "0"])[0] == 2
    code, _, err = run([])
    assert code == 2 and "vllm-triage:" in err


def test_rotated_logs_are_read(tmp_path):
    shutil.copy(FAILED, tmp_path / "vllm.log.1")
    (tmp_path / "vllm.log.2.gz").write_bytes(gzip.compress(FAILED.read_bytes()))
    shutil.copy(HEALTHY, tmp_path / "vllm.log")
    (tmp_path / "notes.1").write_text("not a log")
    code, out, _ = run([str(tmp_path), "-j", "1", "-f", "jsonl"])
    names = sorted(json.loads(line)["input"]["name"] for line in out.splitlines())
    assert code == 1 and [n.rsplit("/", 1)[1] for n in names] == ["vllm.log", "vllm.log.1", "vllm.log.2.gz"]


def test_batch_never_reads_its_own_output(tmp_path, monkeypatch):
    """`batch . > b.out`: the shell creates b.out (a .out file) before batch looks for logs."""
    shutil.copy(FAILED, tmp_path / "a.log")
    monkeypatch.chdir(tmp_path)
    for _ in range(2):  # the second run finds the first run's b.out and b.jsonl.log too
        with open(tmp_path / "b.out", "w", encoding="utf-8") as redirected:
            code = main(["batch", ".", "-j", "1", "--jsonl", "b.jsonl.log"], stdout=redirected, stderr=io.StringIO())
        assert code == 1
        assert "1 logs" in (tmp_path / "b.out").read_text()


def test_log_names_in_any_case_are_read(tmp_path):
    shutil.copy(FAILED, tmp_path / "NODE.LOG")
    shutil.copy(HEALTHY, tmp_path / "Startup.Log")
    (tmp_path / "VLLM.LOG.1").write_bytes(FAILED.read_bytes())
    (tmp_path / "README.MD").write_text("not a log")
    code, out, _ = run([str(tmp_path), "-j", "1", "-f", "jsonl"])
    names = sorted(json.loads(line)["input"]["name"].rsplit("/", 1)[1] for line in out.splitlines())
    assert code == 1 and names == ["NODE.LOG", "Startup.Log", "VLLM.LOG.1"]
