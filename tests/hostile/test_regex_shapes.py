"""No regex of the package can backtrack exponentially: checked on the patterns, not timed.

Python's `re` backtracks. A repeat inside a repeat (`(\\w+\\s?)*`) can split a run of text
between its iterations in exponentially many ways, and a failing match tries them all.
Every pattern the package keeps (module and class attributes, lists and tables of them,
those compiled on first use, and the terminals of both grammars) is parsed with `re`'s own
parser, and each unbounded repeat whose body holds another unbounded repeat must be
anchored: its body opens or closes with a literal character that none of the inner repeats
can match (`(?:\\.\\w+)*`: each iteration
starts at a dot, so a text splits one way only). Polynomial shapes are measured by
benchmarks/linearity.py; patterns built inside functions are not seen here.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from re import _constants as C
from re import _parser

import pytest

import triage
from triage.patterns import LazyPattern

LARGE = 256  # a bounded repeat this long backtracks like an unbounded one
REPEATS = {C.MAX_REPEAT, C.MIN_REPEAT} | ({C.POSSESSIVE_REPEAT} if hasattr(C, "POSSESSIVE_REPEAT") else set())


def _patterns_of(namespace: dict, where: str, out: dict, depth: int = 0) -> None:
    for name, value in list(namespace.items()):
        values = value if isinstance(value, (list, tuple)) else value.values() if isinstance(value, dict) else [value]
        for item in values:
            if isinstance(item, (re.Pattern, LazyPattern)):  # a lazy one is read without compiling it
                out.setdefault((item.pattern, item.flags), f"{where}.{name}")
            elif isinstance(item, tuple) and depth < 2:  # (pattern, replacement, ...) tables
                _patterns_of({name: list(item)}, where, out, depth + 1)


def package_patterns() -> dict[tuple, str]:
    """(pattern, flags) -> where it is kept, for every compiled pattern the package holds."""
    out: dict[tuple, str] = {}
    for info in pkgutil.walk_packages(triage.__path__, "triage."):
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an extra that is not installed (the server)
            continue
        _patterns_of(vars(module), info.name, out)
        for name, value in list(vars(module).items()):
            if isinstance(value, type) and value.__module__ == info.name:
                _patterns_of(vars(value), f"{info.name}.{name}", out)
    from triage.parse.grammar import grammar
    from triage.rule_engine.expr import _parser as expr_parser

    for lark, label in ((grammar(), "vllm_log.lark"), (expr_parser(), "expr.lark")):
        for terminal in lark.terminals:
            out.setdefault((terminal.pattern.to_regexp(), 0), f"{label} {terminal.name}")
    return out


def _unbounded(av) -> bool:
    return av[1] == C.MAXREPEAT or av[1] >= LARGE


def _char_nodes(tree) -> list:
    """Every node that consumes one character, anywhere in a parsed subpattern."""
    out = []
    for op, av in tree:
        if op in (C.LITERAL, C.NOT_LITERAL, C.ANY, C.IN):
            out.append((op, av))
        elif op in REPEATS:
            out += _char_nodes(av[2])
        elif op == C.SUBPATTERN:
            out += _char_nodes(av[-1])
        elif op == C.BRANCH:
            for branch in av[1]:
                out += _char_nodes(branch)
        elif op in (C.ASSERT, C.ASSERT_NOT):
            out += _char_nodes(av[1])
    return out


def _category(cat, ch: str) -> bool:
    name = str(cat).upper()
    test = (
        ch.isdigit()
        if "DIGIT" in name
        else ch.isspace()
        if "SPACE" in name
        else (ch.isalnum() or ch == "_")
        if "WORD" in name
        else ch == "\n"
        if "LINEBREAK" in name
        else True
    )
    return not test if "NOT" in name else test


def _may_match(node, ch: str) -> bool:
    """Whether a one-character node may match `ch` (unknown cases count as a match)."""
    op, av = node
    if op == C.LITERAL:
        return chr(av) == ch
    if op == C.NOT_LITERAL:
        return chr(av) != ch
    if op == C.ANY:
        return True
    hit, negate = False, False
    for item_op, item in av:
        if item_op == C.NEGATE:
            negate = True
        elif item_op == C.LITERAL:
            hit = hit or chr(item) == ch
        elif item_op == C.RANGE:
            hit = hit or item[0] <= ord(ch) <= item[1]
        elif item_op == C.CATEGORY:
            hit = hit or _category(item, ch)
        else:
            return True
    return hit != negate


def _inner_repeat_nodes(tree) -> list:
    """The one-character nodes of the unbounded repeats inside a repeat's body."""
    out = []
    for op, av in tree:
        if op in REPEATS:
            out += _char_nodes(av[2]) if _unbounded(av) else _inner_repeat_nodes(av[2])
        elif op == C.SUBPATTERN:
            out += _inner_repeat_nodes(av[-1])
        elif op == C.BRANCH:
            for branch in av[1]:
                out += _inner_repeat_nodes(branch)
    return out


def _anchored(body) -> bool:
    """A repeat's body opens or closes with a literal no inner repeat can match."""
    inner = _inner_repeat_nodes(body)
    if not inner:
        return True
    items = list(body)
    while len(items) == 1 and items[0][0] == C.SUBPATTERN:
        items = list(items[0][1][-1])
    ends = [items[0], items[-1]] if items else []
    return any(op == C.LITERAL and not any(_may_match(n, chr(av)) for n in inner) for op, av in ends)


def nested_repeats(pattern: str | bytes, flags: int = 0) -> list[str]:
    """The unanchored repeats-in-repeats of a pattern (empty: none can split a text two ways)."""
    tree = _parser.parse(pattern, flags)
    found: list[str] = []

    def walk(sub) -> None:
        for op, av in sub:
            if op in REPEATS:
                if _unbounded(av) and not _anchored(av[2]):
                    found.append(str(av[2])[:120])
                walk(av[2])
            elif op == C.SUBPATTERN:
                walk(av[-1])
            elif op == C.BRANCH:
                for branch in av[1]:
                    walk(branch)
            elif op in (C.ASSERT, C.ASSERT_NOT):
                walk(av[1])

    walk(tree)
    return found


def test_the_package_keeps_many_patterns():
    assert len(package_patterns()) > 150  # the walk reaches the modules and both grammars


def test_no_pattern_nests_an_unanchored_repeat():
    bad = {where: nested for (p, f), where in package_patterns().items() if (nested := nested_repeats(p, f))}
    assert not bad, f"repeats inside repeats that can split a text many ways: {bad}"


@pytest.mark.parametrize("pattern", [r"(\w+\s?)*$", r"(a+)+b", r"(?:\s*\S+)*:", r"(x|\w+)*!", rb"(?:[^,]+,?)+;"])
def test_the_check_finds_exponential_shapes(pattern):
    assert nested_repeats(pattern)


@pytest.mark.parametrize(
    "pattern", [r"(?:\.\w+)*", r"(?:[A-Za-z_]\w*\.)*x", r"(?:, \w+: \d+)*", r"\w+(?:-\w+)?", r"a*b*"]
)
def test_the_check_passes_anchored_or_flat_repeats(pattern):
    assert not nested_repeats(pattern)
