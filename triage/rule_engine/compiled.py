"""Rules ready to run: every expression and template compiled.

Plain frozen msgspec Structs, not pydantic models: the compiled rules are pickled to the on-disk
cache and unpickled on every run, and unpickling a model would import pydantic (a large part of
start-up) for objects that are built once by the loader and only read afterwards.
"""

from __future__ import annotations

from msgspec import Struct, field

from triage.rule_engine.expr import Expr
from triage.rule_engine.template import Template


class RemedyTemplate(Struct, frozen=True):
    """A remedy's templates and its condition (None: always offered)."""

    text: Template
    flags: dict[str, Template]
    env: dict[str, Template]
    when: Expr | None


class Rule(Struct, frozen=True):
    """A rule ready to run: every expression and template compiled."""

    id: str
    cause: str
    title: str
    source: str  # `path:line` of the rule in its pack
    event: str | None
    failed: bool
    phases: list[str] | None
    all: list[Expr]
    any: list[Expr]
    rank: Expr
    confidence: Expr
    figures: dict[str, Expr]
    explanation: list[list[tuple[Template, Expr | None]]]  # sentences, each a list of alternatives
    remedies: list[RemedyTemplate]
    fallback: bool
    fires_on: list[str]
    quiet_on: list[str]
    docs: str
    # The pack's named figures (`figures:` beside `rules:`), shared by its rules: read by name,
    # evaluated at most once per startup attempt, never shown in the report (match.py).
    pack_figures: dict[str, Expr] = field(default_factory=dict)
