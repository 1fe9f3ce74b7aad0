"""The GitHub composite Action and the GitLab template, run as their runners would (no network).

action.yml's `run:` steps are executed with bash in a temporary workspace, with the GITHUB_*
files a runner provides; `${{ }}` expressions are filled from the inputs as GitHub would. The
install step runs against a stand-in `python` that records what pip was asked to install and
puts the tool of this checkout on PATH. The GitLab job's script runs the same way.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml
from conftest import FIXTURES, ROOT

FAILED = FIXTURES / "kv_cache_insufficient" / "v1-0.9.2-tp2-qwen14b-4090-estimated-max-len.log"
HEALTHY = FIXTURES / "healthy" / "v1-0.8.5-llama8b-h100-ctrl-c-shutdown-traceback.log"
TOOL = Path(sys.executable).with_name("vllm-triage")
EXPRESSION = re.compile(r"\$\{\{\s*([\w.-]+)\s*\}\}")
FAKE_PYTHON = """#!/usr/bin/env bash
# Stands in for python: `-m venv DIR` makes DIR/bin/python (this script); `-m pip install ... SRC`
# records its arguments and puts the checkout's own vllm-triage on PATH.
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then mkdir -p "$3/bin" && cp "$0" "$3/bin/python" && exit 0; fi
if [ "$1" = "-m" ] && [ "$2" = "pip" ] && [ "$3" = "install" ]; then
  here="$(dirname "$0")"
  printf '%s\\n' "$@" > "$here/pip-args"
  src="${@: -1}"
  [ -f "$src/pyproject.toml" ] && [ -f "$src/action.yml" ] || { echo "not a checkout: $src" >&2; exit 1; }
  printf '#!/usr/bin/env bash\\nexec TOOL "$@"\\n' > "$here/vllm-triage" && chmod +x "$here/vllm-triage"
  exit 0
