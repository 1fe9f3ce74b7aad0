"""The CLI in-process: formats, outputs, stdin, exit codes, one-line errors."""

from __future__ import annotations

import json

from conftest import FIXTURES, run_cli

FAILED = FIXTURES / "kv_cache_insufficient" / "v1-0.9.2-tp2-qwen14b-4090-estimated-max-len.log"
HEALTHY = FIXTURES / "healthy" / "v1-0.8.5-llama8b-h100-ctrl-c-shutdown-traceback.log"


run = run_cli


def test_failed_log_exits_1_and_names_the_cause():
    code, out, _ = run([str(FAILED), "--format", "json"])
    assert code == 1
    report = json.loads(out)
    assert report["outcome"] == "failed" and report["diagnoses"][0]["id"] == "kv_cache_insufficient"


def test_healthy_log_exits_0_with_no_diagnosis():
    code, out, _ = run([str(HEALTHY), "-f", "json"])
    assert code == 0 and json.loads(out)["diagnoses"] == []


def test_stdin_dash():
    code, out, _ = run(["-", "-f", "json"], stdin=FAILED.read_bytes())
    assert code == 1 and json.loads(out)["input"]["name"] == "<stdin>"


def test_default_format_off_a_tty_is_markdown():
    _, out, _ = run([str(FAILED)])
    assert out.startswith("## vllm-triage: failed")


def test_several_format_output_pairs(tmp_path):
    j, m = tmp_path / "r.json", tmp_path / "r.md"
    code, out, _ = run([str(FAILED), "-f", "json", "-o", str(j), "-f", "markdown", "-o", str(m), "-f", "terminal"])
    assert code == 1
    assert json.loads(j.read_text())["schema_version"] == 1
    assert m.read_text().startswith("## vllm-triage")
    assert "kv_cache_insufficient" in out


def test_two_stdout_formats_is_a_usage_error():
    code, _, err = run([str(FAILED), "-f", "json", "-f", "markdown"])
    assert code == 2 and err.count("\n") == 1


def test_several_logs_give_json_lines():
    code, out, _ = run([str(FAILED), str(HEALTHY), "-f", "json"])
    lines = out.strip().splitlines()
    assert code == 1 and len(lines) == 2
    assert [json.loads(x)["outcome"] for x in lines] == ["failed", "healthy"]


def test_directory_and_missing_file_are_one_line_exit_2(tmp_path):
    for arg in (str(tmp_path), str(tmp_path / "missing.log")):
        code, _, err = run([arg])
        assert code == 2 and err.count("\n") == 1 and err.startswith("vllm-triage: ")


def test_unknown_option_is_usage_error():
    code, _, err = run(["--frobnicate", str(FAILED)])
    assert code == 2 and "unrecognized arguments" in err


def test_bad_rule_pack_lists_every_problem(tmp_path):
    pack = tmp_path / "bad.yaml"
    pack.write_text(
        "schema: 1\nrules:\n  - id: a-b\n    cause: nope\n    title: t\n  - id: c-d\n    cause: nope\n    title: t\n"
    )
    code, _, err = run([str(FAILED), "--rules", str(pack)])
    assert code == 2
    assert "'a-b'" in err and "'c-d'" in err


def test_schema_subcommand():
    code, out, _ = run(["schema"])
    assert code == 0 and json.loads(out)["title"] == "Report"


def test_rules_list_and_check():
    code, out, _ = run(["rules", "list"])
    assert code == 0 and "kv-needed-exceeds-available" in out
    code, out, _ = run(["rules", "check"])
    assert code == 0 and out.startswith("ok:")


def test_secrets_do_not_reach_any_format(tmp_path):
    log = tmp_path / "s.log"
    token = "hf_" + "a" * 34
    log.write_text(
        f"INFO 06-10 08:00:00 [cli_args.py:300] non-default args: {{'model': 'x/y', 'hf_token': '{token}'}}\n"
        + FAILED.read_text()
    )
    for fmt in ("json", "markdown", "terminal"):
        _, out, _ = run([str(log), "-f", fmt])
        assert token not in out


def test_the_entry_point_ends_at_once_with_all_its_output_and_its_code(tmp_path):
    """`entry()` skips the interpreter's teardown after a plain run (os._exit once flushed):
    whatever went to stdout, a file or stderr is all there, and the exit code is main's."""
    import subprocess
    import sys

    logs = [str(FAILED)] * 40 + [str(HEALTHY)]  # JSON Lines well past a pipe's buffer
    out_file = tmp_path / "r.md"
    p = subprocess.run(
        [sys.executable, "-m", "triage", *logs, "-f", "json", "-f", "markdown", "-o", str(out_file)],
        capture_output=True,
        text=True,
    )
    code, out, err = run([*logs, "-f", "json", "-f", "markdown", "-o", str(tmp_path / "in-process.md")])
    assert (p.returncode, p.stdout, p.stderr) == (code, out, err) == (1, out, "")
    assert out_file.read_text() == (tmp_path / "in-process.md").read_text()
    bad = subprocess.run(
        [sys.executable, "-m", "triage", str(tmp_path / "missing.log")], capture_output=True, text=True
    )
    assert bad.returncode == 2 and bad.stderr.startswith("vllm-triage: ") and bad.stdout == ""
