"""The README says what the tool does: its sample is today's output, its examples run as written.

Every ```bash block whose commands are all vllm-triage (no GPU, no server, no network) runs
in a temporary folder holding `startup.log` (the sample's log); the options the README
lists exist in `--help`, every command of `--help` is in the README, and no install line
asks PyPI for a package that is not there.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from triage.apps.cli import SUBCOMMANDS, main

README = (ROOT / "README.md").read_text(encoding="utf-8")
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", flags=re.M | re.S)
SAMPLE = re.compile(r"<!-- readme-sample: (\S+) -->\n```\n(.*?)^```", flags=re.M | re.S)
RUNNABLE = re.compile(r"^(?:[A-Z_]+=\S+ )*vllm-triage\b")
TOOL_BIN = Path(sys.executable).parent


def bash_commands() -> list[str]:
    """The runnable lines of the README's bash blocks (continuation lines joined)."""
    out = []
    for lang, body in BLOCK.findall(README):
        if lang not in ("bash", "sh"):
            continue
        lines = [line for line in body.replace("\\\n", " ").splitlines() if line.strip()]
        if (
            lines
            and all(RUNNABLE.match(line) for line in lines)
            and not any(re.search(r"\b(?:run|serve|--follow|curl)\b", line) for line in lines)
        ):  # a GPU, a server, the network
            out += lines
    return out


def help_text(*argv: str) -> str:
    out = io.StringIO()
    assert main([*argv, "--help"], stdout=out, stderr=io.StringIO()) == 0
    return out.getvalue()


def test_the_top_sample_is_what_the_tool_prints(tmp_path):
    rel, shown = SAMPLE.search(README).groups()
    shutil.copy(ROOT / rel, tmp_path / "startup.log")
    out = io.StringIO()
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        main(["startup.log", "-f", "terminal", "--width", "100"], stdout=out, stderr=io.StringIO())
    finally:
        os.chdir(cwd)
    assert out.getvalue() == shown
    command = README.split("```\n$ vllm serve", 1)[1].split("```", 1)[0]
    assert "14B" in command and "--tensor-parallel-size 2" in command  # the log's own model and TP


@pytest.mark.parametrize("command", bash_commands())
def test_readme_example_runs(command, tmp_path):
    rel = SAMPLE.search(README).group(1)
    shutil.copy(ROOT / rel, tmp_path / "startup.log")
    for folder in ("other-node", "logs"):
        (tmp_path / folder).mkdir()
        shutil.copy(ROOT / rel, tmp_path / folder / "startup.log")
    shutil.copy(ROOT / rel, tmp_path / "vllm.log")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_TRIAGE_", "GITHUB_"))}
    env["PATH"] = os.pathsep.join([str(TOOL_BIN), env.get("PATH", "")])
    result = subprocess.run(
        ["bash", "-o", "pipefail", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    # 1 is "a failure was found": the sample log is a failed start
    assert result.returncode in (0, 1), result.stderr
    assert "usage:" not in result.stderr and "error" not in result.stderr.lower()


def test_the_readme_has_runnable_examples():
    assert len(bash_commands()) >= 5


def test_every_option_in_the_usage_block_is_in_help():
    usage = README.split("## Using it", 1)[1].split("```", 2)[1]
    main_help = help_text()
    for flag in set(re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", usage)):
        if flag in ("--", "-o", "-f", "-q", "--log", "--follow") or flag in main_help:
            continue
        pytest.fail(f"README lists {flag}, `vllm-triage --help` does not")
    for name in SUBCOMMANDS:
        assert f"vllm-triage {name}" in usage, f"`{name}` is in --help, not in the README"
    for flag in ("--exit-zero", "--quiet", "--max-bytes"):
        assert flag in main_help and flag in usage


def test_the_exit_status_agrees():
    main_help = help_text()
    action_doc = (ROOT / "ci" / "README.md").read_text(encoding="utf-8")
    for text in (main_help, README, action_doc):
        assert "--exit-zero" in text and "could not be read" in text


def test_no_install_line_asks_pypi_for_vllm_triage():
    docs = README + (ROOT / "ci" / "README.md").read_text(encoding="utf-8")
    for line in docs.splitlines():
        for m in re.finditer(r"pip install (['\"]?)(vllm-triage[^\s'\"]*)\1?(\s+@\s*git\+)?", line):
            assert m.group(3) or "finds nothing" in line, line


def test_the_servers_install_hint_works_without_pypi():
    from triage.apps.serve.serve_cli import EXTRA_MISSING

    assert "'.[server]'" in EXTRA_MISSING and "git+" in EXTRA_MISSING
