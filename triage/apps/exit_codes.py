"""The exit codes of the report commands (a contract), and the rule that picks one.

Shared by the main command (`cli.py`) and the watches (`live.py`) so the two cannot disagree:
0 no failure found, 1 a failure found (diagnosed or not), 2 usage, input or rule-pack error."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from triage.errors import UsageError

if TYPE_CHECKING:
    from triage.model.report import Report

EXIT_OK, EXIT_FAILURE_FOUND, EXIT_ERROR = 0, 1, 2


def exit_code(reports: Iterable[Report]) -> int:
    """EXIT_FAILURE_FOUND when any report states a failure, else EXIT_OK."""
    from triage.model.report import found_failure  # the report model loads only once there are reports

    return EXIT_FAILURE_FOUND if any(found_failure(r) for r in reports) else EXIT_OK


class ArgParser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so the entry point owns every exit code.

    Its help formatters are given the terminal's width: argparse would ask shutil for it, and
    importing shutil (with bz2 and lzma, for its archives) is ~2 ms of every run's start,
    paid for help text a run almost never prints."""

    def __init__(self, **kw: Any) -> None:
        kw["formatter_class"] = _sized(kw.get("formatter_class", argparse.HelpFormatter))
        super().__init__(**kw)

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def _sized(formatter_class: type[argparse.HelpFormatter]) -> Callable[..., argparse.HelpFormatter]:
    """`formatter_class` made with the width argparse's default gives it (the terminal's, less 2)."""

    def make(prog: str, **kw: Any) -> argparse.HelpFormatter:
        kw.setdefault("width", terminal_columns() - 2)
        return formatter_class(prog, **kw)

    return make


def terminal_columns(fallback: int = 80) -> int:
    """`shutil.get_terminal_size().columns`, read as it reads it: $COLUMNS if a positive number,
    else the width of the terminal on sys.__stdout__, else `fallback`."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or fallback
