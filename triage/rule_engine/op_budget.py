"""The operations rule expressions may spend, so a user's rule pack cannot stall a worker.

A rule pack is data from users: one rule with a 150-term expression, bound to each of a
10 000-frame traceback's frame events, would take seconds, and 500 of them an hour. Every
expression node costs one operation, every item an `in` or a function walks one more;
`diagnose` gives each rule a budget per startup attempt, drawn from one for the attempt.
The same budgets are checked when a pack loads, in work (expression size times the events a
rule is planned for), so a pack that could not fit is refused up front, naming its rules.
"""

from __future__ import annotations

from typing import Any

# Operations one rule may spend on one startup attempt, and all rules together (match.py
# enforces both while evaluating; `rule_cost` and `pack_costs` check them when a pack loads).
RULE_OPS = 200_000
ATTEMPT_OPS = 2_000_000
# Events of one kind a rule bound to that kind is planned for at load time. A log may hold
# more (a 10 000-frame traceback): the budget counted while evaluating still stops a rule
# there, in one line naming it; a pack that cannot fit even this many is refused at load.
PLANNED_EVENTS = 1000


class BudgetExceeded(Exception):
    """An evaluation spent its operations (not an ExpressionError: no rule may skip past it)."""

    def __init__(self, budget: Budget) -> None:
        super().__init__(f"more than {budget.ops:,} operations")
        self.budget = budget


class Budget:
    """Operations evaluations may still spend: one per expression node, one per item an `in`
    or a function walks. A rule pack is data from users, and one rule over a 10 000-frame
    traceback, bound to every frame event, must stop here instead of stalling a worker.
    Spending from a budget spends from its parent too (a rule's from its attempt's)."""

    def __init__(self, ops: int, parent: Budget | None = None) -> None:
        self.ops = ops
        self.left = ops
        self.parent = parent

    def spend(self, n: int = 1) -> None:
        self.left -= n
        if self.left < 0:
            raise BudgetExceeded(self)
        if self.parent is not None:
            self.parent.spend(n)

    @property
    def spent(self) -> int:
        return self.ops - self.left


def walk_cost(value: Any) -> int:
    """What walking a value costs: its items (a list), a share of its length (a string)."""
    if isinstance(value, (list, tuple, dict, set, frozenset)):
        return len(value)
    return len(value) // 64 if isinstance(value, str) else 0


def nodes(tree: Any) -> int:
    """An expression's size: its syntax nodes and tokens (what evaluating it once may touch).

    The tree is expr.py's plain data: ("tree", rule, children), ("tok", terminal, text), None."""
    count, stack = 0, [tree]
    while stack:
        node = stack.pop()
        count += 1
        if isinstance(node, tuple) and node and node[0] == "tree":
            stack.extend(node[2])
    return count


def rule_cost(rule: Any) -> tuple[int, int]:
    """(per binding, once): the operations of the conditions evaluated for each event the rule
    is bound to, and of what is evaluated once when it fires (figures, rank, texts); the pack's
    figures are counted whole for each rule of it, though they are evaluated once for all."""
    per = 1 + sum(nodes(e.node) for e in (*rule.all, *rule.any))
    once = [rule.rank, rule.confidence, *rule.figures.values(), *getattr(rule, "pack_figures", {}).values()]
    for remedy in rule.remedies:
        once += [remedy.when] if remedy.when is not None else []
        once += _template_exprs(remedy.text) + [
            e for t in (*remedy.flags.values(), *remedy.env.values()) for e in _template_exprs(t)
        ]
    for sentence in rule.explanation:
        for template, when in sentence:
            once += _template_exprs(template) + ([when] if when is not None else [])
    return per, sum(nodes(e.node) for e in once)


def _template_exprs(template: Any) -> list:
    return [part[0] for part in template.parts if isinstance(part, tuple)]


def planned_cost(rule: Any) -> int:
    """What a rule may spend on one attempt with PLANNED_EVENTS events of its kind."""
    per, once = rule_cost(rule)
    return per * (PLANNED_EVENTS if rule.event else 1) + once


def over_rule_budget(rule: Any) -> str | None:
    """Why a rule is refused at load (its planned cost is over RULE_OPS), or None."""
    per, once = rule_cost(rule)
    cost = planned_cost(rule)
    if cost <= RULE_OPS:
        return None
    bound = f"{per:,} per {rule.event!r} event x {PLANNED_EVENTS:,} events" if rule.event else f"{per:,}"
    return (
        f"its expressions cost {cost:,} operations on one startup attempt ({bound}, + {once:,} once): over "
        f"the evaluation budget of {RULE_OPS:,}; simplify its conditions, or bind it to a rarer event"
    )
