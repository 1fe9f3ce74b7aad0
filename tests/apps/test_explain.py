"""`vllm-triage explain CAUSE`: the taxonomy's words and the rules that name the cause."""

from __future__ import annotations

import io
import re

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
    assert "kv-needed-exceeds-available" in out and "--max-model-len <fit_len>" in out
    assert "example log: fixtures/logs/kv_cache_insufficient/" in out  # a checkout has the fixtures


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


def test_no_template_code_reaches_the_text():
    for cause in load_taxonomy():
        out = run([cause])[1]
        assert not re.search(r"\{[^{}\"]*\}", out) and "|int" not in out and "facts." not in out, cause
    out = run(["kv_cache_insufficient"])[1]
    assert "--kv-cache-dtype <fp8_e5m2 or fp8>" in out


def test_a_rule_id_explains_its_cause_with_that_rule():
    code, out, _ = run(["kv-needed-exceeds-available"])
    assert code == 0 and out.startswith("kv_cache_insufficient:")
    assert "kv-needed-exceeds-available:" in out and "kv-tokens-below-max-seq-len" not in out
    code, _, err = run(["kv-needed-exceeds-availabel"])
    assert code == 2 and "did you mean kv-needed-exceeds-available" in err


def test_an_install_without_fixtures_cites_no_example(monkeypatch, tmp_path):
    from triage.apps import explain

    monkeypatch.setattr(explain, "_ROOT", tmp_path)  # where an installed package's root has no fixtures/
    out = run(["kv_cache_insufficient"])[1]
    assert "example log" not in out and "fixtures/" not in out


def test_a_command_is_never_wrapped_inside():
    from triage.apps.explain import _figures
    from triage.pipeline import load_rules

    def named(rule) -> dict[str, str]:  # the pack's figures, read as the expressions they name
        return {name: expr.source for name, expr in rule.pack_figures.items()}

    out = run(["kv_cache_insufficient"])[1]
    commands = {
        " ".join([*(f"{k} {_figures(v.source, named(rule))}".rstrip() for k, v in r.flags.items())])
        for rule in load_rules()
        if rule.cause == "kv_cache_insufficient"
        for r in rule.remedies
        if r.flags
    }
    lines = [line.strip().removeprefix("- ") for line in out.splitlines()]
    for cmd in commands:
        assert cmd in lines, cmd  # whole, on one line
