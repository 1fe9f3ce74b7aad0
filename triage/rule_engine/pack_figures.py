"""A rule pack's named figures (`figures:` beside `rules:`), checked when the pack loads.

A pack figure is an expression its rules read by name; it is evaluated where it is first read
(expr.PackFigure), so the loader refuses what would fail or recurse at run time: a name no
context holds, figures that read each other in a cycle, a chain nesting deeper than one
expression may. Every problem is (the field's path in the pack, one line).
"""

from __future__ import annotations

import re
from typing import Any

from triage.errors import ExpressionError
from triage.rule_engine.expr import MAX_EXPR_DEPTH, Expr, compile_expr

MAX_PACK_FIGURES = 64  # figures read each other: a chain of them nests evaluation that deep
FIGURE_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")
# Words of the expression language: a figure so named could never be read.
KEYWORDS = frozenset({"true", "false", "none", "and", "or", "not", "in", "if", "else"})

Problems = list[tuple[tuple, str]]


def compile_figures(
    given: dict[Any, Any], builtin: frozenset[str], readable: frozenset[str]
) -> tuple[dict[str, Expr], Problems]:
    """The figures compiled, and the problems found: a name that is not snake_case, a word of
    the language or one of `builtin`; an expression that does not compile or reads a name
    neither in `readable` nor a figure; then a cycle, then a chain too deep."""
    if len(given) > MAX_PACK_FIGURES:
        return {}, [(("figures",), f"more than {MAX_PACK_FIGURES} figures in one pack")]
    figures: dict[str, Expr] = {}
    problems: Problems = []
    names = {str(n) for n in given}
    for name, source in given.items():
        why = _bad_name(str(name), builtin)
        try:
            expr = compile_expr(source) if why is None else None
        except ExpressionError as exc:
            why, expr = str(exc), None
        unknown = sorted(expr.names() - readable - names) if expr is not None else []
        if unknown:
            known = ", ".join(sorted(readable))
            why = f"unknown name {unknown[0]!r} (a pack figure reads the pack's figures and {known})"
        if why is not None:
            problems.append((("figures", name), why))
        elif expr is not None:
            figures[str(name)] = expr
    if problems:
        return figures, problems
    cycle = _figure_cycle(figures)
    if cycle:
        return figures, [(("figures", cycle[0]), f"pack figures read each other in a cycle: {' -> '.join(cycle)}")]
    deep = _too_deep(figures)
    if deep:
        message = f"figure {deep!r} nests more than {MAX_EXPR_DEPTH} levels deep with the figures it reads"
        return figures, [(("figures", deep), message)]
    return figures, []


def _bad_name(name: str, builtin: frozenset[str]) -> str | None:
    """Why a pack figure may not be so named, or None."""
    if not FIGURE_NAME.match(name) or name in KEYWORDS:
        return f"a figure name must be snake_case and no word of the language: {name!r}"
    if name in builtin:
        return f"{name!r} is a built-in name; a figure must not hide it ({', '.join(sorted(builtin))})"
    return None


def _figure_cycle(figures: dict[str, Expr]) -> list[str] | None:
    """A cycle among figures that read each other (`a -> b -> a`), or None."""
    state: dict[str, int] = {}  # 1 on the path, 2 done

    def visit(name: str, path: list[str]) -> list[str] | None:
        state[name] = 1
        for other in sorted(figures[name].names() & figures.keys()):
            if state.get(other) == 1:  # on the path: the cycle runs from it back to it
                return [*path[path.index(other) :], other]
            if other not in state and (found := visit(other, [*path, other])):
                return found
        state[name] = 2
        return None

    for name in figures:
        if name not in state and (found := visit(name, [name])):
            return found
    return None


def _too_deep(figures: dict[str, Expr]) -> str | None:
    """A figure that, with the figures it reads evaluated where it reads them, nests deeper
    than one expression may (evaluation recurses that deep), or None. Figures have no cycle."""
    depths: dict[str, int] = {}

    def depth(name: str) -> int:
        if name not in depths:
            deepest, stack = 0, [(figures[name].node, 1)]
            while stack:
                node, at = stack.pop()
                if node is None or node[0] != "tree":
                    continue
                deepest = max(deepest, at)
                if node[1] == "path" and node[2][0][2] in figures:
                    deepest = max(deepest, at + depth(node[2][0][2]))
                stack.extend((child, at + 1) for child in node[2])
            depths[name] = deepest
        return depths[name]

    return next((name for name in figures if depth(name) > MAX_EXPR_DEPTH), None)
