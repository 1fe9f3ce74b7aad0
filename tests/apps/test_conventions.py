"""The CLI's conventions (issue 15): what ruff, semgrep and their kin taught users to expect.

--exit-zero, --quiet, `-o -`, NO_COLOR / FORCE_COLOR, VLLM_TRIAGE_FORMAT, --help with every
command and the exit status, --max-bytes with units everywhere, names as given, one bad
path among good ones, and the small ones (stdin twice, --width, schema -o, rules test --root).
"""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import FIXTURES, run_cli

from triage.apps.cli import SUBCOMMANDS

FAILED = FIXTURES / "kv_cache_insufficient" / "v1-0.9.2-tp2-qwen14b-4090-estimated-max-len.log"
HEALTHY = FIXTURES / "healthy" / "v1-0.8.5-llama8b-h100-ctrl-c-shutdown-traceback.log"


run = run_cli


@pytest.fixture
def two_nodes(tmp_path):
    """Two logs with the same file name, as two nodes of one job write them."""
    for node in ("node1", "node2"):
        (tmp_path / node).mkdir()
        shutil.copy(FAILED, tmp_path / node / "vllm.log")
    return [str(tmp_path / "node1" / "vllm.log"), str(tmp_path / "node2" / "vllm.log")]


def test_exit_zero_keeps_the_report_and_exits_0():
    code, out, _ = run([str(FAILED), "-f", "json", "--exit-zero"])
    assert code == 0 and json.loads(out)["diagnoses"][0]["id"] == "kv_cache_insufficient"


def test_exit_zero_does_not_hide_errors(tmp_path):
    code, _, err = run([str(tmp_path / "missing.log"), "--exit-zero"])
    assert code == 2 and "no such file" in err


def test_quiet_is_one_line_per_log():
    code, out, _ = run([str(FAILED), str(HEALTHY), "--quiet"])
    lines = out.splitlines()
    assert code == 1 and len(lines) == 2
    assert lines[0].startswith(f"{FAILED}: failed at line 58: kv_cache_insufficient (0.95)")
    assert "--max-model-len 25776" in lines[0]
    assert lines[1] == f"{HEALTHY}: healthy"


def test_quiet_still_writes_the_files(tmp_path):
    target = tmp_path / "r.json"
    code, out, _ = run([str(FAILED), "-q", "-f", "json", "-o", str(target)])
    assert code == 1 and len(out.splitlines()) == 1 and json.loads(target.read_text())["outcome"] == "failed"


