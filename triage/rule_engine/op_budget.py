"""The operations rule expressions may spend, so a user's rule pack cannot stall a worker.

A rule pack is data from users: one rule with a 150-term expression, bound to each of a
10 000-frame traceback's frame events, would take seconds, and 500 of them an hour. Every
expression node costs one operation, every item an `in` or a function walks one more;
`diagnose` gives each rule a budget per startup attempt, drawn from one for the attempt.
"""

from __future__ import annotations

from typing import Any


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
