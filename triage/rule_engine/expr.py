"""A small, safe expression language for rule conditions, figures and message templates.

Expressions are parsed once (lark, LALR) when a rule pack loads and evaluated against a
context of plain data: events (dataclasses, or pydantic models; only their declared fields are
reachable), facts, figures and literals. There is no `eval`, no attribute access beyond
data fields, no loops, and every function is from a fixed table. Missing data is `none`
and propagates: arithmetic on none is none, a comparison with none is false, so a rule
whose figures are not in the log simply does not fire. Every event or fact an expression
reads is recorded, which is how a diagnosis knows its evidence lines.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from functools import lru_cache
from typing import Any

from lark import Lark, Token, Tree
from lark.exceptions import LarkError

from triage.rule_engine.op_budget import Budget, walk_cost as _walk_cost
from triage.errors import ExpressionError
from triage.records import Record, default_factory
from triage.rule_engine.functions import FUNCTIONS
from triage.units import GiB, KiB, MiB

UNITS = {"GiB": GiB, "MiB": MiB, "KiB": KiB, "bytes": 1}
MAX_EXPR_CHARS = 2000
MAX_EXPR_DEPTH = 60
MAX_MAGNITUDE = 1e30


@lru_cache(maxsize=1)
def _parser() -> Lark:
    from triage.cache import grammar_cache

    return Lark.open_from_package(__package__, "expr.lark", parser="lalr", cache=grammar_cache(__package__, "expr.lark"))


class Trace(Record, frozen=False, kw_only=False):
    """What an evaluation read: the source lines of events and facts, in first-read order;
    and the budget it spends from (none: unbounded, for tests and `rules check`)."""

    lines: dict[int, None] = default_factory(dict)
    budget: Budget | None = None

    def saw(self, line: int | None) -> None:
        if line:
            self.lines.setdefault(line, None)


class FactView:
    """Read-only access to facts by name; records the line each fact came from."""

    # Facts that shape how a remedy is phrased, not why the failure happened: not evidence.
    CONTEXT_ONLY = frozenset({"vllm_version", "engine", "block_size"})

    def __init__(self, facts: Mapping[str, Any]) -> None:
        self._facts = facts

    def get(self, name: str, trace: Trace) -> Any:
        fact = self._facts.get(name)
        if fact is None:
            return None
        if name not in self.CONTEXT_ONLY:
            trace.saw(getattr(fact, "line", None))
        return fact.value


class Expr:
    """A compiled expression: the source text and its tree.

    Pickled (the rules cache) as nested tuples, and its lark tree rebuilt on first use: a run
    evaluates a tenth of the rules' expressions, and building lark's Tokens and Trees for all
    of them was half of loading the cached rules."""

    __slots__ = ("source", "_tree")

    def __init__(self, source: str, tree: Any) -> None:
        self.source = source
        self._tree = tree

    @property
    def tree(self) -> Any:
        tree = self._tree
        if type(tree) is tuple:  # packed (unpickled): build lark's objects now
            tree = self._tree = _unpack(tree)
        return tree

    def __reduce__(self) -> tuple[Any, ...]:
        return (Expr, (self.source, _pack(self.tree)))

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not Expr:
            return NotImplemented
        return self.source == other.source and self.tree == other.tree

    def __hash__(self) -> int:
        return hash(self.source)

    def __repr__(self) -> str:
        return f"Expr(source={self.source!r}, tree={self.tree!r})"

    def evaluate(self, context: Mapping[str, Any], trace: Trace | None = None) -> Any:
        return _Evaluator(context, trace or Trace()).eval(self.tree, 0)

    def names(self) -> set[str]:
        """Root names this expression reads (for validation of rule packs)."""
        out = set()
        for node in self.tree.iter_subtrees() if isinstance(self.tree, Tree) else []:
            if node.data == "path":
                out.add(str(node.children[0]))
        return out


def _pack(node: Any) -> Any:
    """A lark tree as nested tuples: ("t", data, children) and ("k", <what Token.__reduce__ keeps>)."""
    if isinstance(node, Tree) and node._meta is None:
        return ("t", _pack(node.data), tuple(_pack(c) for c in node.children))
    if isinstance(node, Token):
        return ("k", node.type, node.value, node.start_pos, node.line, node.column)
    return ("v", node)


def _unpack(packed: tuple) -> Any:
    if packed[0] == "t":
        return Tree(_unpack(packed[1]), [_unpack(c) for c in packed[2]])
    if packed[0] == "k":
        return Token(*packed[1:])
    return packed[1]


def compile_expr(source: object) -> Expr:
    """Parse once; raise ExpressionError with the column on a syntax error."""
    if isinstance(source, float) and not math.isfinite(source):  # YAML's .inf and .nan
        raise ExpressionError(f"number out of range: {source}")
    text = str(source).strip() if not isinstance(source, bool) else ("true" if source else "false")
    if len(text) > MAX_EXPR_CHARS:
        raise ExpressionError(f"expression longer than {MAX_EXPR_CHARS} characters")
    if not text:
        raise ExpressionError("empty expression")
    try:
        tree = _parser().parse(text)
    except LarkError as exc:
        column = getattr(exc, "column", "?")
        raise ExpressionError(f"cannot parse expression {text!r} at column {column}") from None
    _check_tree(tree)
    return Expr(text, tree)


def _check_tree(tree: Any) -> None:
    """Refuse at load time what would fail at run time: unknown calls, private names, literals
    out of range, nesting deeper than the evaluator goes (`rules check` then names the rule)."""
    if not isinstance(tree, Tree):
        return
    stack = [(tree, 0)]
    while stack:  # iterative, and first: a hostile expression must not exhaust Python's own stack
        node, depth = stack.pop()
        if depth >= MAX_EXPR_DEPTH:
            raise ExpressionError(f"expression nests more than {MAX_EXPR_DEPTH} levels deep")
        stack.extend((c, depth + 1) for c in node.children if isinstance(c, Tree))
    for tok in tree.scan_values(lambda v: isinstance(v, Token) and v.type == "NUMBER"):
        _number(str(tok))
    for node in tree.iter_subtrees():
        if node.data == "path" and any(str(c).startswith("_") for c in node.children):
            raise ExpressionError("names starting with '_' are not data fields")
        if node.data == "call" and str(node.children[0]) not in FUNCTIONS:
            raise ExpressionError(
                f"unknown function {node.children[0]!s}(); must be one of: {', '.join(sorted(FUNCTIONS))}"
            )


class _Evaluator:
    def __init__(self, context: Mapping[str, Any], trace: Trace) -> None:
        self.ctx = context
        self.trace = trace
        self.budget = trace.budget

    def eval(self, node: Any, depth: int) -> Any:
        if depth > MAX_EXPR_DEPTH:
            raise ExpressionError("expression nests too deeply")
        if self.budget is not None:
            self.budget.spend()
        if isinstance(node, Token):
            return self._token(node)
        method = getattr(self, f"_{node.data}", None)
        if method is None:
            raise ExpressionError(f"unsupported expression node {node.data}")
        return method(node.children, depth + 1)

    def _token(self, tok: Token) -> Any:
        if tok.type == "NUMBER":
            return _number(str(tok))
        raise ExpressionError(f"unexpected token {tok!s}")

    def _number(self, ch: list, depth: int) -> Any:
        value = _number(str(ch[0]))
        return value * UNITS[str(ch[1])] if len(ch) > 1 and ch[1] is not None else value

    def _string(self, ch: list, depth: int) -> str:
        return str(ch[0])[1:-1]

    def _true(self, ch: list, depth: int) -> bool:
        return True

    def _false(self, ch: list, depth: int) -> bool:
        return False

    def _none(self, ch: list, depth: int) -> None:
        return None

    def _list_(self, ch: list, depth: int) -> list:
        return [self.eval(c, depth) for c in ch if c is not None]

    def _conditional(self, ch: list, depth: int) -> Any:
        return self.eval(ch[0], depth) if _truthy(self.eval(ch[1], depth)) else self.eval(ch[2], depth)

    def _or_(self, ch: list, depth: int) -> bool:
        return any(_truthy(self.eval(c, depth)) for c in ch)

    def _and_(self, ch: list, depth: int) -> bool:
        return all(_truthy(self.eval(c, depth)) for c in ch)

    def _not_(self, ch: list, depth: int) -> bool:
        return not _truthy(self.eval(ch[0], depth))

    def _neg(self, ch: list, depth: int) -> Any:
        v = self.eval(ch[0], depth)
        return None if v is None else _bounded(-_numeric(v))

    def _compare(self, ch: list, depth: int) -> bool:
        left = self.eval(ch[0], depth)
        for i in range(1, len(ch), 2):
            op, right = re.sub(r"\s+", " ", str(ch[i])), self.eval(ch[i + 1], depth)
            if self.budget is not None and op.endswith("in"):
                self.budget.spend(_walk_cost(right))
            if not _compare(op, left, right):
                return False
            left = right
        return True

    def _arith(self, ch: list, depth: int) -> Any:
        acc = self.eval(ch[0], depth)
        for i in range(1, len(ch), 2):
            op, right = str(ch[i]), self.eval(ch[i + 1], depth)
            if acc is None or right is None:
                return None
            acc = _bounded(_arith(op, _numeric(acc), _numeric(right)))
            if acc is None:
                return None
        return acc

    def _call(self, ch: list, depth: int) -> Any:
        name = str(ch[0])
        args = [self.eval(c, depth) for c in ch[1:] if c is not None]
        if self.budget is not None:
            self.budget.spend(sum(_walk_cost(a) for a in args))
        try:
            return FUNCTIONS[name](*args)
        except TypeError:
            raise ExpressionError(f"wrong number of arguments to {name}()") from None
        except (ValueError, ArithmeticError, IndexError, KeyError, AttributeError):
            return None  # a function given data it cannot use yields none, like missing data

    def _path(self, ch: list, depth: int) -> Any:
        names = [str(c) for c in ch]
        if names[0] not in self.ctx:
            raise ExpressionError(f"unknown name {names[0]!r}; must be one of: {', '.join(sorted(self.ctx))}")
        value = self.ctx[names[0]]
        for name in names[1:]:
            if value is None:
                return None
            value = self._field(value, name)
        if _record_fields(value) is not None:
            self.trace.saw(getattr(value, "line", None))
        return value

    def _field(self, value: Any, name: str) -> Any:
        if isinstance(value, FactView):
            return value.get(name, self.trace)
        declared = _record_fields(value)
        if declared is not None:
            if name not in declared:
                raise ExpressionError(f"{type(value).__name__} has no field {name!r}")
            self.trace.saw(getattr(value, "line", None))
            return getattr(value, name)
        if isinstance(value, Mapping):
            return value.get(name)
        raise ExpressionError(f"cannot read .{name} of a {type(value).__name__}")


def _record_fields(value: Any) -> Any:
    """The declared field names of an event (a dataclass) or a pydantic model; None for other values."""
    pydantic = sys.modules.get("pydantic")  # no model exists before pydantic is imported:
    if pydantic is not None and isinstance(value, pydantic.BaseModel):  # evaluating never imports it
        return type(value).model_fields
    if isinstance(value, Record):  # an event, the failure: records (`triage.records`)
        return _dataclass_fields(type(value))
    if is_dataclass(value) and not isinstance(value, type):
        return _dataclass_fields(type(value))
    return None


@lru_cache(maxsize=None)
def _dataclass_fields(cls: type) -> frozenset[str]:
    """Its data fields, and its `kind` (a class attribute of events, readable as before)."""
    names = cls._names if issubclass(cls, Record) else (f.name for f in fields(cls))
    return frozenset(names) | ({"kind"} if isinstance(getattr(cls, "kind", None), str) else set())


def _number(text: str) -> int | float:
    value = float(text)
    if not math.isfinite(value) or abs(value) > MAX_MAGNITUDE:
        raise ExpressionError(f"number out of range: {text}")
    return int(value) if value.is_integer() and "." not in text and "e" not in text.lower() else value


def _numeric(v: Any) -> int | float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ExpressionError(f"arithmetic on a non-number: {v!r}")
    return v


def _bounded(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, float) and (not math.isfinite(v) or abs(v) > MAX_MAGNITUDE):
        return None
    if isinstance(v, int) and abs(v) > MAX_MAGNITUDE:
        return None
    return v


def _arith(op: str, a: int | float, b: int | float) -> int | float | None:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if b == 0:
        return None
    if op == "/":
        return a / b
    if op == "//":
        return a // b
    return a % b


def _compare(op: str, a: Any, b: Any) -> bool:
    if op in ("in", "not in"):
        if b is None:
            return False
        try:
            inside = a in b if isinstance(b, (list, tuple, str, set)) else False
        except TypeError:  # `3 in 'abc'`
            inside = False
        return inside if op == "in" else not inside
    if op == "==":
        return a == b
    if op == "!=":
        return a != b
    if a is None or b is None:
        return False
    try:
        return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]
    except TypeError:
        return False


def _truthy(v: Any) -> bool:
    return bool(v) if v is not None else False
