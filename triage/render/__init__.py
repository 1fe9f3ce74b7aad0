"""Renderers: pure functions from a Report to text, one per format, in one registry."""

from __future__ import annotations

from collections.abc import Callable

from ..errors import UsageError
from ..report import Report

Renderer = Callable[..., str]


def _registry() -> dict[str, Renderer]:
    from . import json_format, markdown, terminal

    return {
        "terminal": terminal.render,
        "json": json_format.render,
        "markdown": markdown.render,
    }


FORMATS = ("terminal", "json", "markdown")


def get(name: str) -> Renderer:
    registry = _registry()
    if name not in registry:
        raise UsageError(f"unknown format {name!r}; must be one of: {', '.join(sorted(registry))}")
    return registry[name]


def render(report: Report, fmt: str, **options) -> str:
    return get(fmt)(report, **options)
