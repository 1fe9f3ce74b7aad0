"""Rule packs are untrusted: hostile YAML and hostile expressions end in clean, located errors.

A pack may come from anyone (`--rules DIR`). The loader refuses YAML that builds objects,
aliases, duplicate keys, deep nesting and oversized files; every expression and template is
compiled at load time, so what would fail at run time (numbers out of range, nesting deeper
than the evaluator goes, unknown functions, private names) is a `rules check` error naming
the file, the line and the rule. Rules cannot run a regex, so a pack cannot bring a ReDoS.
The expression language reaches data fields only, never Python objects.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from triage.apps.cli import main
from triage.errors import ExpressionError, RulePackError
from triage.model import events as ev
from triage.rule_engine.expr import MAX_EXPR_DEPTH, FactView, compile_expr
from triage.rule_engine.functions import FUNCTIONS
from triage.rule_engine.load import load_packs, load_taxonomy
from triage.rule_engine.template import compile_template
from triage.timeline.facts import Fact

CAUSES = set(load_taxonomy())
HEAD = "schema: 1\nrules:\n"


def rule(rid: str = "r-one", **extra: str) -> str:
    body = "".join(f"    {k}: {v}\n" for k, v in extra.items())
    return f"  - id: {rid}\n    cause: kv_cache_insufficient\n    title: t\n{body}"


def pack(tmp_path: Path, text: str | bytes, name: str = "pack.yaml") -> Path:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


def problems(tmp_path: Path, text: str | bytes) -> list[str]:
    """The problems of one pack; loading must end in RulePackError and nothing else (a YAML
    bomb is refused by the byte and depth caps before it expands: no clock needed)."""
    path = pack(tmp_path, text)
    with pytest.raises(RulePackError) as info:
        load_packs([path], CAUSES)
    found = [str(p) for p in info.value.problems]  # as the CLI prints them
    assert found and all(p.path == str(path) for p in info.value.problems)
    return found


def check(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


# ---- YAML --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "schema: 1\nrules: !!python/object/apply:os.system ['echo pwned']\n",
        "schema: 1\nrules: !!python/object/new:subprocess.Popen [['id']]\n",
        "schema: 1\nrules: !!python/name:os.system\n",
        "schema: 1\nrules: !!python/module:os\n",
        "schema: 1\nrules: !shell 'rm -rf /'\n",
        "%TAG !e! tag:example.com,2000:\n---\nschema: 1\nrules: !e!thing x\n",
    ],
    ids=["apply", "new", "name", "module", "local-tag", "tag-directive"],
)
def test_tags_that_build_objects_are_refused(tmp_path, text):
    found = problems(tmp_path, text)
    assert any("not allowed" in p or "could not determine" in p for p in found), found


def test_a_billion_laughs_is_refused_at_the_first_alias(tmp_path):
    lol = ["schema: 1", 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 9):
        prev, cur = chr(ord("a") + i - 1), chr(ord("a") + i)
        lol.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    found = problems(tmp_path, "\n".join(lol) + "\nrules: []\n")
    assert "aliases" in found[0] and "pack.yaml:3" in found[0]


@pytest.mark.parametrize(
    "text, line",
    [
        ("schema: 1\nschema: 1\nrules: []\n", 2),
        (HEAD + rule() + "    title: again\n", 6),
        (HEAD + rule(figures="{a: '1', a: '2'}"), 6),
    ],
)
def test_duplicate_keys_are_refused_with_their_line(tmp_path, text, line):
    found = problems(tmp_path, text)
    assert "duplicate key" in found[0] and f"pack.yaml:{line}" in found[0]


@pytest.mark.parametrize(
    "text",
    [
        HEAD + "  - " + "[" * 5000 + "]" * 5000 + "\n",
        HEAD + "  - " + "{a: " * 3000 + "1" + "}" * 3000 + "\n",
        HEAD + "".join("  " * i + "- \n" for i in range(1, 200)),
        HEAD + "".join("  " * i + f"k{i}:\n" for i in range(1, 200)),
    ],
    ids=["flow-lists", "flow-maps", "block-lists", "block-maps"],
)
def test_deep_nesting_is_a_clean_error_not_a_recursion_error(tmp_path, text):
    found = problems(tmp_path, text)
    assert any("nested more than" in p for p in found), found


@pytest.mark.parametrize(
    "text, words",
    [
        (HEAD + "# " + "x" * (1 << 20) + "\n", "larger than"),
        ("schema: 1" + "0" * 5000 + "\nrules: []\n", "cannot read rule pack"),
        (b"schema: 1\nrules: [\xff\xfe]\n", "cannot read rule pack"),
        ("schema: 1\x00\nrules: []\n", "unacceptable character"),
        ("", "empty rule pack"),
        ("- just\n- a list\n", "valid dictionary"),
        ("schema: 1\nrules: []\n---\nschema: 1\n", "another document"),
        (HEAD + "  - {? [a, b] : 1}\n", "plain value"),
        (HEAD + "  - <<: {id: x}\n    cause: kv_cache_insufficient\n", "merge"),
        ("schema: 1e309\nrules: []\n", "valid integer"),
    ],
    ids=[
        "oversized",
        "int-5000-digits",
        "not-utf8",
        "nul",
        "empty",
        "list",
        "two-docs",
        "list-key",
        "merge-key",
        "float-schema",
    ],
)
def test_malformed_packs_are_one_located_problem(tmp_path, text, words):
    found = problems(tmp_path, text)
    assert any(words in p for p in found), found
    assert all("\n" not in p or "unacceptable" in p for p in found)


def test_a_huge_string_is_bounded_by_the_pack_size(tmp_path):
    rules = load_packs([pack(tmp_path, HEAD + rule(docs="'" + "x" * 900_000 + "'"))], CAUSES)
    assert len(rules[0].docs) == 900_000
    assert "larger than" in problems(tmp_path, HEAD + rule(docs="'" + "x" * (1 << 20) + "'"))[0]


# ---- expressions in packs ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "expr, words",
    [
        ("'" + "(" * 1000 + "1" + ")" * 1000 + "'", "longer than"),
        ("'" + "abs(" * 300 + "1" + ")" * 300 + "'", "nests more than"),
        ("'" + "-" * 1500 + "1'", "nests more than"),
        ("'" + "not " * 400 + "true'", "nests more than"),
        ("'" + "[" * 600 + "]" * 600 + "'", "nests more than"),
        ("'" + "1 + " * 1000 + "1'", "longer than"),
        ("1e309", "out of range"),
        ("'2e308 GiB'", "out of range"),
        ("'" + "9" * 400 + "'", "out of range"),
        ("'1 +'", "cannot parse"),
        ("'eval(1)'", "unknown function"),
        ("'event.__class__'", "'_'"),
        (".inf", "out of range"),
        (".nan", "out of range"),
        ("'facts.gpu_total_bytes * bogus'", "unknown name 'bogus'"),
    ],
    ids=[
        "1000-parens",
        "300-calls",
        "1500-minus",
        "400-not",
        "600-lists",
        "long-sum",
        "1e309",
        "2e308-gib",
        "400-digits",
        "syntax",
        "eval",
        "dunder",
        "yaml-inf",
        "yaml-nan",
        "unknown-name",
    ],
)
def test_hostile_expressions_are_located_load_errors(tmp_path, expr, words):
    found = problems(tmp_path, HEAD + rule(rank=expr))
    assert len(found) == 1 and words in found[0], found
    assert re.search(r"pack\.yaml:6: rule 'r-one': rank: ", found[0]), found[0]  # the line of `rank:`


def test_thousands_of_placeholders_are_refused(tmp_path):
    found = problems(tmp_path, HEAD + rule(explanation="'" + "{event.line}" * 5000 + "'"))
    assert "placeholders" in found[0] and "rule 'r-one'" in found[0]


def test_unknown_filter_and_field_names(tmp_path):
    found = problems(
        tmp_path, HEAD + rule(explanation="'{event.line|exec}'", figures="{Bad-Name: '1', ok: 'x.__dict__'}")
    )
    joined = "\n".join(found)
    assert "unknown filter |exec" in joined and "snake_case" in joined and "'_'" in joined


def test_every_problem_of_every_pack_at_once_with_file_line_and_rule(tmp_path):
    a = pack(
        tmp_path,
        HEAD + rule("bad-one", rank="'1 +'") + rule("bad-two", confidence="1e309") + rule("bad-three", colour="red"),
        "a.yaml",
    )
    pack(
        tmp_path,
        HEAD + rule("bad-four", figures="{x: 'open(1)'}") + rule("bad-five", rank="'" + "-" * 100 + "1'"),
        "b.yaml",
    )
    code, out, err = check(["rules", "check", str(tmp_path)])
    assert code == 2 and out == ""
    lines = err.splitlines()
    assert len(lines) == 5 and all(line.startswith("vllm-triage: ") for line in lines)
    # each at the line of the field at fault (the rules start at lines 3, 7 and 11)
    expected = {
        "bad-one": ("a.yaml:6", "rank"),
        "bad-two": ("a.yaml:10", "confidence"),
        "bad-three": ("a.yaml:14", "colour"),
        "bad-four": ("b.yaml:6", "figures.x"),
        "bad-five": ("b.yaml:10", "rank"),
    }
    for rid, (where, field) in expected.items():
        assert any(f"{where}: rule '{rid}': {field}: " in line for line in lines), (rid, err)
    assert str(a) in err


def test_a_problem_is_a_located_object_pointing_at_the_field(tmp_path):
    """Path, line, rule id and field are data (an editor or a test can use them), not only words."""
    text = (
        HEAD
        + rule("good-one")
        + rule("bad-one", figures="")
        + "      ok: 'facts.gpu_total_bytes'\n"
        + "      bad: 'open(1)'\n"
        + "    remedies:\n      - text: t\n        flags:\n          --x: '{1 +}'\n"
    )
    path = pack(tmp_path, text)
    with pytest.raises(RulePackError) as info:
        load_packs([path], CAUSES)
    found = info.value.problems
    assert [(p.path, p.line, p.rule, p.field) for p in found] == [
        (str(path), 11, "bad-one", "figures.bad"),
        (str(path), 15, "bad-one", "remedies[0].flags.--x"),
    ]
    assert "unknown function" in found[0].message
    assert str(found[0]) == f"{path}:11: rule 'bad-one': figures.bad: {found[0].message}"


def test_yaml_and_pack_problems_have_no_rule(tmp_path):
    path = pack(tmp_path, "schema: 2\nrules: []\n")
    with pytest.raises(RulePackError) as info:
        load_packs([path], CAUSES)
    (problem,) = info.value.problems
    assert (problem.line, problem.rule, problem.field) == (1, None, None)
    assert str(problem) == f"{path}:1: schema 2 is not supported (this tool reads schema 1)"


def test_a_hostile_pack_through_the_triage_command(tmp_path):
    log = tmp_path / "x.log"
    log.write_text("INFO hello\n")
    bad = pack(tmp_path, "schema: 1\nrules: !!python/object/apply:os.system ['echo pwned']\n")
    code, out, err = check([str(log), "--rules", str(bad)])
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert "pwned" not in out


def test_rules_can_hold_no_regex():
    """There is no regex function or match operator: a pack cannot bring a ReDoS."""
    assert not {"match", "search", "regex", "re", "sub", "fullmatch", "findall"} & set(FUNCTIONS)
    for source in ("failure.message ~ 'a+'", "failure.message =~ 'x'", "match('(a+)+$', failure.message)"):
        with pytest.raises(ExpressionError):
            compile_expr(source)


# ---- the expression sandbox --------------------------------------------------------------------


def _context():
    event = ev.TorchOom(line=3, origin="", device="CUDA", requested=1 << 30)
    facts = FactView({"gpu_total_bytes": Fact(80 << 30, 2)})
    return {
        "event": event,
        "facts": facts,
        "failure": None,
        "seen": ["torch_oom"],
        "attempt": {"index": 0, "count": 1},
        "oom": event,
        "other_causes": [],
    }


DATA = (type(None), bool, int, float, str, list, tuple, dict, ev.Event)


@pytest.mark.parametrize(
    "source",
    [
        "event.model_fields",
        "event.mro",
        "event.model_dump",
        "event.model_config",
        "event.copy",
        "event.json",
        "event.dict",
        "event.schema",
        "oom.model_validate",
        "facts.get",
        "facts.items",
        "facts._facts",
        "seen.append",
        "seen.pop",
        "attempt.keys",
        "attempt.items",
        "attempt.get",
        "event.line.real",
        "event.device.upper",
        "event.requested.bit_length",
        "seen.__class__",
        "event.__class__.__mro__",
        "event.__globals__",
        "event.__init__.__globals__",
        "attempt.__class__",
        "facts.__dict__",
        "_x",
        "__builtins__",
        "__import__",
        "event.__reduce__",
        "event.role",
        "event.facts",
        "event.states_cause",
        "event.add_facts",
        "event.content",
        "event.describe",
        "event.__slots__",
        "event.__dataclass_fields__",
        "event.__struct_fields__",
    ],
)
def test_attribute_names_reach_data_only(source):
    try:
        value = compile_expr(source).evaluate(_context())
    except ExpressionError:
        return
    assert isinstance(value, DATA) and not callable(value), (source, value)


@pytest.mark.parametrize(
    "name",
    [
        "eval",
        "exec",
        "open",
        "__import__",
        "getattr",
        "setattr",
        "type",
        "compile",
        "globals",
        "vars",
        "dir",
        "print",
        "input",
        "breakpoint",
        "object",
        "system",
    ],
)
def test_calls_outside_the_table_are_refused(name):
    with pytest.raises(ExpressionError, match="unknown function"):
        compile_expr(f"{name}(1)")


def test_call_syntax_only_on_names():
    for source in ("event.line(1)", "(min)(1)", "[min][0](1)", "'abc'.upper()", "min.__call__(1)"):
        with pytest.raises(ExpressionError):
            compile_expr(source)


def test_nesting_is_checked_once_at_load_not_at_each_evaluation():
    deep = "-" * (MAX_EXPR_DEPTH - 2) + "1"
    assert compile_expr(deep).evaluate({}) in (1, -1)
    with pytest.raises(ExpressionError, match="nests more than"):
        compile_expr("-" * (MAX_EXPR_DEPTH + 1) + "1")


def test_templates_refuse_what_expressions_refuse():
    for text in ("{eval(1)}", "{event.__class__}", "{1e309}", "{x|nope}", "{" + "-" * 100 + "1}"):
        with pytest.raises(ExpressionError):
            compile_template(text)
    assert isinstance(compile_template("{{not a placeholder").render({}), str)
