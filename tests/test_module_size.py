"""Small modules, short functions: no module of triage/ over 450 filled lines, no function over 80 lines.

Read with `ast`, so a nested function counts on its own and a decorator line does not."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "triage"
MAX_MODULE_LINES = 450
MAX_FUNCTION_LINES = 80


# lark's standalone generator writes these (scripts/gen_parsers.py): its runtime and tables, not ours
GENERATED = {
    PACKAGE / "parse" / "lark_runtime.py",
    PACKAGE / "parse" / "log_parser.py",
    PACKAGE / "rule_engine" / "expr_parser.py",
}


def _sources() -> list[tuple[Path, str]]:
    return [(p, p.read_text(encoding="utf-8")) for p in sorted(PACKAGE.rglob("*.py")) if p not in GENERATED]


def _filled_lines(text: str) -> int:
    """Lines that hold something: blank lines are layout, and where the formatter breaks a long
    call is its choice (ruff has no module-size rule, so this test keeps it)."""
    return sum(1 for line in text.splitlines() if line.strip())


def test_no_module_over_450_lines():
    big = {str(p.relative_to(PACKAGE)): n for p, text in _sources() if (n := _filled_lines(text)) > MAX_MODULE_LINES}
    assert not big, f"split these along their seams: {big}"


def test_no_function_over_80_lines():
    long = {}
    for path, text in _sources():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}"] = length
    assert not long, f"shorten these: {long}"
