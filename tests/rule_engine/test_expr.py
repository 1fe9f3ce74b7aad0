"""The rule expression language: semantics, none-propagation, evidence tracing, safety."""

import pytest

from triage.errors import ExpressionError
from triage.rule_engine.expr import FactView, Trace, compile_expr
from triage.rule_engine.template import compile_template
from triage.timeline.facts import Fact

CTX = {
    "facts": FactView({"total": Fact(80 * 2**30, 12), "util": Fact(0.9, 3), "missing": Fact(None, 0)}),
    "seen": ["torch_oom", "kv_needed"],
    "event": None,
}


def ev(text, ctx=CTX):
    trace = Trace()
    return compile_expr(text).evaluate(ctx, trace), list(trace.lines)


@pytest.mark.parametrize(
    "text,value",
    [
        ("1 + 2 * 3", 7),
        ("10 - 2 - 3", 5),
        ("7 // 2", 3),
        ("7 % 4", 3),
        ("-(2 + 1)", -3),
        ("2 GiB", 2 * 2**30),
        ("512 MiB + 512 MiB == 1 GiB", True),
        ("1 < 2 and 2 < 3", True),
        ("not (1 < 2)", False),
        ("1 if 2 > 1 else 0", 1),
        ("'torch_oom' in seen", True),
        ("'x' not in seen", True),
        ("min(3, none, 1)", 1),
        ("max([1, 5, 2])", 5),
        ("coalesce(none, 4)", 4),
        ("round_down(22537.5, 16)", 22528),
        ("round_up(0.9212, 0.01)", 0.93),
        ("floor(2.7)", 2),
        ("ceil(2.1)", 3),
        ("clamp(5, 0, 3)", 3),
        ("exists(none)", False),
        ("1 / 0", None),
        ("none + 1", None),
        ("none > 1", False),
        ("none == none", True),
    ],
)
def test_values(text, value):
    assert ev(text)[0] == value


def test_facts_are_traced_to_their_lines():
    value, lines = ev("facts.total * facts.util")
    assert value == pytest.approx(72 * 2**30)
    assert lines == [12, 3]


def test_missing_fact_makes_conditions_false_not_errors():
    assert ev("facts.missing > 3")[0] is False
    assert ev("facts.nope * 2")[0] is None
    assert ev("event.requested > 1")[0] is False  # no event bound: none, not an error


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os')",
        "open('/etc/passwd')",
        "facts.__class__",
        "x = 1",
        "lambda: 1",
        "(1).real",
        "seen[0]",
        "'a' * 10",
    ],
)
def test_unsafe_or_unknown_constructs_are_refused(text):
    with pytest.raises(ExpressionError):
        compile_expr(text).evaluate(CTX, Trace())


def test_unknown_root_name_says_what_exists():
    with pytest.raises(ExpressionError, match="must be one of"):
        ev("nothing.here")


def test_private_model_attributes_are_not_reachable():
    from triage.model.events import TorchOom

    oom = TorchOom(line=5, requested=10)
    with pytest.raises(ExpressionError):
        compile_expr("oom.model_fields").evaluate({"oom": oom}, Trace())
    assert compile_expr("oom.requested").evaluate({"oom": oom}, Trace()) == 10


def test_huge_numbers_are_bounded():
    with pytest.raises(ExpressionError):
        compile_expr("1e400").evaluate(CTX, Trace())
    assert ev("1e29 * 1e29")[0] is None


def test_template_renders_with_filters_and_drops_on_missing():
    t = compile_template("needs {facts.total|gib}, fits {round_down(22537.5, 16)|comma}")
    assert t.render(CTX) == "needs 80.00 GiB, fits 22,528"
    assert compile_template("x {facts.missing|gib}").render(CTX) is None


def test_template_refuses_unknown_filter():
    with pytest.raises(ExpressionError, match="unknown filter"):
        compile_template("{1|shout}")
