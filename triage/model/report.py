"""The report: the public JSON contract (schema_version 1) that every renderer reads.

Renderers compute nothing; whatever a format shows must be here. Changing a field's
meaning or removing one is a new schema_version; adding optional fields is not.

The parts are plain `msgspec.Struct`s (mutable, keyword-only), so a run imports no validation
library (pydantic costs ~100 ms of start-up). They keep pydantic's names for what callers use
(`model_dump`, `model_copy`, ...). Validation and the JSON Schema, where the contract is checked
(reading a report back, `vllm-triage schema`, the server's OpenAPI document), go through
pydantic, imported then (`report_contract`): it validates dataclasses made from these very
classes, field for field, and hands back these classes.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from msgspec import Struct, field
from msgspec.structs import replace

from triage.version import __version__

SCHEMA_VERSION = 1
# "recovered": an earlier startup attempt failed and the last one reached ready (additive in
# schema 1: the diagnoses are the failed attempt's, the exit code is 0).
Outcome = Literal["failed", "healthy", "incomplete", "recovered"]


class _Model(Struct, kw_only=True):
    """What every part of the report offers, under pydantic's method names. (Each part says
    `kw_only=True` too: msgspec and type checkers read it per class.)"""

    def model_dump(self, mode: str = "python") -> dict[str, Any]:
        """The part as plain data; `mode="json"`: only JSON types (tuples as lists, no inf/NaN)."""
        return _dump(self, mode == "json")

    def model_dump_json(self) -> str:
        """Compact JSON, byte for byte what pydantic writes (its float spelling differs from json's)."""
        from pydantic_core import to_json  # pydantic's serializer, without importing pydantic

        return to_json(self.model_dump(mode="json")).decode()

    def model_copy(self, update: dict[str, Any] | None = None):
        """A shallow copy with some fields replaced (not validated, as in pydantic)."""
        return replace(self, **(update or {}))

    @classmethod
    def model_validate(cls, data: Any):
        """Checked against the contract (a wrong type or an unknown key raises pydantic's ValidationError)."""
        from triage.model.report_contract import validate

        return validate(cls, data, json=False)

    @classmethod
    def model_validate_json(cls, text: str | bytes):
        from triage.model.report_contract import validate

        return validate(cls, text, json=True)

    @classmethod
    def model_json_schema(cls, ref_template: str = "#/$defs/{model}") -> dict[str, Any]:
        from triage.model.report_contract import adapter

        return adapter(cls).json_schema(ref_template=ref_template)


def _dump(value: Any, as_json: bool) -> Any:
    if isinstance(value, _Model):
        return {name: _dump(getattr(value, name), as_json) for name in value.__struct_fields__}
    if isinstance(value, dict):
        return {k: _dump(v, as_json) for k, v in value.items()}
    if isinstance(value, list):
        return [_dump(v, as_json) for v in value]
    if isinstance(value, tuple):
        items = [_dump(v, as_json) for v in value]
        return items if as_json else tuple(items)
    if as_json and isinstance(value, float) and not math.isfinite(value):
        return None  # pydantic's default (ser_json_inf_nan="null")
    return value


def _as_float(value: Any) -> Any:
    """An int given for a float field is stored as a float, as pydantic does (JSON says `0.0`)."""
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


class Tool(_Model, kw_only=True):
    name: str = "vllm-triage"
    version: str = __version__
    # When the report was written (ISO 8601, UTC): set by the commands that write a report
    # (render/json_format.stamp), absent from a report built in memory. Added within
    # schema_version 1: optional, so a reader of the earlier reports reads these unchanged.
    generated_at: str | None = None


class InputInfo(_Model, kw_only=True):
    name: str
    lines: int
    bytes: int
    truncated_lines: int = 0
    compressed: bool = False


class VllmInfo(_Model, kw_only=True):
    version: str | None = None
    engine: Literal["v0", "v1"] | None = None


class Echo(_Model, kw_only=True):
    """Another process's error after the fatal one: it failed because the first one did."""

    line: int
    origin: str = ""
    message: str


class Failure(_Model, kw_only=True):
    phase: str | None = None
    line: int
    origin: str = ""
    message: str
    exception: str | None = None
    downstream: list[Echo] = field(default_factory=list)


class Evidence(_Model, kw_only=True):
    line: int
    text: str
    origin: str = ""


class RemedyCheck(_Model, kw_only=True):
    """What the memory model checked a numeric remedy against, with the worst-case margin."""

    against: str  # the vLLM check that failed: startup_free_memory, kv_fits_max_model_len, ...
    verdict: Literal["fits", "cannot tell"]
    margin: float | None = None  # worst-case spare under the new flags, in `unit` (bytes, tokens)
    unit: str = "bytes"
    provenance: str = ""  # weakest input: printed, derived, default, estimated
    text: str = ""  # "fits with 0.31 GiB to spare", said in words

    def __post_init__(self) -> None:
        self.margin = _as_float(self.margin)


class Remedy(_Model, kw_only=True):
    text: str
    flags: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    check: RemedyCheck | None = None  # set on every remedy whose flags the memory model can check


class Diagnosis(_Model, kw_only=True):
    id: str
    title: str
    confidence: float
    explanation: str
    evidence: list[Evidence] = field(default_factory=list)
    remedies: list[Remedy] = field(default_factory=list)
    rule: str = ""
    supporting_rules: list[str] = field(default_factory=list)  # other rules for the same cause, merged in
    figures: dict[str, Any] = field(default_factory=dict)
    attempt: int = 1

    def __post_init__(self) -> None:
        self.confidence = _as_float(self.confidence)


class AttemptSummary(_Model, kw_only=True):
    index: int
    first_line: int
    last_line: int
    outcome: Outcome
    causes: list[str] = field(default_factory=list)
    repeats: int = 1


class Report(_Model, kw_only=True):
    schema_version: int = SCHEMA_VERSION
    tool: Tool = field(default_factory=Tool)
    input: InputInfo
    outcome: Outcome
    vllm: VllmInfo = field(default_factory=VllmInfo)
    failure: Failure | None = None
    facts: dict[str, Any] = field(default_factory=dict)
    diagnoses: list[Diagnosis] = field(default_factory=list)
    attempts: list[AttemptSummary] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class BatchErrorInput(_Model, kw_only=True):
    name: str


class BatchError(_Model, kw_only=True):
    """A line of `batch --jsonl` for a log that could not be read (instead of its report)."""

    input: BatchErrorInput
    error: str


JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def found_failure(report: Report) -> bool:
    """Whether a report means "the server is not up": what exit code 1 says. A recovered log
    carries the failed attempt's diagnoses, but its server came up."""
    return report.outcome == "failed" or (report.outcome != "recovered" and bool(report.diagnoses))


def json_schema() -> dict[str, Any]:
    """The published JSON Schema of the report (snapshot-tested: it is a contract).

    The root is the report; `$defs/BatchError` is batch's record for an unreadable log and
    `$defs/BatchLine` either of the two (what each line of `batch --jsonl` holds)."""
    schema = Report.model_json_schema()
    error = BatchError.model_json_schema()
    defs = schema.setdefault("$defs", {})
    defs.update(error.pop("$defs", {}))
    defs["BatchError"] = error
    defs["BatchLine"] = {
        "anyOf": [{"$ref": "#"}, {"$ref": "#/$defs/BatchError"}],
        "description": "One line of `vllm-triage batch --jsonl`: a report, or an error record.",
    }
    return {
        "$schema": JSON_SCHEMA_DIALECT,
        "$id": f"https://vllm-triage.invalid/report-v{SCHEMA_VERSION}.schema.json",
        **schema,
    }
