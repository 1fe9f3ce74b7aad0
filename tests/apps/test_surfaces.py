"""Issue 25's surfaces: -V, the settings file, --ignore, --min-confidence, completion,
--format gitlab, the report's time, -o with no -f, and the one-line fix."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
from conftest import FIXTURES
from conftest import run_cli as run

FAILED = FIXTURES / "kv_cache_insufficient" / "v1-0.9.2-tp2-qwen14b-4090-estimated-max-len.log"
HEALTHY = FIXTURES / "healthy" / "v1-0.8.5-llama8b-h100-ctrl-c-shutdown-traceback.log"
RECOVERED = FIXTURES / "kv_cache_insufficient" / "v1-0.10.2-llava7b-16g-relaunch-util095-recovered.log"
RTX5090 = FIXTURES / "cuda_driver_mismatch" / "v092-rtx5090-torch27-cu126-no-kernel-image.log"


def test_short_version_flag():
    from triage import __version__

    assert run(["-V"]) == (0, f"vllm-triage {__version__}\n", "")


# ---- the settings file ------------------------------------------------------------------------


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project folder with a subfolder as the working directory (the file is found upward)."""
    (tmp_path / "sub" / "deeper").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "sub" / "deeper")
    monkeypatch.delenv("VLLM_TRIAGE_FORMAT", raising=False)
    monkeypatch.delenv("VLLM_TRIAGE_NO_CONFIG", raising=False)
    return tmp_path


def test_dot_file_found_upward_sets_format_ignore_and_floor(project):
    (project / ".vllm-triage.toml").write_text('format = "json"\nignore = ["kv_cache_insufficient"]\n')
    code, out, _ = run([str(FAILED)])
    report = json.loads(out)
    assert code == 1 and report["diagnoses"] == []  # the server still failed: exit 1
    assert any("kv_cache_insufficient not reported: ignored" in n for n in report["notes"])


def test_pyproject_table_and_the_command_line_wins(project):
    (project / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.vllm-triage]\nformat = "json"\nmin-confidence = 0.99\n'
    )
    _, out, _ = run([str(FAILED)])
    assert json.loads(out)["diagnoses"] == []
    _code, out, _ = run([str(FAILED), "--min-confidence", "0.5", "-f", "markdown"])
    assert out.startswith("## vllm-triage") and "kv\\_cache\\_insufficient" in out
    assert json.loads(run([str(FAILED), "--no-config", "-f", "json"])[1])["diagnoses"]


def test_pyproject_without_the_table_is_passed_over(project):
    (project / "pyproject.toml").write_text('[project]\nname = "x"\n')
    (project / "sub" / "pyproject.toml").write_text("[tool.ruff]\nline-length = 100\n")
    code, out, _ = run([str(FAILED), "-q"])
    assert code == 1 and "kv_cache_insufficient" in out


def test_rules_in_the_settings_are_relative_to_the_file(project):
    pack = next((FIXTURES.parent.parent / "rules").glob("*.yaml"))
    (project / "packs").mkdir()
    shutil.copy(pack, project / "packs" / "extra.yaml")
    (project / ".vllm-triage.toml").write_text('rules = ["packs/does-not-exist.yaml"]\n')
    code, _, err = run([str(FAILED)])
    assert code == 2 and "does-not-exist.yaml" in err


@pytest.mark.parametrize(
    "text,words",
    [
        ('fromat = "json"\n', "unknown key 'fromat' (did you mean format?)"),
        ('format = "pdf"\n', "format 'pdf' is not one of"),
        ('ignore = ["kv_cache_insuficient"]\n', "did you mean kv_cache_insufficient?"),
        ("min-confidence = 2\n", "min-confidence: 2 is not a number from 0 to 1"),
        ("format = [\n", "not valid TOML"),
    ],
)
def test_a_bad_settings_file_is_one_line_naming_it(project, text, words):
    (project / ".vllm-triage.toml").write_text(text)
    code, out, err = run([str(FAILED)])
    assert code == 2 and not out and err.count("\n") == 1
    assert ".vllm-triage.toml" in err and words in err


def test_explicit_config_file_and_no_config_env(project, monkeypatch):
    (project / "elsewhere.toml").write_text('[tool.vllm-triage]\nignore = "kv_cache_insufficient"\n')
    assert (
        json.loads(run([str(FAILED), "--config", str(project / "elsewhere.toml"), "-f", "json"])[1])["diagnoses"] == []
    )
    assert run([str(FAILED), "--config", str(project / "missing.toml")])[0] == 2
    (project / ".vllm-triage.toml").write_text("nonsense = 1\n")
    monkeypatch.setenv("VLLM_TRIAGE_NO_CONFIG", "1")
    assert run([str(FAILED), "-q"])[0] == 1


