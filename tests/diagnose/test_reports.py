"""Reports of our own fixtures in every human format, and the JSON contract, as snapshots.

Renderers are tested at a fixed width with colour off, so a snapshot diff shows exactly
what a user would see change.
"""

from __future__ import annotations

import json

import pytest
from conftest import FIXTURES, triage_file

from triage.model.report import json_schema
from triage.render import render

SHOWCASE = [
    "kv_cache_insufficient/v1-0.9.2-tp2-qwen14b-4090-estimated-max-len.log",
    "kv_cache_insufficient/v0-0.6.6-llama8b-a10g-max-seq-len-exceeds-kv.log",
    "gpu_memory_utilization_too_high/near-miss-v1-0.12.0-h100-other-tenant-holds-28g.log",
    "foreign_gpu_processes/v0-0.6.6-h100-kv-alloc-oom-other-process-18g.log",
    "weights_exceed_memory/v0-0.7.2-nemo12b-4090-weights-over-budget.log",
    "weights_exceed_memory/v1-0.14.1-qwen3-30b-a3b-bf16-l40s-failed-to-load-model.log",
    "cuda_graph_capture_oom/v0-0.3.3-llama2-13b-a100-40g-capture-oom-capacty-typo.log",
    "warmup_oom/v1-0.10.2-tp2-qwen14b-3090-sampler-warmup-1024-seqs.log",
    "memory_fragmentation/v1-0.10.2-tp2-llama70b-online-fp8-quant-fragmented.log",
    "port_in_use/v054-bind-after-startup-complete.log",
    "parallelism_mismatch/v085-qwen14b-40-heads-tp3.log",
    "shared_memory_exhausted/v063post1-compose-64m-shm-nccl-extend.log",
    "unknown_failure/v0102-plugin-model-import-error-load-weights.log",
    "dtype_unsupported/v027-compose-v100-traceback-cut-in-dtype-check.log",
    "healthy/v1-0.8.5-llama8b-h100-ctrl-c-shutdown-traceback.log",
]


@pytest.mark.parametrize("rel", SHOWCASE, ids=[r.rsplit(".", 1)[0] for r in SHOWCASE])
def test_terminal_report(rel, snapshot_txt):
    assert render(triage_file(FIXTURES / rel), "terminal", width=100, color=False) == snapshot_txt


@pytest.mark.parametrize("rel", SHOWCASE, ids=[r.rsplit(".", 1)[0] for r in SHOWCASE])
def test_markdown_report(rel, snapshot_md):
    assert render(triage_file(FIXTURES / rel), "markdown") == snapshot_md


@pytest.mark.parametrize("rel", SHOWCASE, ids=[r.rsplit(".", 1)[0] for r in SHOWCASE])
def test_json_report(rel, snapshot_json):
    assert json.loads(render(triage_file(FIXTURES / rel), "json")) == snapshot_json


def test_json_schema_is_a_published_contract(snapshot_json):
    schema = json_schema()
    assert schema["properties"]["schema_version"]["default"] == 1
    assert schema == snapshot_json


def test_json_report_validates_against_its_schema():
    """Every fixture's JSON report has the contract's required fields and types."""
    from triage.model.report import Report

    report = triage_file(FIXTURES / SHOWCASE[0])
    again = Report.model_validate_json(render(report, "json"))
    assert again == report
    data = json.loads(render(report, "json"))
    for key in ("schema_version", "tool", "input", "outcome", "vllm", "failure", "facts", "diagnoses"):
        assert key in data
    d = data["diagnoses"][0]
    assert {"id", "title", "confidence", "explanation", "evidence", "remedies"} <= set(d)
    assert all(isinstance(e["line"], int) and e["text"] for e in d["evidence"])


def test_published_schema_file_matches_the_model():
    """docs/report-v1.schema.json is what `vllm-triage schema` prints (regenerate it on purpose)."""
    published = json.loads((FIXTURES.parent.parent / "docs" / "report-v1.schema.json").read_text())
    assert published == json_schema()


def test_every_fixture_report_validates_against_the_published_schema():
    """The report is plain Structs on the run's path: the JSON it writes is checked here,
    against the published schema and by the pydantic reading of the same classes (whose own
    dump must be ours, byte for byte)."""
    import jsonschema

    from triage.model.report import Report
    from triage.model.report_contract import adapter as pydantic_reading

    schema = json.loads((FIXTURES.parent.parent / "docs" / "report-v1.schema.json").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    adapter = pydantic_reading(Report)
    logs = sorted(FIXTURES.glob("*/*.log"))
    assert len(logs) > 100
    for log in logs:
        report = triage_file(log)
        text = render(report, "json")
        errors = [e.message for e in validator.iter_errors(json.loads(text))]
        assert not errors, (log.name, errors[:3])
        assert Report.model_validate_json(text) == report, log.name
        checked = adapter.validate_python(report.model_dump())
        assert report.model_dump(mode="json") == adapter.dump_python(checked, mode="json"), log.name
        assert report.model_dump() == adapter.dump_python(checked), log.name
        assert report.model_dump_json() == adapter.dump_json(checked).decode(), log.name


def test_a_report_that_breaks_the_contract_is_refused():
    from pydantic import ValidationError

    from triage.model.report import Report

    data = json.loads(render(triage_file(FIXTURES / SHOWCASE[0]), "json"))
    for bad in ({**data, "unknown": 1}, {**data, "outcome": "exploded"}, {**data, "input": {"name": "x"}}):
        with pytest.raises(ValidationError):
            Report.model_validate(bad)
