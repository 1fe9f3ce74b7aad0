"""A pyproject.toml is parsed only when a line of it can open `[tool.vllm-triage]`: the
prefilter passes over files that merely name the tool, and reads every way TOML can write the table."""

from __future__ import annotations

import subprocess
import sys

import pytest

from triage.apps import config

HOLDS_THE_TABLE = [
    '[project]\nname = "x"\n\n[tool.vllm-triage]\nformat = "json"\n',
    '[ tool . "vllm-triage" ]\nformat = "json"\n',
    "[tool.'vllm-triage']\nformat = \"json\"\n",
    '[tool]\nvllm-triage = { format = "json" }\n',
    '[tool]\nvllm-triage.format = "json"\n',
    'tool.vllm-triage.format = "json"\n[project]\nname = "x"\n',
    'tool = { vllm-triage = { format = "json" } }\n',
    '"tool".vllm-triage.format = "json"\n',
]


@pytest.mark.parametrize("text", HOLDS_THE_TABLE)
def test_every_way_of_writing_the_table_is_read(tmp_path, text):
    path = tmp_path / "pyproject.toml"
    path.write_text(text)
    assert config._table(str(path)) == {"format": "json"}


NAMES_THE_TOOL = (
    '[project]\nname = "vllm-triage"\ndependencies = [\n  "vllm-triage>=0.1",\n]\n\n'
    '[project.scripts]\nvllm-triage = "triage.apps.cli:entry"\n\n'
    '[tool.ruff]\n# vllm-triage excluded\nextend-exclude = ["vllm-triage"]\n'
)


def test_a_pyproject_that_only_names_the_tool_is_passed_over_unparsed(tmp_path):
    path = tmp_path / "pyproject.toml"
    path.write_text(NAMES_THE_TOOL)
    code = f"import sys\nfrom triage.apps import config\nprint(config._table({str(path)!r}), 'tomllib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["None", "False"]


def test_the_same_file_with_the_table_added_is_read(tmp_path):
    path = tmp_path / "pyproject.toml"
    path.write_text(NAMES_THE_TOOL + "\n[tool.vllm-triage]\nmin-confidence = 0.5\n")
    assert config._table(str(path)) == {"min-confidence": 0.5}
