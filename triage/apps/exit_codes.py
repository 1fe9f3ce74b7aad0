"""The exit codes of the report commands (a contract), and the rule that picks one.

Shared by the main command (`cli.py`) and the watches (`live.py`) so the two cannot disagree:
0 no failure found, 1 a failure found (diagnosed or not), 2 usage, input or rule-pack error."""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import TYPE_CHECKING

from triage.errors import UsageError

if TYPE_CHECKING:
    from triage.model.report import Report

EXIT_OK, EXIT_FAILURE_FOUND, EXIT_ERROR = 0, 1, 2


def exit_code(reports: Iterable[Report]) -> int:
    """EXIT_FAILURE_FOUND when any report states a failure, else EXIT_OK."""
    from triage.model.report import found_failure  # the report model loads only once there are reports

    return EXIT_FAILURE_FOUND if any(found_failure(r) for r in reports) else EXIT_OK


class ArgParser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so the entry point owns every exit code."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)