# ---- --ignore and --min-confidence ------------------------------------------------------------


def test_ignore_and_min_confidence_flags(project):
    code, out, _ = run([str(FAILED), "-f", "json", "--ignore", "foreign_gpu_processes,kv_cache_insufficient"])
    assert code == 1 and json.loads(out)["diagnoses"] == []
    code, out, _ = run([str(FAILED), "-f", "json", "--min-confidence", "0.96"])
    assert "below --min-confidence 0.96" in " ".join(json.loads(out)["notes"])
    assert run([str(FAILED), "-f", "json", "--min-confidence", "0.95"])[1].count('"kv_cache_insufficient"') >= 1
    code, _, err = run([str(FAILED), "--ignore", "kv_cahce_insufficient"])
    assert code == 2 and "did you mean kv_cache_insufficient?" in err
    assert run([str(FAILED), "--min-confidence", "high"])[0] == 2


def test_a_recovered_log_whose_finding_is_ignored_exits_0(project):
    code, out, _ = run([str(RECOVERED), "-q", "--ignore", "kv_cache_insufficient"])
    assert code == 0 and out.strip().endswith(": recovered")


# ---- shell completion -------------------------------------------------------------------------


def test_completion_scripts_name_the_commands_flags_formats_and_causes():
    for shell in ("bash", "zsh", "fish"):
        code, out, _ = run(["completion", shell])
        assert code == 0
        for word in ("explain", "min-confidence", "gitlab", "kv_cache_insufficient"):
            assert word in out, (shell, word)
    bash = shutil.which("bash")
    if bash:
        script = run(["completion", "bash"])[1]
        checked = subprocess.run([bash, "-n"], input=script, text=True, capture_output=True)
        assert checked.returncode == 0, checked.stderr
        probe = script + 'COMP_WORDS=(vllm-triage --ign); COMP_CWORD=1; _vllm_triage; echo "${COMPREPLY[@]}"\n'
        assert subprocess.run([bash, "-c", probe], text=True, capture_output=True).stdout.split() == ["--ignore"]
    assert run(["completion", "powershell"])[0] == 2


# ---- GitLab Code Quality ----------------------------------------------------------------------


def test_gitlab_code_quality_report(tmp_path):
    target = tmp_path / "gl-code-quality-report.json"
    code, _, _ = run([str(FAILED), str(HEALTHY), "-f", "gitlab", "-o", str(target)])
    issues = json.loads(target.read_text())
    assert code == 1 and len(issues) == 1
    (issue,) = issues
    assert {"description", "check_name", "fingerprint", "severity", "location"} <= set(issue)
    assert issue["check_name"] == "kv_cache_insufficient" and issue["severity"] == "critical"
    assert issue["location"] == {"path": str(FAILED), "lines": {"begin": issue["location"]["lines"]["begin"]}}
    assert issue["location"]["lines"]["begin"] >= 1 and re.fullmatch(r"[0-9a-f]{64}", issue["fingerprint"])
    again = json.loads(run([str(FAILED), "-f", "gitlab"])[1])
    assert again[0]["fingerprint"] == issue["fingerprint"]  # stable across runs
    assert json.loads(run([str(HEALTHY), "-f", "gitlab"])[1]) == []


# ---- the report's time and tool -------------------------------------------------------------------


