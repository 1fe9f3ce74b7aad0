"""Renderers: pure functions from a Report to text, one module per format, imported only when asked."""

from __future__ import annotations

from collections.abc import Callable

from triage.errors import UsageError
from triage.model.report import Report

Renderer = Callable[..., str]
Joiner = Callable[[list[str]], str]


def _joiners() -> dict[str, Joiner]:
    """How the reports of several logs become one output (the default: a blank line between)."""
    from triage.render import gitlab, junit, slack

    return {"github": "".join, "junit": junit.join, "slack": slack.join, "gitlab": gitlab.join}


FORMATS = ("terminal", "json", "markdown", "github", "junit", "slack", "gitlab")
_MODULES = {"json": "json_format"}
# Formats whose text is a syntax (JSON, XML): the pipeline already redacted every string of the
# report, and a regex pass over the encoded text could cut through a quote and break the syntax.
STRUCTURED = frozenset({"json", "junit", "slack", "gitlab"})


def get(name: str) -> Renderer:
    if name not in FORMATS:
        raise UsageError(f"unknown format {name!r}; must be one of: {', '.join(sorted(FORMATS))}")
    import importlib

    # Only the renderer asked for is imported (the terminal one pulls in rich, ~50 ms).
    module = importlib.import_module(f".{_MODULES.get(name, name)}", __package__)
    return module.render


def render(report: Report, fmt: str, **options) -> str:
    """The report in one format, every text it carries from the input made safe to print first."""
    from triage.render.sanitise import clean_data

    return get(fmt)(clean_data(report), **options)


def join(chunks: list[str], fmt: str) -> str:
    """Join the rendered reports of several logs into one document of that format."""
    if fmt not in ("github", "junit", "slack", "gitlab"):
        return "\n".join(chunks)
    return _joiners()[fmt](chunks)
