"""The README's security table names, for each hostile input, the tests behind it: keep them real."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
REFERENCE = re.compile(r"`(?:(?P<file>test_\w+\.py))?(?:::(?P<test>\w+))?`")


def security_rows() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Security", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| input")]


def functions_in(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}


def test_every_row_of_the_security_table_names_tests_that_exist():
    rows = security_rows()
    assert len(rows) >= 15
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        references = list(REFERENCE.finditer(cells[-1]))
        assert references, f"no test named for: {cells[0]}"
        current: Path | None = None
        for ref in references:
            if ref["file"]:
                current = next(TESTS.rglob(ref["file"]), None)  # tests/ mirrors triage/: found by name
                assert current is not None and current.is_file(), ref["file"]
            assert current is not None, f"a test without its file in: {cells[0]}"
            if ref["test"]:
                assert ref["test"] in functions_in(current), f"{current.name}::{ref['test']} does not exist"
