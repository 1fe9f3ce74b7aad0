"""`vllm-triage explain CAUSE`: the taxonomy's words and the rules that name the cause."""

from __future__ import annotations

import io

from triage.apps.cli import main
from triage.rule_engine.load import load_taxonomy


def run(argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(["explain", *argv], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_a_cause_with_its_signs_fixes_and_rules():
    code, out, _ = run(["kv_cache_insufficient"])
    meta = load_taxonomy()["kv_cache_insufficient"]
    assert code == 0 and out.startswith(f"kv_cache_insufficient: {meta['title']}")
    assert "Signs in a log:" in out and "Fix:" in out
    assert "kv-needed-exceeds-available" in out and "--max-model-len {fit_len|int}" in out
    assert "example log: fixtures/logs/kv_cache_insufficient/" in out


def test_every_cause_can_be_explained():
    code, out, _ = run([])
    listed = [line.split()[0] for line in out.splitlines()]
    assert code == 0 and listed == list(load_taxonomy())
    for cause in listed:
        code, text, _ = run([cause])
        assert code == 0 and text.startswith(cause + ":")


def test_an_unknown_cause_suggests_the_close_ones():
    code, out, err = run(["kv_cache"])
    assert code == 2 and out == "" and "kv_cache_insufficient" in err and err.count("\n") == 1
