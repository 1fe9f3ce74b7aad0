"""The rule-pack contract: what a pack's YAML may say, checked by pydantic.

Imported only when a pack is actually read (a cache miss, `rules check`): the compiled rules
that most runs unpickle (compiled.py) are plain Structs and never need pydantic.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

PACK_SCHEMA_VERSION = 1
ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9\-]{1,63}$")
FLAG_PATTERN = re.compile(r"^--[a-z0-9][a-z0-9\-]*$")
ENV_PATTERN = re.compile(r"^[A-Z_][A-Z0-9_]*$")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True, frozen=True, defer_build=True)


class When(_Model):
    """When a rule applies. `event` binds each event of that kind in turn as `event`."""

    event: str | None = None
    failed: bool = True
    phase: list[str] | None = None
    all: list[Any] = Field(default_factory=list)
    any: list[Any] = Field(default_factory=list)


class RemedySpec(_Model):
    """A remedy as written: text, flags and environment variables (templates), an optional condition."""

    text: str = ""
    flags: dict[str, Any] = Field(default_factory=dict)
    env: dict[str, Any] = Field(default_factory=dict)
    when: Any = None

    @field_validator("flags")
    @classmethod
    def _flags(cls, v: dict[str, Any]) -> dict[str, Any]:
        for k in v:
            if not FLAG_PATTERN.match(str(k)):
                raise ValueError(f"flag {k!r} must look like --some-flag")
        return v

    @field_validator("env")
    @classmethod
    def _env(cls, v: dict[str, Any]) -> dict[str, Any]:
        for k in v:
            if not ENV_PATTERN.match(str(k)):
                raise ValueError(f"environment variable {k!r} must be UPPER_CASE")
        return v


class SentenceSpec(_Model):
    """A sentence of the explanation said only when its condition holds."""

    text: str
    when: Any = None


class RuleSpec(_Model):
    """One rule as written in a pack; expressions and templates are still source text here."""

    id: str
    cause: str
    title: str
    when: When = Field(default_factory=When)
    rank: Any = 50
    confidence: Any = 0.8
    figures: dict[str, Any] = Field(default_factory=dict)
    explanation: str | list[str | SentenceSpec | list[str | SentenceSpec]] = ""
    remedies: list[RemedySpec] = Field(default_factory=list)
    fallback: bool = False  # speaks only when no other rule explained the attempt
    fires_on: list[str] = Field(default_factory=list)
    quiet_on: list[str] = Field(default_factory=list)
    docs: str = ""

    @field_validator("id")
    @classmethod
    def _id(cls, v: str) -> str:
        if not ID_PATTERN.match(v):
            raise ValueError("must be lower-case letters, digits and dashes (2-64 characters)")
        return v


class PackSpec(_Model):
    """A pack: its schema version and its rules (each validated on its own, so one bad rule
    does not hide the problems of the others)."""

    schema_version: int = Field(alias="schema")
    figures: dict[str, Any] = Field(default_factory=dict)
    rules: list[Any]


def validate(spec: type[_Model], raw: Any) -> tuple[Any, list[tuple[tuple, str]]]:
    """`raw` as `spec`, or None and every (location, message) pydantic found."""
    try:
        return spec.model_validate(raw), []
    except ValidationError as exc:
        return None, [(tuple(e.get("loc", ())), str(e.get("msg", "invalid"))) for e in exc.errors()]


def pack_json_schema() -> dict[str, Any]:
    """The JSON Schema of a rule pack as its author writes it (`schema: 1` and the rules),
    made from the models above, published as docs/rule-pack-v1.schema.json for editors and
    CI. Loading checks each rule on its own (PackSpec keeps them untyped for that); the
    published schema states them whole."""
    from typing import Literal

    class RulePack(_Model):
        """A rule pack (`rules/<cause>.yaml`): the pack format's version, its named figures and
        its rules. Version 1 is a contract: keys are only ever added, optional (`figures` was),
        so a pack valid before stays valid."""

        schema_version: Literal[1] = Field(alias="schema")  # type: ignore[assignment]
        figures: dict[str, str | int | float | bool] = Field(
            default_factory=dict,
            description=(
                "Named figures of the pack: name (snake_case) -> expression. Every rule of the pack "
                "reads them by name (conditions, figures, texts, remedies); they read the attempt's "
                "names (not `event`) and each other (no cycles), are evaluated at most once per "
                "startup attempt, and are internal: never shown in the report (a rule's own "
                "`figures` are)."
            ),
        )
        rules: list[RuleSpec]

    out = RulePack.model_json_schema(by_alias=True)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://vllm-triage.invalid/rule-pack-v1.schema.json",
        **out,
    }