def test_json_report_carries_the_tool_version_and_time(monkeypatch):
    from triage import __version__

    tool = json.loads(run([str(FAILED), "-f", "json"])[1])["tool"]
    assert tool == {"name": "vllm-triage", "version": __version__, "generated_at": "2026-01-01T00:00:00Z"}
    monkeypatch.delenv("SOURCE_DATE_EPOCH")
    stamped = json.loads(run([str(FAILED), "-f", "json"])[1])["tool"]["generated_at"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", stamped) and stamped != "2026-01-01T00:00:00Z"


def test_a_report_built_in_memory_has_no_time():
    from conftest import triage_file

    from triage.render import render

    assert "generated_at" not in json.loads(render(triage_file(FAILED), "json"))["tool"]


# ---- -o and -f --------------------------------------------------------------------------------


def test_output_file_alone_takes_its_format_from_the_extension(tmp_path):
    assert run([str(FAILED), "-o", str(tmp_path / "r.json")])[0] == 1
    assert json.loads((tmp_path / "r.json").read_text())["outcome"] == "failed"
    run([str(FAILED), "-o", str(tmp_path / "r.xml")])
    assert (tmp_path / "r.xml").read_text().startswith("<?xml")
    run([str(FAILED), "-o", str(tmp_path / "r.txt")])
    assert (tmp_path / "r.txt").read_text().startswith("## vllm-triage")  # no format named: the default


def test_output_dash_then_format_is_that_report():
    code, out, err = run([str(FAILED), "-o", "-", "-f", "json"])
    assert code == 1 and json.loads(out)["outcome"] == "failed" and not err


# ---- the one-line fix -------------------------------------------------------------------------


def test_quiet_says_recovered_for_a_recovered_log():
    code, out, _ = run([str(RECOVERED), "-q"])
    assert code == 0 and ": recovered (an earlier attempt failed at line" in out and ": failed" not in out


def test_the_one_line_fix_never_offers_a_placeholder():
    code, out, _ = run([str(RTX5090), "-q"])
    assert code == 1 and "cuda_driver_mismatch" in out and "try:" not in out and "<" not in out
    code, out, _ = run([str(RTX5090), "-f", "github"])
    assert "Fix: TORCH_CUDA_ARCH_LIST" not in out


def _remedy(flags=None, env=None, verdict=None):
    from triage.model.report import Remedy, RemedyCheck

    check = RemedyCheck(against="kv_fits_max_model_len", verdict=verdict) if verdict else None
    return Remedy(text="t", flags=flags or {}, env=env or {}, check=check)


def test_best_remedy_is_the_first_checked_that_fits_or_none():
    from triage.model.report import Diagnosis
    from triage.render.common import best_remedy

    def best(*remedies):
        return best_remedy(Diagnosis(id="x", title="x", confidence=0.9, explanation="", remedies=list(remedies)))

    unsure = _remedy({"--gpu-memory-utilization": "0.049"}, verdict="cannot tell")
    fits = _remedy({"--max-model-len": "8192"}, verdict="fits")
    assert best(unsure, fits) is not None and best(unsure, fits).flags == {"--max-model-len": "8192"}
    assert best(unsure) is None
    assert best(unsure, _remedy({"--enforce-eager": ""})) is None  # flags the model could not check
    assert best(_remedy(env={"TORCH_CUDA_ARCH_LIST": "<this GPU's capability>"})) is None
    assert best(_remedy({"--port": "8001"})).flags == {"--port": "8001"}  # nothing was checkable


# ---- small ones -------------------------------------------------------------------------------


def test_a_mistyped_command_is_not_read_as_a_log(tmp_path, monkeypatch):
    code, out, err = run(["explian", "kv_cache_insufficient"])
    assert code == 2 and not out and "unknown command 'explian' (did you mean explain?)" in err
    monkeypatch.chdir(tmp_path)
    (tmp_path / "explian").write_bytes(HEALTHY.read_bytes())  # a log really named so is still a log
    assert run(["explian", "-q"])[0] == 0


def test_max_bytes_names_the_file(tmp_path):
    code, _, err = run([str(HEALTHY), str(FAILED), "--max-bytes", "1KiB", "-q"])
    assert code == 2 and err.count("\n") == 2
    assert f"{HEALTHY}: input is larger than the limit" in err and f"{FAILED}: input is larger" in err


def test_a_missing_log_is_an_error_annotation():
    code, out, err = run(["missing.log", str(FAILED), "-f", "github"])
    assert code == 2 and "no such file: missing.log" in err
    assert out.startswith("::error title=vllm-triage%3A a log could not be read::no such file: missing.log\n")
    assert "::error file=" in out  # the readable log is still annotated


def test_rules_test_counts_a_rule_no_log_exercises_as_a_problem(tmp_path, monkeypatch):
    from conftest import ROOT

    pack = tmp_path / "mine.yaml"
    pack.write_text(
        "schema: 1\nrules:\n  - id: my-kv-rule\n    cause: kv_cache_insufficient\n    title: t\n"
        "    when: {event: kv_needed}\n"
    )
    monkeypatch.chdir(ROOT)  # a checkout: the built-in rules' logs are there
    code, out, _ = run(["rules", "test", str(pack)])
    assert code == 1 and "UNTESTED my-kv-rule" in out and "1 problem(s)" in out
