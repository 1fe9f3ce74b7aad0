"""Every numeric remedy goes through the memory model: fixtures say which flag sets it must offer
and refuse (with the hand arithmetic in their expect files); on the corpus every such remedy
carries what it was checked against, and none fails or sits at the edge of the rounding."""

from __future__ import annotations

import pytest
from conftest import CORPUS, fixture_cases, triage_file

from triage.vllm_flags import numeric

CASES = [(p, e) for p, e in fixture_cases() if e.get("remedies")]


def _flag_sets(report) -> list[dict[str, str]]:
    return [dict(r.flags) for d in report.diagnoses for r in d.remedies if r.flags]


@pytest.mark.parametrize("case", CASES, ids=[f"{p.parent.name}/{p.stem}" for p, _ in CASES])
def test_offered_and_refused_remedies(case):
    path, expect = case
    report = triage_file(path)
    offered = _flag_sets(report)
    spec = expect["remedies"]
    for want in spec.get("offered", []):
        assert {k: str(v) for k, v in want.items()} in offered, f"not offered: {want}; offered {offered}"
    for bad in spec.get("refused", []):
        assert {k: str(v) for k, v in bad.items()} not in offered, f"offered but fails: {bad}"
    for flag in spec.get("refused_flags", []):
        assert all(flag not in f for f in offered), f"{flag} offered: {offered}"
    if spec.get("says"):
        texts = " ".join(r.text for d in report.diagnoses for r in d.remedies)
        assert spec["says"] in texts


def test_fixture_patterns_are_covered():
    assert len(CASES) >= 5


def test_every_numeric_remedy_on_the_corpus_is_checked():
    if not CORPUS.is_dir():
        pytest.skip("../shared/corpus is not here")
    checked = 0
    for path in sorted(CORPUS.glob("*.log")):
        report = triage_file(path)
        for d in report.diagnoses:
            for r in d.remedies:
                if not r.flags or not numeric(r.flags) or r.check is None:
                    continue
                checked += 1
                assert r.check.verdict in ("fits", "cannot tell"), (path.name, r.flags)
                if r.check.verdict == "fits" and r.check.margin is not None:
                    assert r.check.margin >= 0, (path.name, r.flags, r.check)
                if r.check.verdict == "cannot tell":
                    assert "does not give" in r.check.text, (path.name, r.flags, r.check.text)
    assert checked >= 30