fi
echo "unexpected: $*" >&2; exit 3
"""


def action() -> dict:
    return yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))


def fill(value: str, inputs: dict[str, str]) -> str:
    def one(m: re.Match) -> str:
        name = m.group(1)
        if name == "github.action_path":
            return str(ROOT)
        assert name.startswith("inputs."), f"unexpected expression {name}"
        return inputs[name[len("inputs.") :]]

    return EXPRESSION.sub(one, str(value))


def run_action(workspace: Path, **given: str) -> list[subprocess.CompletedProcess]:
    """Every step in order, as a runner: GITHUB_PATH read between steps, bash -eo pipefail."""
    spec = action()
    inputs = {k: str(v.get("default", "")) for k, v in spec["inputs"].items()} | given
    temp = workspace / "_runner_temp"
    fake = workspace / "_bin"
    temp.mkdir()
    fake.mkdir()
    (fake / "python3").write_text(FAKE_PYTHON.replace("TOOL", str(TOOL)))
    (fake / "python3").chmod(0o755)
    files = {
        name: workspace / f"_{name.lower()}"
        for name in ("GITHUB_PATH", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY", "GITHUB_ENV")
    }
    for f in files.values():
        f.touch()
    base = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "VLLM_TRIAGE_"))}
    base |= {k: str(v) for k, v in files.items()} | {
        "RUNNER_TEMP": str(temp),
        "GITHUB_ACTIONS": "true",
        "GITHUB_WORKSPACE": str(workspace),
    }
    path = [str(fake), "/usr/bin", "/bin"]
    results = []
    for step in spec["runs"]["steps"]:
        assert "${{" not in step["run"], "expressions belong in env:, never in a script"
        env = base | {k: fill(v, inputs) for k, v in step.get("env", {}).items()}
        env["PATH"] = os.pathsep.join(path)
        result = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
            cwd=workspace,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        results.append(result)
        path = [p for p in files["GITHUB_PATH"].read_text().splitlines() if p][::-1] + path
        if result.returncode != 0:
            break
    return results


def outputs(workspace: Path) -> dict[str, str]:
    lines = (workspace / "_github_output").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


@pytest.fixture
def workspace(tmp_path):
    (tmp_path / "logs" / "node1").mkdir(parents=True)
    (tmp_path / "logs" / "node2").mkdir(parents=True)
    shutil.copy(FAILED, tmp_path / "logs" / "node1" / "vllm.log")
    shutil.copy(FAILED, tmp_path / "logs" / "node2" / "vllm.log")
    shutil.copy(HEALTHY, tmp_path / "healthy.log")
    return tmp_path


def test_the_action_installs_its_checkout_and_reports(workspace):
    install, triage = run_action(workspace, log="logs/*/vllm.log healthy.log", formats="junit, markdown")
    assert install.returncode == 0, install.stderr
    pip_args = (workspace / "_runner_temp" / "vllm-triage-venv" / "bin" / "pip-args").read_text().splitlines()
    assert pip_args[-1] == str(ROOT)
    assert triage.returncode == 1, triage.stderr  # fail-on-failure defaults to true
    annotations = [line for line in triage.stdout.splitlines() if line.startswith("::")]
    assert 1 <= len(annotations) <= 10
    assert "::error file=logs/node1/vllm.log,line=58" in triage.stdout
    assert "::error file=logs/node2/vllm.log,line=58" in triage.stdout
    summary = (workspace / "_github_step_summary").read_text()
    assert summary.count("## vllm-triage: failed") == 2 and "## vllm-triage: healthy" in summary
    junit = ET.parse(workspace / "vllm-triage.xml").getroot()
    assert junit.get("tests") == "3" and junit.get("failures") == "2"
    assert (workspace / "vllm-triage.md").read_text().startswith("## vllm-triage")
    assert outputs(workspace) == {"exit-code": "1", "junit": "./vllm-triage.xml"}


def test_fail_on_failure_false_only_reports(workspace):
    _, triage = run_action(workspace, log="logs/node1/vllm.log", **{"fail-on-failure": "false"}, formats="")
    assert triage.returncode == 0 and "::error " in triage.stdout
    assert outputs(workspace)["exit-code"] == "1" and not (workspace / "vllm-triage.xml").exists()


def test_an_unreadable_log_fails_the_step_either_way(workspace):
    _, triage = run_action(workspace, log="healthy.log missing.log", **{"fail-on-failure": "false"})
    assert triage.returncode == 2 and "missing.log" in triage.stderr and "::notice" in triage.stdout


def test_inputs_cannot_inject_shell(workspace):
    _, triage = run_action(workspace, log="healthy.log $(touch pwned) `touch pwned2`", formats="junit;touch pwned3")
    assert triage.returncode == 2
    assert not any((workspace / name).exists() for name in ("pwned", "pwned2", "pwned3"))


def test_no_log_matches(workspace):
    _, triage = run_action(workspace, log="nothing/*.log")
    assert triage.returncode == 2 and "::error title=vllm-triage::no log file matches" in triage.stdout


def _table(markdown: str, heading: str) -> dict[str, str]:
    """The first column (a `code` name) -> second column of the first table after `heading`."""
    section = markdown.split(heading, 1)[1]
    rows = re.findall(r"^\| `([\w-]+)` \| ([^|]*) \|", section.split("\n## ", 1)[0], flags=re.M)
    return {name: default.strip() for name, default in rows}


def test_the_action_readme_documents_every_input_and_output():
    doc = (ROOT / "ci" / "README.md").read_text(encoding="utf-8")
    spec = action()
    github = doc.split("## GitHub Action", 1)[1].split("## GitLab CI", 1)[0]
    documented = _table(github.split("| output |", 1)[0], "| input |")
    assert set(documented) == set(spec["inputs"])
    for name, meta in spec["inputs"].items():
        default = str(meta.get("default", "")) or "(empty)"
        assert documented[name].strip("`") == default or meta.get("required"), name
    assert set(re.findall(r"^\| `([\w-]+)` \|", github.split("| output |", 1)[1], flags=re.M)) == set(spec["outputs"])


def gitlab_job() -> dict:
    return yaml.safe_load((ROOT / "ci" / "gitlab" / "vllm-triage.gitlab-ci.yml").read_text())[".vllm-triage"]


@pytest.mark.parametrize("fail,expect", [("false", 0), ("true", 1)])
def test_the_gitlab_template_runs(workspace, fail, expect):
    job = gitlab_job()
    assert job["before_script"] == ['python3 -m pip install --quiet "$VLLM_TRIAGE_PACKAGE"']
    assert job["artifacts"]["reports"]["junit"] == "vllm-triage.xml"
    env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_TRIAGE_")}
    env |= {k: str(v) for k, v in job["variables"].items()}
    env |= {
        "VLLM_TRIAGE_LOG": "logs/*/vllm.log",
        "VLLM_TRIAGE_FAIL_ON_FAILURE": fail,
        "PATH": os.pathsep.join([str(TOOL.parent), "/usr/bin", "/bin"]),
    }
    result = subprocess.run(
        ["bash", "-e", "-c", "\n".join(job["script"])],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == expect, result.stderr
    assert "kv_cache_insufficient (confidence 0.95)" in result.stdout
    assert ET.parse(workspace / "vllm-triage.xml").getroot().get("failures") == "2"
    assert (workspace / "vllm-triage.md").exists()
    assert job["artifacts"]["reports"]["codequality"] == "gl-code-quality-report.json"
    issues = json.loads((workspace / "gl-code-quality-report.json").read_text())
    assert [i["location"]["path"] for i in issues] == ["logs/node1/vllm.log", "logs/node2/vllm.log"]


def _archive(tmp_path: Path, ref: str) -> str:
    """The checkout as GitLab's `/-/archive/REF/vllm-triage-REF.tar.gz` serves it; returns the repo's URL."""
    import tarfile

    repo = tmp_path / "host" / "group" / "vllm-triage"
    folder = repo / "-" / "archive" / ref
    folder.mkdir(parents=True)
    with tarfile.open(folder / f"vllm-triage-{ref}.tar.gz", "w:gz") as tar:
        for name in ("pyproject.toml", "README.md", "triage", "rules"):
            tar.add(
                ROOT / name,
                arcname=f"vllm-triage-{ref}/{name}",
                filter=lambda info: None if "__pycache__" in info.name else info,
            )
    return repo.as_uri()


def test_the_gitlab_template_installs_without_git(tmp_path, workspace):
    """python:3.12-slim has no git: the template's package must install with none on PATH."""
    job = gitlab_job()
    package = job["variables"]["VLLM_TRIAGE_PACKAGE"]
    assert "<your git host>" in package
    url = _archive(tmp_path, "main")
    package = package.replace("https://<your git host>/<group>/vllm-triage", url)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    tools = tmp_path / "tools"  # a shell, and nothing else: no git
    tools.mkdir()
    os.symlink(shutil.which("bash"), tools / "bash")
    path = os.pathsep.join([str(venv / "bin"), str(tools)])
    assert shutil.which("git", path=path) is None
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_TRIAGE_", "PYTHON", "VIRTUAL_ENV"))}
    env |= {"PATH": path, "VLLM_TRIAGE_PACKAGE": package}
    install = subprocess.run(
        ["bash", "-e", "-c", "\n".join(job["before_script"])],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert install.returncode == 0, install.stderr[-2000:]
    env |= {"VLLM_TRIAGE_LOG": "logs/*/vllm.log", "VLLM_TRIAGE_FAIL_ON_FAILURE": "true"}
    result = subprocess.run(
        ["bash", "-e", "-c", "\n".join(job["script"])],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 1, result.stderr
    assert "kv_cache_insufficient" in result.stdout


def test_no_index_is_never_advised_without_find_links():
    """`pip install --no-index` alone finds neither the dependencies nor setuptools: offline needs wheels."""
    for path in (ROOT / "action.yml", ROOT / "ci" / "README.md", ROOT / "README.md"):
        for line in path.read_text(encoding="utf-8").splitlines():
            if "--no-index" in line:
                assert "--find-links" in line, (path.name, line)
