"""What rule authors read is made from the code and current: the pack schema, the functions, the filters."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from triage.rule_engine.functions import FUNCTION_DOCS, FUNCTIONS
from triage.rule_engine.pack_schema import pack_json_schema
from triage.rule_engine.template import FILTER_DOCS, FILTERS

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
gen_docs = importlib.import_module("gen_docs")
PACKS = sorted(p for p in (ROOT / "rules").glob("*.yaml") if p.name != "taxonomy.yaml")


def test_every_function_and_filter_is_documented():
    assert list(FUNCTION_DOCS) == list(FUNCTIONS)
    assert list(FILTER_DOCS) == list(FILTERS)


def test_the_published_files_are_what_the_code_makes():
    """docs/rule-pack-v1.schema.json and docs/rule-expressions.md's reference (python scripts/gen_docs.py)."""
    assert json.loads((ROOT / "docs" / "rule-pack-v1.schema.json").read_text()) == pack_json_schema()
    guide = (ROOT / "docs" / "rule-expressions.md").read_text(encoding="utf-8")
    assert guide == gen_docs.guide_text(guide), "run python scripts/gen_docs.py"
    for name in [*FUNCTIONS, *FILTERS]:
        assert f"| `{name}` |" in guide


def test_every_name_an_expression_reads_and_every_unit_is_documented():
    """The names of the context (load.py's tables) and the units: a new one fails here until
    docs/rule-expressions.md says what it is."""
    from triage.rule_engine.expr import UNITS
    from triage.rule_engine.load import CONTEXT_NAMES, FALLBACK_NAMES

    guide = (ROOT / "docs" / "rule-expressions.md").read_text(encoding="utf-8")
    names = guide.split("### Names an expression reads", 1)[1].split("###", 1)[0]
    assert [n for n in sorted(CONTEXT_NAMES | FALLBACK_NAMES) if f"`{n}`" not in names] == []
    assert [u for u in UNITS if f"`{u}`" not in guide] == []
    assert "### Pack figures" in guide


@pytest.mark.parametrize("pack", PACKS, ids=[p.stem for p in PACKS])
def test_every_built_in_pack_is_valid_under_the_published_schema(pack):
    jsonschema.validate(yaml.safe_load(pack.read_text(encoding="utf-8")), pack_json_schema())


def test_the_schema_refuses_what_the_loader_refuses():
    schema = pack_json_schema()
    good = yaml.safe_load(PACKS[0].read_text(encoding="utf-8"))
    for bad in (
        {**good, "schema": 2},
        {**good, "extra": 1},
        {**good, "rules": [{**good["rules"][0], "colour": "red"}]},
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)
