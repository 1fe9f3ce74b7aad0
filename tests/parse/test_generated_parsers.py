"""The committed standalone parsers are lark's generator's output for the grammars and the lark as they are now.

scripts/gen_parsers.py runs `python -m lark.tools.standalone` per grammar and splits its output:
lark's runtime (the same for both grammars) into triage/parse/lark_runtime.py, edited only by the
script's TRIMS, and each grammar's tables into its own module. The runtime is compared exactly;
the tables as the grammar they hold: the terminals and rules (compared as sets) and the LALR
tables. Equal rules and the same generator give the same language; the tables' state numbers
alone may differ from one generation to the next (lark walks sets of objects), so they are not
compared byte for byte. Editing a grammar or upgrading lark without running the script fails here.
"""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
gen_parsers = importlib.import_module("gen_parsers")


@cache
def _fresh() -> dict[str, str]:
    return gen_parsers.generate_all()


def _committed(module: str) -> str:
    return (ROOT / module).read_text(encoding="utf-8")


def test_the_committed_runtime_is_the_generators_output():
    assert _committed(gen_parsers.RUNTIME) == _fresh()[gen_parsers.RUNTIME], "run python scripts/gen_parsers.py"


@pytest.mark.parametrize("module_path", sorted(gen_parsers.PARSERS))
def test_the_committed_parser_is_the_generators_output(module_path):
    grammar, _ = gen_parsers.PARSERS[module_path]
    fresh, committed = _fresh()[module_path], _committed(module_path)
    assert gen_parsers._code(committed) == gen_parsers._code(fresh), f"{module_path}: run python scripts/gen_parsers.py"
    assert gen_parsers.described(committed) == gen_parsers.described(fresh), (
        f"{module_path} does not hold {grammar} as it is now: run python scripts/gen_parsers.py"
    )
    # the tables only: lark's runtime and the memo maker are imported, never written again
    assert "from triage.parse.lark_memo import load" in committed and "class Lark(" not in committed
    assert "def made(" not in committed


@cache
def _memos(module_path: str) -> tuple[dict, dict]:
    """(lark's MEMO literal, the generator's compact one) from one run of lark's generator."""
    grammar, starts = gen_parsers.PARSERS[module_path]
    tables = gen_parsers.split(gen_parsers.standalone(grammar, starts))[1]
    memo = re.compile(r"\nMEMO = \(\n(.*)\n\)\n\Z", re.DOTALL)
    return ast.literal_eval(memo.search(tables)[1]), ast.literal_eval(memo.search(gen_parsers.compact_memo(tables))[1])


def _state(obj):
    """A memo object as plain data: its class and every attribute it holds, nested objects too."""
    if isinstance(obj, list | tuple):
        return type(obj)(_state(v) for v in obj)
    if isinstance(obj, dict):
        return {k: _state(v) for k, v in obj.items()}
    if hasattr(type(obj), "__serialize_fields__"):
        slots = {s for c in type(obj).__mro__ for s in getattr(c, "__slots__", ())}
        attrs = {s: getattr(obj, s) for s in slots if hasattr(obj, s)} | dict(getattr(obj, "__dict__", {}))
        return type(obj).__name__, {k: _state(v) for k, v in sorted(attrs.items())}
    return obj


@pytest.mark.parametrize("module_path", sorted(gen_parsers.PARSERS))
def test_the_compact_memo_makes_the_objects_larks_loader_makes(module_path):
    """`lark_memo.made` on the generator's tuples gives, attribute for attribute, what lark's own
    `Serialize.deserialize` gives on the dicts lark wrote (the same generator run)."""
    from triage.parse.lark_runtime import Rule, SerializeMemoizer, TerminalDef

    larks, compact = _memos(module_path)
    theirs = SerializeMemoizer.deserialize(larks, {"Rule": Rule, "TerminalDef": TerminalDef}, {})
    from triage.parse.lark_memo import made

    ours = {k: made(v) for k, v in compact.items()}
    assert len(ours) == len(theirs) > 10
    assert _state(ours) == _state(theirs)
    assert {type(v).__name__ for v in ours.values()} == {"Rule", "TerminalDef"}


def test_the_generator_and_the_memo_maker_name_the_same_classes():
    from triage.parse.lark_memo import MEMO_CLASSES

    assert tuple(c.__name__ for c in MEMO_CLASSES) == gen_parsers.MEMO_CLASSES


def test_the_trims_are_the_only_edits_of_larks_runtime():
    """Undoing TRIMS gives back, to the byte, the runtime lark's generator writes for each grammar."""
    body = _committed(gen_parsers.RUNTIME).removeprefix(gen_parsers.RUNTIME_HEADER)
    for grammar, starts in gen_parsers.PARSERS.values():
        assert gen_parsers.untrim(body) == gen_parsers.split(gen_parsers.standalone(grammar, starts))[0]


def test_a_trim_that_no_longer_matches_stops_the_generator():
    lark_text = gen_parsers.untrim(_committed(gen_parsers.RUNTIME).removeprefix(gen_parsers.RUNTIME_HEADER))
    with pytest.raises(RuntimeError, match="copies of a trimmed text"):
        gen_parsers.trim(lark_text.replace(gen_parsers.TRIMS[0].old, "import sys, re\nimport logging as _l\n"))


def test_the_trimmed_runtime_logs_as_lark_does():
    """lark's logger is made on first use, set up as lark sets it up; importing the runtime loads no logging."""
    code = (
        "import sys\nfrom triage.parse import lark_runtime\nassert 'logging' not in sys.modules\n"
        "lark_runtime.logger.debug('x')\nimport logging\n"
        "assert lark_runtime.logger is logging.getLogger('lark') and lark_runtime.logger.level == logging.CRITICAL\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_check_says_the_committed_modules_are_current():
    assert gen_parsers.main(["--check"]) == 0


def test_a_changed_grammar_is_noticed(tmp_path):
    """The comparison is not vacuous: one terminal changed gives another grammar."""
    grammar, starts = gen_parsers.PARSERS["triage/rule_engine/expr_parser.py"]
    text = (ROOT / grammar).read_text(encoding="utf-8").replace('"GiB" | "MiB"', '"GiB" | "MB"')
    changed = tmp_path / "expr.lark"
    changed.write_text(text, encoding="utf-8")
    committed = _committed("triage/rule_engine/expr_parser.py")
    assert gen_parsers.described(gen_parsers.generate(str(changed), starts)) != gen_parsers.described(committed)


def test_a_parse_makes_only_the_callbacks_of_the_rules_it_reduces_by():
    """The lazy callbacks stay lazy through a parse (lark's `if callbacks:` asks no length), and
    reading them whole gives one per rule, as lark's eager loop does."""
    from triage.parse.log_parser import Lark_StandAlone

    lark = Lark_StandAlone()
    callbacks = lark._callbacks
    assert str(lark.parse("Killed", start="killed")) == "Tree('killed', [Token('KILLED_LINE', 'Killed')])"
    assert 0 < dict.__len__(callbacks) < len(lark.rules)
    assert bool(callbacks) and len(callbacks) == len(lark.rules) and set(callbacks) == set(lark.rules)
