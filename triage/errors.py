"""One error hierarchy; every error knows where it happened so the CLI can say so in one line."""

from __future__ import annotations


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


class RulePackError(TriageError):
    """A rule pack is malformed. Carries every problem found, not only the first."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        head = problems[0] if problems else "invalid rule pack"
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        super().__init__(head + more)


class ExpressionError(TriageError):
    """A rule expression is malformed or asks for something it may not have."""


class RuleBudgetError(TriageError):
    """A rule spent more operations on one log than its budget allows (a costly user pack)."""


class UsageError(TriageError):
    """The command line asks for something impossible."""
