"""One error hierarchy; every error knows where it happened so the CLI can say so in one line."""

from __future__ import annotations

from msgspec import Struct


class TriageError(Exception):
    """Base of every error the tool reports to a user (exit code 2)."""

    def __init__(self, message: str, where: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.where = where

    def __str__(self) -> str:
        return f"{self.message} in {self.where}" if self.where else self.message


class InputError(TriageError):
    """The log could not be read: missing, a directory, unreadable, binary, too large."""


class Problem(Struct, frozen=True, kw_only=True):
    """One thing wrong with a rule pack, located so an editor can jump to it.

    `line` is the line of the field when the pack says where it is, else of the rule, else of
    the pack (None: the file as a whole, e.g. it cannot be read)."""

    path: str
    line: int | None = None
    rule: str | None = None  # the rule's id, when the problem is inside one
    field: str | None = None  # e.g. `remedies[0].flags`, `when.all[1]`
    message: str

    def __str__(self) -> str:
        """`path:line: rule 'id': field: message`, leaving out what is not known."""
        parts = [f"{self.path}:{self.line}" if self.line else self.path]
        if self.rule is not None:
            parts.append(f"rule {self.rule!r}")
        if self.field:
            parts.append(self.field)
        return ": ".join([*parts, self.message])


class RulePackError(TriageError):
    """A rule pack is malformed. Carries every problem found, not only the first."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        head = str(problems[0]) if problems else "invalid rule pack"
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        super().__init__(head + more)

    def __reduce__(self) -> tuple:
        """Rebuilt from its problems when it crosses a process boundary (batch workers)."""
        return type(self), (self.problems,)


class ExpressionError(TriageError):
    """A rule expression is malformed or asks for something it may not have."""


class RuleBudgetError(TriageError):
    """A rule spent more operations on one log than its budget allows (a costly user pack)."""


class UsageError(TriageError):
    """The command line asks for something impossible."""
