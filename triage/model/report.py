"""The report: the public JSON contract (schema_version 1) that every renderer reads.

Renderers compute nothing; whatever a format shows must be here. Changing a field's
meaning or removing one is a new schema_version; adding optional fields is not.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from triage import __version__

SCHEMA_VERSION = 1
# "recovered": an earlier startup attempt failed and the last one reached ready (additive in
# schema 1: the diagnoses are the failed attempt's, the exit code is 0).
Outcome = Literal["failed", "healthy", "incomplete", "recovered"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class Tool(_Model):
    name: str = "vllm-triage"
    version: str = __version__


class InputInfo(_Model):
    name: str
    lines: int
    bytes: int
    truncated_lines: int = 0
    compressed: bool = False


class VllmInfo(_Model):
    version: str | None = None
    engine: Literal["v0", "v1"] | None = None


class Echo(_Model):
    """Another process's error after the fatal one: it failed because the first one did."""

    line: int
    origin: str = ""
    message: str


class Failure(_Model):
    phase: str | None = None
    line: int
    origin: str = ""
    message: str
    exception: str | None = None
    downstream: list[Echo] = Field(default_factory=list)


class Evidence(_Model):
    line: int
    text: str
    origin: str = ""


class RemedyCheck(_Model):
    """What the memory model checked a numeric remedy against, with the worst-case margin."""

    against: str  # the vLLM check that failed: startup_free_memory, kv_fits_max_model_len, ...
    verdict: Literal["fits", "cannot tell"]
    margin: float | None = None  # worst-case spare under the new flags, in `unit` (bytes, tokens)
    unit: str = "bytes"
    provenance: str = ""  # weakest input: printed, derived, default, estimated
    text: str = ""  # "fits with 0.31 GiB to spare", said in words


class Remedy(_Model):
    text: str
    flags: dict[str, str] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)
    check: RemedyCheck | None = None  # set on every remedy whose flags the memory model can check


class Diagnosis(_Model):
    id: str
    title: str
    confidence: float
    explanation: str
    evidence: list[Evidence] = Field(default_factory=list)
    remedies: list[Remedy] = Field(default_factory=list)
    rule: str = ""
    supporting_rules: list[str] = Field(default_factory=list)  # other rules for the same cause, merged in
    figures: dict[str, Any] = Field(default_factory=dict)
    attempt: int = 1


class AttemptSummary(_Model):
    index: int
    first_line: int
    last_line: int
    outcome: Outcome
    causes: list[str] = Field(default_factory=list)
    repeats: int = 1


class Report(_Model):
    schema_version: int = SCHEMA_VERSION
    tool: Tool = Field(default_factory=Tool)
    input: InputInfo
    outcome: Outcome
    vllm: VllmInfo = Field(default_factory=VllmInfo)
    failure: Failure | None = None
    facts: dict[str, Any] = Field(default_factory=dict)
    diagnoses: list[Diagnosis] = Field(default_factory=list)
    attempts: list[AttemptSummary] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


class BatchErrorInput(_Model):
    name: str


class BatchError(_Model):
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
    defs["BatchLine"] = {"anyOf": [{"$ref": "#"}, {"$ref": "#/$defs/BatchError"}],
                         "description": "One line of `vllm-triage batch --jsonl`: a report, or an error record."}
    return {"$schema": JSON_SCHEMA_DIALECT, "$id": f"https://vllm-triage.invalid/report-v{SCHEMA_VERSION}.schema.json",
            **schema}
