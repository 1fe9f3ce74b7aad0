"""What a kind of event means is declared on its class (issue 9): these declarations must
name real fields and phases, every family the grammar lists must be a start rule, and the
events must stay plain classes (issue 16: importing them loads no pydantic)."""

from __future__ import annotations

import importlib
import pickle
import re
import subprocess
import sys
from importlib.resources import files
from pathlib import Path

import msgspec
import pytest
from lark import Lark

from triage.model import events as ev
from triage.model.events.base import Event, Role, event_fields
from triage.model.phases import PHASES
from triage.parse import grammar
from triage.parse.parse import EVENT_TYPES
from triage.timeline.facts import Facts, absorb
from triage.timeline.signals import Signal

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
gen_parsers = importlib.import_module("gen_parsers")  # reads the start rules off the grammar's text

CLASSES = sorted(EVENT_TYPES.values(), key=lambda c: c.kind)
DECLARED = ("kind", "role", "ends_server", "death", "reached", "failed_in", "facts")


def _all_subclasses(cls: type) -> set[type]:
    out = set()
    for sub in cls.__subclasses__():
        out |= {sub} | _all_subclasses(sub)
    return out


def test_every_event_class_is_found_by_its_kind():
    # slots=True makes a new class; only the final (slotted) classes are the event types
    final = {c for c in _all_subclasses(Event) if "__slots__" in vars(c) and c.kind}
    assert final == set(EVENT_TYPES.values())
    assert len({c.kind for c in CLASSES}) == len(CLASSES)


@pytest.mark.parametrize("cls", CLASSES, ids=[c.kind for c in CLASSES])
def test_the_facts_an_event_gives_name_its_fields(cls):
    names = set(event_fields(cls))
    assert set(cls.facts.values()) <= names, f"{cls.__name__}.facts names no such field"
    assert all(re.fullmatch(r"[a-z][a-z0-9_]*", fact) for fact in cls.facts)


@pytest.mark.parametrize("cls", CLASSES, ids=[c.kind for c in CLASSES])
def test_declarations_are_class_attributes_with_known_values(cls):
    assert not set(DECLARED) & set(event_fields(cls)), "a field shadows what the class declares"
    assert isinstance(cls.role, Role)
    assert cls.reached in (None, *PHASES) and cls.failed_in in (None, *PHASES)


def test_the_facts_of_an_event_come_from_its_declaration():
    facts = Facts(None)
    absorb(facts, ev.MemoryBudget(line=4, total=80 << 30, utilization=0.9))
    absorb(facts, ev.RestartCount(line=5, count=3))
    absorb(facts, ev.RestartCount(line=6, count=2))
    assert facts.value("gpu_total_bytes") == 80 << 30 and facts["gpu_memory_utilization"].line == 4
    assert "budget_bytes" not in facts  # a field left None gives no fact
    assert facts.value("restart_count") == 3


def test_roles_decide_what_a_line_means():
    def signal(*events):
        return Signal(line=1, origin="", pid=None, level="ERROR", events=list(events))

    raised = ev.ExceptionRaised(type="RuntimeError", message="boom")
    assert signal(raised).root
    assert not signal(raised, ev.ProcessDied(wrapper="worker died")).root  # a wrapper reports it
    assert signal(ev.CacheBlocks(gpu_blocks=0)).root and signal(ev.CacheBlocks(gpu_blocks=0)).implied
    assert not signal(ev.HostMemoryProblem(problem="x", generic=True)).root
    assert signal(ev.TorchOom()).phase is None and signal(ev.KvNeeded(max_seq_len=8)).phase == "kv_cache_allocation"


def test_events_are_frozen_and_compare_by_content():
    a, b = ev.Frame(line=1, file="x.py", func="f"), ev.Frame(line=9, file="x.py", func="f")
    with pytest.raises(AttributeError):
        a.func = "g"  # type: ignore[misc]
    assert a != b and a.content() == b.content()
    assert msgspec.structs.replace(a, line=9) == b
    assert hash(msgspec.structs.replace(a, line=9)) == hash(b)
    assert pickle.loads(pickle.dumps(a)) == a  # Ray carries events between processes


def test_importing_the_events_loads_no_pydantic():
    code = "import sys, triage.model.events, triage.timeline.timeline; print('pydantic' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def _defined_rules(text: str) -> set[str]:
    return set(re.findall(r"^[?!]?([a-z_][a-z0-9_]*)\s*(?:\.\d+)?\s*:", text, re.MULTILINE))


def test_start_rules_are_the_grammar_families():
    text = files("triage.parse").joinpath("vllm_log.lark").read_text(encoding="utf-8")
    listed = set(grammar.START_RULES)
    assert len(listed) == len(grammar.START_RULES), "a family is listed twice"
    assert listed > grammar.AT_START_ONLY
    assert listed <= _defined_rules(text)
    # A rule no start rule reaches is dropped by lark: a family written but not listed.
    reached = {r.origin.name for r in grammar.grammar().rules}
    orphans = _defined_rules(text) - reached - {"family", "opening"}
    assert not orphans, f"rules no family reaches (list them in `family:`?): {sorted(orphans)}"


def test_a_family_is_one_rule_and_its_name_in_the_list():
    """The lists are read from the grammar's text (by the parser generator), so a new family needs no Python edit."""
    text = files("triage.parse").joinpath("vllm_log.lark").read_text(encoding="utf-8")
    text = text.replace("family: oom |", "family: test_family | oom |") + '\ntest_family: "Totally new message" TAIL?\n'
    names = gen_parsers.listed(text, "family")
    assert names[0] == "test_family"
    lark = Lark(text, parser="lalr", start=list(names + gen_parsers.listed(text, "opening")))
    assert lark.parse("Totally new message here", start="test_family").data == "test_family"
