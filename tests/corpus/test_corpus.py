"""Every labelled case of the shared corpus of real logs: the expected primary cause.

The corpus is third-party data and stays in ../shared; the snapshots hold only a compact
structured summary of what the tool found (causes, outcome, phase, figures, evidence
line numbers, remedy flags), never the logs' text. Cases the tool gets wrong today are
listed in corpus_known_misses.yaml with the reason; they xfail, and fixing one fails the
test until the entry is removed, so the list cannot go stale.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import CORPUS, triage_file

LABELS = CORPUS / "labels.yaml"
KNOWN_MISSES = yaml.safe_load((Path(__file__).parent / "corpus_known_misses.yaml").read_text()) or {}
SUMMARY_FACTS = (
    "gpu_total_bytes",
    "gpu_memory_utilization",
    "budget_bytes",
    "weights_bytes",
    "kv_cache_bytes",
    "max_model_len",
    "startup_free_bytes",
    "foreign_bytes",
    "tensor_parallel_size",
)


SNAPSHOTS = Path(__file__).parent / "__snapshots__" / "test_corpus"


def _cases():
    if not LABELS.exists():
        # One skipped case per snapshot, so a clone without ../shared does not report them all unused.
        absent = pytest.mark.skip(reason="../shared/corpus is not present")
        names = sorted(p.stem[len("test_corpus_case[") : -1] for p in SNAPSHOTS.glob("test_corpus_case[[]*].json"))
        return [pytest.param(n, None, marks=absent, id=n) for n in names] or [
            pytest.param(None, None, marks=absent, id="corpus-absent")
        ]
    labels = yaml.safe_load(LABELS.read_text())
    params = []
    for case, meta in sorted(labels.items()):
        if not (CORPUS / f"{case}.log").exists():
            continue
        params.append(pytest.param(case, meta, id=case))
    return params


def summary(report) -> dict:
    return {
        "outcome": report.outcome,
        "causes": [d.id for d in report.diagnoses],
        "phase": report.failure.phase if report.failure else None,
        "failure_line": report.failure.line if report.failure else None,
        "facts": {k: report.facts[k] for k in SUMMARY_FACTS if k in report.facts},
        "diagnoses": [
            {
                "id": d.id,
                "rule": d.rule,
                "evidence_lines": [e.line for e in d.evidence],
                "flags": [r.flags for r in d.remedies if r.flags or r.env],
                "env": [r.env for r in d.remedies if r.env],
            }
            for d in report.diagnoses
        ],
    }


@pytest.mark.parametrize("case,meta", _cases())
def test_corpus_case(case, meta, snapshot_json):
    report = triage_file(CORPUS / f"{case}.log")
    expect = meta.get("expect") or []
    got = [d.id for d in report.diagnoses]
    right = (bool(got) and got[0] == expect[0]) if expect else got == []
    if case in KNOWN_MISSES:
        if right:
            pytest.fail(f"{case} is right now: remove it from corpus_known_misses.yaml")
        pytest.xfail(KNOWN_MISSES[case])
    assert right, f"expected {expect or 'no diagnosis'}, got {got}"
    assert summary(report) == snapshot_json


def test_without_the_corpus_every_snapshot_is_a_skipped_case(monkeypatch, tmp_path):
    """A clone without ../shared must not report the corpus snapshots unused (noise that invites deleting them)."""
    monkeypatch.setattr(__import__(__name__), "LABELS", tmp_path / "absent" / "labels.yaml")
    cases = _cases()
    stems = {p.stem for p in SNAPSHOTS.glob("test_corpus_case[[]*].json")}
    assert {f"test_corpus_case[{c.id}]" for c in cases} == stems
    assert all(mark.name == "skip" for c in cases for mark in c.marks)