def test_output_dash_is_stdout(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, _ = run([str(FAILED), "-f", "json", "-o", "-"])
    assert code == 1 and json.loads(out)["outcome"] == "failed"
    assert not (tmp_path / "-").exists()


def test_two_dash_outputs_are_two_stdout_reports():
    code, _, err = run([str(FAILED), "-f", "json", "-o", "-", "-f", "markdown"])
    assert code == 2 and "more than one --format writes to stdout" in err


@pytest.mark.parametrize(
    "env,expect",
    [
        ({"FORCE_COLOR": "1"}, True),
        ({"NO_COLOR": "1", "FORCE_COLOR": "1"}, False),
        ({}, False),
        ({"FORCE_COLOR": "0"}, False),
    ],
)
def test_force_color_and_no_color(monkeypatch, env, expect):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    _, out, _ = run([str(FAILED), "-f", "terminal"])
    assert ("\x1b[" in out) is expect


def test_color_flag_wins_over_the_environment(monkeypatch):
    monkeypatch.setenv("FORCE_COLOR", "1")
    _, out, _ = run([str(FAILED), "-f", "terminal", "--color", "never"])
    assert "\x1b[" not in out


def test_format_from_the_environment(monkeypatch):
    monkeypatch.setenv("VLLM_TRIAGE_FORMAT", "json")
    code, out, _ = run([str(FAILED)])
    assert code == 1 and json.loads(out)["schema_version"] == 1
    code, out, _ = run([str(FAILED), "-f", "markdown"])  # --format wins
    assert out.startswith("## vllm-triage")


def test_a_bad_format_in_the_environment_is_one_line(monkeypatch):
    monkeypatch.setenv("VLLM_TRIAGE_FORMAT", "yaml")
    code, _, err = run([str(FAILED)])
    assert code == 2 and err.count("\n") == 1 and "VLLM_TRIAGE_FORMAT" in err


def test_help_lists_every_command_the_exit_status_and_the_environment():
    code, out, _ = run(["--help"])
    assert code == 0
    for name in SUBCOMMANDS:
        assert f"\n  {name} " in out, name
    assert "exit status:" in out and "--exit-zero" in out and "--quiet" in out
    for var in ("VLLM_TRIAGE_FORMAT", "NO_COLOR", "FORCE_COLOR", "GITHUB_STEP_SUMMARY"):
        assert var in out


def test_every_command_has_help():
    for name in SUBCOMMANDS:
        if name == "serve":
            continue  # its help needs nothing, but its module imports the server extra lazily
        code, out, _ = run([name, "--help"])
        assert code == 0 and out.startswith("usage: vllm-triage"), name


def test_max_bytes_takes_units_everywhere(tmp_path):
    code, _, err = run([str(FAILED), "--max-bytes", "1KiB"])
    assert code == 2 and err.count("\n") == 1
    assert run([str(FAILED), "--max-bytes", "20MiB", "-f", "json"])[0] == 1
    assert run(["batch", str(FAILED), "--max-bytes", "20MiB"])[0] == 1
    code, _, err = run([str(FAILED), "--max-bytes", "lots"])
    assert code == 2 and "not a size" in err
    from triage.apps.live.run import _parse_run

    args, _ = _parse_run(["--max-bytes", "20MiB", "--", "true"])
    assert args.max_bytes == 20 << 20


def test_names_as_given_in_every_format(two_nodes):
    _, out, _ = run([*two_nodes, "-f", "json"])
    assert [json.loads(line)["input"]["name"] for line in out.splitlines()] == two_nodes
    _, out, _ = run([*two_nodes, "-f", "github"])
    files = [line.split("file=", 1)[1].split(",", 1)[0] for line in out.splitlines() if line.startswith("::error")]
    assert files == two_nodes
    _, out, _ = run([*two_nodes, "-f", "junit"])
    assert all(f'classname="vllm-triage.{path}"' in out for path in two_nodes)
    for fmt in ("markdown", "terminal", "slack"):
        _, out, _ = run([*two_nodes, "-f", fmt, "--width", "400"])
        flat = out.replace("\\_", "_").replace("\\", "")
        assert all(path in flat for path in two_nodes), fmt


def test_one_bad_path_does_not_cancel_the_others(tmp_path):
    missing = tmp_path / "missing.log"
    code, out, err = run(["-f", "json", str(FAILED), str(missing), str(HEALTHY)])
    assert code == 2
    assert [json.loads(line)["input"]["name"] for line in out.splitlines()] == [str(FAILED), str(HEALTHY)]
    assert err.count("\n") == 1 and str(missing) in err


def test_stdin_cannot_be_read_twice():
    code, out, err = run(["-", "-"], stdin=FAILED.read_bytes())
    assert code == 2 and out == "" and "stdin" in err and err.count("\n") == 1


def test_binary_file_error_names_the_path(tmp_path):
    (tmp_path / "sub").mkdir()
    binary = tmp_path / "sub" / "core.log"
    binary.write_bytes(bytes(range(32)) * 400)
    code, _, err = run([str(binary)])
    assert code == 2 and str(binary) in err


@pytest.mark.parametrize("width", ["-5", "0", "10"])
def test_a_width_too_small_is_a_usage_error(width):
    code, out, err = run([str(FAILED), "-f", "terminal", "--width", width])
    assert code == 2 and out == "" and "--width" in err


def test_schema_writes_to_output_and_has_help(tmp_path):
    target = tmp_path / "schema.json"
    code, out, _ = run(["schema", "-o", str(target)])
    assert code == 0 and out == "" and json.loads(target.read_text())["$schema"].startswith("https://json-schema")
    code, out, _ = run(["schema", "--help"])
    assert code == 0 and "usage: vllm-triage schema" in out


def test_schema_covers_batchs_error_records():
    from triage.model.report import BatchError, json_schema

    schema = json_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["properties"]["schema_version"]["default"] == 1  # the root is still the report
    assert set(schema["$defs"]["BatchError"]["required"]) == {"input", "error"}
    assert schema["$defs"]["BatchLine"]["anyOf"] == [{"$ref": "#"}, {"$ref": "#/$defs/BatchError"}]
    from triage.apps.batch import _error_line

    BatchError.model_validate_json(_error_line("x.log", "no such file: x.log"))


def test_rules_test_without_fixtures_says_root(tmp_path):
    code, out, err = run(["rules", "test", "--root", str(tmp_path)])
    assert code == 2 and "MISSING" not in out and "--root" in err and err.count("\n") == 1
