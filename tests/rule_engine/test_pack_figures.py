"""Pack-level named figures: read by name by every rule of the pack, evaluated once per startup
attempt, never shown in the report; a bad figure is one located problem at load."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from triage.apps.cli import main
from triage.errors import ExpressionError, RulePackError
from triage.rule_engine.expr import FactView, PackFigure, Trace, compile_expr
from triage.rule_engine.load import load_packs, load_taxonomy
from triage.rule_engine.op_budget import Budget
from triage.rule_engine.pack_figures import MAX_PACK_FIGURES
from triage.timeline.facts import Fact

PACKS = Path(__file__).parent / "packs"
LOG = Path(__file__).parents[2] / "fixtures/logs/kv_cache_insufficient/v1-0.9.2-tp2-qwen14b-4090-estimated-max-len.log"
CAUSES = set(load_taxonomy())


def cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_a_rule_reading_pack_figures_fires_and_they_stay_internal():
    code, out, err = cli([str(LOG), "--rules", str(PACKS / "figures.yaml"), "-f", "json"])
    report = json.loads(out)
    assert code == 1 and err == ""
    mine = next(d for d in report["diagnoses"] if d["rule"] == "test-pack-figure-fires")
    assert mine["explanation"] == "max_model_len 32,768 is a long context."
    assert [r["flags"] for r in mine["remedies"]] == [{"--kv-cache-dtype": "fp8"}]
    assert mine["figures"] == {"shown_len": 32768}  # the rule's own figure; the pack's are internal
    args_line = next(i for i, t in enumerate(LOG.read_text().split("\n"), 1) if "'max_model_len': 32768" in t)
    assert [e["line"] for e in mine["evidence"]] == [args_line]  # read through a figure: still cited
    assert "test-pack-figure-quiet" not in out


def test_a_rule_naming_an_unknown_figure_is_refused():
    with pytest.raises(RulePackError) as info:
        load_packs([PACKS / "unknown-figure.yaml"], CAUSES)
    assert len(info.value.problems) == 1
    assert "unknown name 'long_contxt'" in str(info.value) and "long_context" in str(info.value)
    code, _, err = cli(["rules", "check", str(PACKS / "unknown-figure.yaml")])
    assert code == 2 and err.count("\n") == 1 and "unknown-figure.yaml:12: rule 'test-pack-figure-fires'" in err
    assert cli(["rules", "check", str(PACKS / "figures.yaml")])[0] == 0


HEAD = "schema: 1\nfigures:\n"
RULE = "rules:\n  - id: r-one\n    cause: kv_cache_insufficient\n    title: t\n"


@pytest.mark.parametrize(
    "figures, rule, words",
    [
        ("  a: b + 1\n  b: a * 2\n", "", "cycle: a -> b -> a"),
        ("  a: a + 1\n", "", "cycle: a -> a"),
        ("  a: missing * 2\n", "", "unknown name 'missing'"),
        ("  a: event.needed\n", "", "unknown name 'event'"),
        ("  facts: 1\n", "", "'facts' is a built-in name"),
        ("  memory: 1\n", "", "'memory' is a built-in name"),
        ("  catalogue: 1\n", "", "'catalogue' is a built-in name"),
        ("  none: 1\n", "", "snake_case and no word of the language"),
        ("  Big: 1\n", "", "snake_case"),
        ("  a: (1 +\n", "", "cannot parse expression"),
        ("  a: 1\n", "    figures: {a: 2}\n", "'a' is a figure of the pack"),
        ("  a: 1\n", "    when: {all: [b > 0]}\n", "unknown name 'b'"),
    ],
)
def test_bad_figures_are_one_located_problem(tmp_path, figures, rule, words):
    path = tmp_path / "pack.yaml"
    path.write_text(HEAD + figures + RULE + rule)
    with pytest.raises(RulePackError) as info:
        load_packs([path], CAUSES)
    assert len(info.value.problems) == 1 and words in str(info.value)
    assert str(info.value.problems[0]).startswith(f"{path}:") and "\n" not in str(info.value)


def test_too_many_figures_are_refused(tmp_path):
    path = tmp_path / "pack.yaml"
    path.write_text(HEAD + "".join(f"  f{i}: {i}\n" for i in range(MAX_PACK_FIGURES + 1)) + RULE)
    with pytest.raises(RulePackError, match=f"more than {MAX_PACK_FIGURES} figures"):
        load_packs([path], CAUSES)


def test_a_figure_is_evaluated_once_and_every_read_cites_its_lines():
    ctx: dict = {"facts": FactView({"max_model_len": Fact(value=4096, line=7)})}
    figure = PackFigure(compile_expr("facts.max_model_len * 2"), ctx)
    ctx["doubled"] = figure
    budget = Budget(1000)
    first, second = Trace(budget=budget), Trace(budget=budget)
    assert compile_expr("doubled + 1").evaluate(ctx, first) == 8193
    spent = budget.spent
    assert compile_expr("doubled").evaluate(ctx, second) == 8192
    assert budget.spent - spent == 1  # the second read walks only its own name
    assert list(first.lines) == list(second.lines) == [7]


def test_a_figure_that_cannot_be_read_fails_each_reader_alike():
    ctx: dict = {"facts": {"n": "text"}}
    ctx["bad"] = PackFigure(compile_expr("facts.n * 2"), ctx)
    for _ in range(2):
        with pytest.raises(ExpressionError, match="non-number"):
            compile_expr("bad").evaluate(ctx)


def _chain(tmp_path: Path, figures: int, negations: int) -> Path:
    """A pack whose figures each read the next, and a rule reading the first under `negations`
    unary minuses (the deepest expression nesting the language allows)."""
    lines = [f"  f{i}: f{i + 1} + 0" for i in range(figures - 1)] + [f"  f{figures - 1}: facts.max_model_len"]
    path = tmp_path / "chain.yaml"
    path.write_text(HEAD + "\n".join(lines) + "\n" + RULE.replace("kv_cache_insufficient", "host_memory_exhausted"))
    path.write_text(path.read_text() + f"    when: {{all: ['{'-' * negations}f0 != 0']}}\n")
    return path


def test_a_chain_of_figures_nests_no_deeper_than_one_expression(tmp_path):
    """Figures evaluated where they are read nest the evaluation: a chain deeper than one
    expression may be is refused at load (a hostile pack would exhaust Python's stack)."""
    with pytest.raises(RulePackError, match="figure 'f0' nests more than 60 levels deep"):
        load_packs([_chain(tmp_path, MAX_PACK_FIGURES, 0)], CAUSES)
    deepest = _chain(tmp_path, 29, 55)  # 58 levels of figures under 57 of the rule's own
    assert load_packs([deepest], CAUSES)
    code, out, err = cli([str(LOG), "--rules", str(deepest), "-f", "json"])
    assert code == 1 and err == "" and "r-one" in [d["rule"] for d in json.loads(out)["diagnoses"]]
