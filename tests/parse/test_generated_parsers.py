"""The committed standalone parsers are lark's generator's output for the grammars as they are now.

scripts/gen_parsers.py writes them with `python -m lark.tools.standalone`. Its text is lark's
runtime (compared exactly) and the grammar as data: the terminals and rules (compared as sets)
and the LALR tables. Equal rules and the same generator give the same language; the tables'
state numbers alone may differ from one generation to the next (lark walks sets of objects),
so they are not compared byte for byte. Editing a grammar without running the script fails here.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
gen_parsers = importlib.import_module("gen_parsers")


def _grammar(text: str) -> tuple:
    """The grammar a module's data holds (gen_parsers.described without the runtime text)."""
    return gen_parsers.described(text)[1:]


@pytest.mark.parametrize("module_path", sorted(gen_parsers.PARSERS))
def test_the_committed_parser_is_the_generators_output(module_path):
    grammar, starts = gen_parsers.PARSERS[module_path]
    fresh = gen_parsers.generate(grammar, starts)
    committed = (ROOT / module_path).read_text(encoding="utf-8")
    runtime = committed.split("\nDATA = (", 1)[0]
    assert runtime == fresh.split("\nDATA = (", 1)[0], f"{module_path}: run python scripts/gen_parsers.py"
    assert _grammar(committed) == _grammar(fresh), (
        f"{module_path} does not hold {grammar} as it is now: run python scripts/gen_parsers.py"
    )


def test_a_changed_grammar_is_noticed(tmp_path):
    """The comparison is not vacuous: one terminal changed gives another grammar."""
    grammar, starts = gen_parsers.PARSERS["triage/rule_engine/expr_parser.py"]
    text = (ROOT / grammar).read_text(encoding="utf-8").replace('"GiB" | "MiB"', '"GiB" | "MB"')
    changed = tmp_path / "expr.lark"
    changed.write_text(text, encoding="utf-8")
    committed = (ROOT / "triage/rule_engine/expr_parser.py").read_text(encoding="utf-8")
    assert _grammar(gen_parsers.generate(str(changed), starts)) != _grammar(committed)
