"""Our own fixture logs (fixtures/logs/<cause>/<name>.log + .expect.yaml): causes, outcome, figures.

Each fixture was written in the real formats of the vLLM version its expect file names,
with hand-computed figures; where a remedy computes one of them, the test checks the
flag value the report offers against the hand-computed one.
"""

from __future__ import annotations

import pytest
from conftest import FIXTURES, fixture_cases, triage_file

CASES = fixture_cases()
# figure in the expect file -> (flag a remedy sets, how to read it)
FIGURE_FLAGS = {
    "fit_max_model_len": ("--max-model-len", int),
    "fit_gpu_memory_utilization": ("--gpu-memory-utilization", float),
}


def _id(case) -> str:
    path, _ = case
    return f"{path.parent.name}/{path.stem}"


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_fixture(case):
    path, expect = case
    assert "broken" not in expect, f"unreadable expect file: {expect.get('broken')}"
    report = triage_file(path)
    got = [d.id for d in report.diagnoses]
    wanted = expect.get("expect") or []
    if wanted:
        assert got[:1] == wanted[:1], f"expected {wanted}, got {got}"
    else:
        assert got == [], f"expected no diagnosis, got {got}"
    assert report.outcome == expect.get("outcome", report.outcome)
    near = expect.get("near_miss_for")
    if near:
        assert got[:1] != [near], f"near miss for {near} was diagnosed as it"
    if wanted and expect.get("phase") and report.failure:
        assert report.failure.phase == expect["phase"]


def _offered(report, flag: str) -> list[str]:
    return [r.flags[flag] for d in report.diagnoses for r in d.remedies if flag in r.flags]


FIGURE_CASES = [(p, e) for p, e in CASES if any(k in (e.get("figures") or {}) for k in FIGURE_FLAGS)]


@pytest.mark.parametrize("case", FIGURE_CASES, ids=[_id(c) for c in FIGURE_CASES])
def test_remedy_figures_match_hand_computed(case):
    path, expect = case
    report = triage_file(path)
    for figure, (flag, cast) in FIGURE_FLAGS.items():
        if figure in (expect.get("figures") or {}):
            offered = [cast(v) for v in _offered(report, flag)]
            assert cast(expect["figures"][figure]) in offered, f"{flag}: offered {offered}"


def test_there_are_fixtures_for_every_memory_cause_and_healthy():
    dirs = {p.name for p in FIXTURES.iterdir() if p.is_dir()}
    assert {
        "healthy",
        "kv_cache_insufficient",
        "gpu_memory_utilization_too_high",
        "weights_exceed_memory",
        "foreign_gpu_processes",
        "cuda_graph_capture_oom",
        "warmup_oom",
        "memory_fragmentation",
    } <= dirs


FACT_CASES = [(p, e) for p, e in CASES if e.get("figures")]


@pytest.mark.parametrize("case", FACT_CASES, ids=[_id(c) for c in FACT_CASES])
def test_figures_that_are_report_facts_match_hand_computed(case):
    """A hand-computed figure named like a report fact must be that fact, to the rounding of
    the log's printed figures (two to four decimals of GiB: well under 0.05%)."""
    path, expect = case
    facts = triage_file(path).facts
    for name, want in expect["figures"].items():
        if name in FIGURE_FLAGS or name not in facts:
            continue
        got = facts[name]
        if isinstance(want, (int, float)) and not isinstance(want, bool):
            assert isinstance(got, (int, float)) and abs(got - want) <= max(abs(want) * 5e-4, 1e-9), (name, want, got)
        else:
            assert got == want, (name, want, got)
