"""A rule pack cannot stall a run: rule expressions spend from a budget of operations.

One 2 KiB rule with a 150-term expression, bound to every frame of a 10 000-frame
traceback, took a run from 1.5 s to 10.5 s, and 500 such rules fit the pack limits (about
an hour a log). Each rule now has a budget of operations per startup attempt (one per
expression node, one per item an `in` or a function walks), all rules together one more.
It is checked twice, in work, never in time: when a pack loads (`rules check` too), each
rule's size times the events it is planned for (budget.PLANNED_EVENTS of its kind) must fit,
so such a pack is refused up front, naming each rule; and while a log is evaluated, where a
log with more events than planned stops the rule that runs out, in one line naming it. The
built-in packs spend a small share of it.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from conftest import FIXTURES
from secret_cases import FAILED, FATAL_LINE

import triage.diagnose.match as diagnose
from triage.apps.cli import main
from triage.errors import RuleBudgetError, RulePackError
from triage.pipeline import Options, load_rules, run
from triage.rule_engine.expr import Trace, compile_expr
from triage.rule_engine.load import load_packs
from triage.rule_engine.op_budget import ATTEMPT_OPS, RULE_OPS, Budget, BudgetExceeded, planned_cost

TERMS = 150


def deep_traceback_log(frames: int = 10_000) -> bytes:
    """The failing fixture with a traceback of FRAMES frames before its fatal line."""
    lines = FAILED.read_text(encoding="utf-8").split("\n")
    prefix = "ERROR 07-18 09:31:06 [core.py:586] "
    body = [prefix + "Traceback (most recent call last):"]
    for i in range(frames):
        body += [f'{prefix}  File "/venv/vllm/mod{i}.py", line {i + 1}, in func{i}', f"{prefix}    call{i}()"]
    return "\n".join(lines[: FATAL_LINE - 1] + body + lines[FATAL_LINE - 1 :]).encode()


def costly_rule(i: int, terms: int = TERMS) -> str:
    """A rule of about 2 KiB (150 terms), bound to every frame event, that never fires."""
    terms = " or ".join(["event.lineno < 0"] + [f"0 == {k + 1}" for k in range(terms - 1)])
    return (
        f"  - id: costly-{i}\n    cause: unknown_failure\n    title: costly\n"
        f'    when:\n      event: frame\n      all:\n        - "{terms}"\n'
        f"    explanation: x\n    fires_on: []\n    quiet_on: []\n"
    )


def pack(tmp_path: Path, rules: int, terms: int = TERMS) -> Path:
    path = tmp_path / "costly.yaml"
    path.write_text("schema: 1\nrules:\n" + "".join(costly_rule(i, terms) for i in range(rules)), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def deep_log() -> bytes:
    return deep_traceback_log()


@pytest.mark.parametrize("rules", [1, 500])
def test_the_cpu_bomb_pack_is_refused_by_rules_check_and_at_load(rules, tmp_path):
    path = pack(tmp_path, rules)
    assert len(costly_rule(0)) < 2300 and path.stat().st_size < 1 << 20  # within the pack limits
    with pytest.raises(RulePackError) as info:
        load_packs([path])
    assert [p.rule for p in info.value.problems] == [f"costly-{i}" for i in range(rules)]
    out, err = io.StringIO(), io.StringIO()
    assert main(["rules", "check", str(path)], stdout=out, stderr=err) == 2 and out.getvalue() == ""
    lines = err.getvalue().splitlines()
    assert len(lines) == rules and f"{path}:3: rule 'costly-0'" in lines[0]
    assert all("evaluation budget of 200,000" in line and "per 'frame' event" in line for line in lines)


def test_the_cpu_bomb_pack_is_refused_before_any_log_is_read(tmp_path, deep_log):
    path = pack(tmp_path, 1)
    out, err = io.StringIO(), io.StringIO()
    code = main(["-", "--rules", str(path), "-f", "json"], stdin=io.BytesIO(deep_log), stdout=out, stderr=err)
    assert code == 2 and out.getvalue() == ""
    assert "'costly-0'" in err.getvalue() and "evaluation budget" in err.getvalue()


def test_rules_that_fit_alone_but_not_together_are_refused_naming_the_costliest(tmp_path):
    (tmp_path / "one").mkdir()
    (rule,) = load_packs([pack(tmp_path / "one", 1, terms=25)])  # about 150 operations a frame
    assert RULE_OPS // 2 < planned_cost(rule) <= RULE_OPS  # alone it fits; 20 of them do not
    path = pack(tmp_path, 20, terms=25)
    with pytest.raises(RulePackError) as info:
        load_packs([path])
    (problem,) = info.value.problems
    assert "all rules together" in problem.message and "'costly-0'" in problem.message


def test_rules_check_reports_the_cost_of_the_built_in_rules():
    out = io.StringIO()
    assert main(["rules", "check"], stdout=out, stderr=io.StringIO()) == 0
    figure = int(re.search(r"evaluation cost at most ([\d,]+) of", out.getvalue()).group(1).replace(",", ""))
    assert 0 < figure < ATTEMPT_OPS // 4


def test_a_log_with_more_events_than_planned_stops_the_rule_in_one_line(tmp_path, deep_log):
    """A rule that fits the plan (1 000 frames) but not this log (10 000): stopped while
    evaluating, in work, and named."""
    path = pack(tmp_path, 1, terms=25)
    out, err = io.StringIO(), io.StringIO()
    code = main(["-", "--rules", str(path), "-f", "json"], stdin=io.BytesIO(deep_log), stdout=out, stderr=err)
    assert code == 2 and out.getvalue() == ""
    line = err.getvalue()
    assert line.count("\n") == 1 and "'costly-0'" in line and "evaluation budget" in line, line
    assert f"{path}:" in line  # the pack and the rule's line


def test_the_budget_counts_operations_not_time():
    """A bound that does not depend on the machine: a fixed number of operations, then a stop."""
    expr = compile_expr(" + ".join(["1"] * 100))
    budget = Budget(1000)
    for _ in range(9):
        expr.evaluate({}, Trace(budget=budget))
    with pytest.raises(BudgetExceeded):
        expr.evaluate({}, Trace(budget=budget))
    walk = compile_expr("'x' in failure")
    with pytest.raises(BudgetExceeded):  # an `in` pays for each item it walks
        walk.evaluate({"failure": list(range(5000))}, Trace(budget=Budget(1000)))


def test_the_rules_together_have_a_budget_too(monkeypatch):
    monkeypatch.setattr(diagnose, "ATTEMPT_OPS", 50)
    with pytest.raises(RuleBudgetError, match="the rules together exceeded"):
        run(io.BytesIO(FAILED.read_bytes()), "x", Options(), load_rules())


def test_the_built_in_packs_spend_a_small_share_of_the_budget(monkeypatch, deep_log):
    """Every fixture log, and the 10 000-frame traceback: each built-in rule spends under 1% of
    its budget on any attempt, all rules together under 1% of theirs."""
    spent: dict[str, int] = {}
    attempts: list[Budget] = []
    apply = diagnose._apply

    def spy(rule, attempt, base, texts, fatal_lines, budget=None):
        try:
            return apply(rule, attempt, base, texts, fatal_lines, budget)
        finally:
            spent[rule.id] = max(spent.get(rule.id, 0), budget.spent)
            if budget.parent not in attempts:
                attempts.append(budget.parent)

    monkeypatch.setattr(diagnose, "_apply", spy)
    rules = load_rules()
    logs = [p.read_bytes() for p in sorted(FIXTURES.rglob("*.log"))] + [deep_log]
    for data in logs:
        run(io.BytesIO(data), "x", Options(), rules)
    assert len(spent) > 20 and attempts
    worst = max(spent, key=spent.get)
    assert spent[worst] < diagnose.RULE_OPS // 100, f"{worst} spent {spent[worst]}"
    assert max(a.spent for a in attempts) < diagnose.ATTEMPT_OPS // 100
