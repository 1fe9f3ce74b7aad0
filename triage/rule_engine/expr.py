"""A small, safe expression language for rule conditions, figures and message templates.

Expressions are parsed once (lark's standalone LALR parser, `expr_parser.py`, generated from
`expr.lark`) when a rule pack loads, kept as plain nested tuples (what the rules cache pickles)
and compiled to one closure per node on first use, then evaluated against a
context of plain data: events (msgspec Structs, dataclasses or pydantic models; only their declared fields are
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
from collections.abc import Callable, Mapping
from dataclasses import fields, is_dataclass
from functools import cache, lru_cache
from typing import Any

from msgspec import Struct, field

from triage.errors import ExpressionError
from triage.rule_engine.functions import FUNCTIONS
from triage.rule_engine.op_budget import Budget
from triage.rule_engine.op_budget import walk_cost as _walk_cost
from triage.units import GiB, KiB, MiB

UNITS = {"GiB": GiB, "MiB": MiB, "KiB": KiB, "bytes": 1}
MAX_EXPR_CHARS = 2000
MAX_EXPR_DEPTH = 60
MAX_MAGNITUDE = 1e30


@lru_cache(maxsize=1)
def _parser() -> Any:
    """The standalone parser (imported only when a pack is compiled, not on a cached start)."""
    from triage.rule_engine.expr_parser import Lark_StandAlone

    return Lark_StandAlone()


class Trace(Struct):
    """What an evaluation read: the source lines of events and facts, in first-read order;
    and the budget it spends from (none: unbounded, for tests and `rules check`)."""

    lines: dict[int, None] = field(default_factory=dict)
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


# An expression's tree as plain data: ("tree", rule, children) and ("tok", terminal, text); an
# optional part the text left out is None. Pickled as is by the rules cache.
Node = tuple


class Expr:
    """A compiled expression: the source text, its tree (plain tuples) and, once evaluated, its closure."""

    __slots__ = ("_fn", "node", "source")

    def __init__(self, source: str, node: Node) -> None:
        self.source = source
        self.node = node
        self._fn: Callable[[_Run], Any] | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        return (Expr, (self.source, self.node))

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not Expr:
            return NotImplemented
        return self.source == other.source and self.node == other.node

    def __hash__(self) -> int:
        return hash(self.source)

    def __repr__(self) -> str:
        return f"Expr(source={self.source!r}, node={self.node!r})"

    def compiled(self) -> Callable[[_Run], Any]:
        """The closure, made once (a run evaluates a tenth of the rules' expressions: the
        cached ones are compiled on their first evaluation)."""
        fn = self._fn
        if fn is None:
            fn = self._fn = _compile(self.node)
        return fn

    def evaluate(self, context: Mapping[str, Any], trace: Trace | None = None) -> Any:
        return self.compiled()(_Run(context, trace or Trace()))

    def names(self) -> set[str]:
        """Root names this expression reads (for validation of rule packs)."""
        out, stack = set(), [self.node]
        while stack:
            node = stack.pop()
            if node is not None and node[0] == "tree":
                if node[1] == "path":
                    out.add(node[2][0][2])
                stack.extend(node[2])
        return out


class PackFigure:
    """A pack-level figure in one startup attempt's context: evaluated on its first read (by any
    rule of its pack), then its value, or the error it raised, and the log lines it read are
    kept; every later read cites the same lines, as if the expression were written in place."""

    __slots__ = ("ctx", "error", "expr", "lines", "state", "value")

    def __init__(self, expr: Expr, ctx: Mapping[str, Any]) -> None:
        self.expr, self.ctx = expr, ctx  # ctx: the attempt's names (no `event`) and the pack's figures
        self.state = 0  # 0 not read, 1 being read, 2 read
        self.value: Any = None
        self.error: ExpressionError | None = None
        self.lines: tuple[int, ...] = ()

    def read(self, r: _Run) -> Any:
        if self.state == 1:  # the loader refuses cycles; a hand-made context must not loop either
            raise ExpressionError(f"figure {self.expr.source!r} reads itself")
        if self.state == 0:
            self.state = 1
            trace = Trace(budget=r.budget)
            try:
                self.value = self.expr.compiled()(_Run(self.ctx, trace))
            except ExpressionError as exc:
                self.error = exc
            self.lines, self.state = tuple(trace.lines), 2
        for line in self.lines:
            r.trace.saw(line)
        if self.error is not None:
            raise self.error
        return self.value


def compile_expr(source: object) -> Expr:
    """Parse once; raise ExpressionError with the column on a syntax error."""
    from triage.parse.lark_runtime import LarkError

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
    node = _plain(tree)
    if node is None:  # the grammar always gives a tree or a token
        raise ExpressionError(f"cannot parse expression {text!r}")
    expr = Expr(text, node)
    expr.compiled()  # at pack load: a node the evaluator does not know is refused here
    return expr


def _plain(node: Any) -> Node | None:
    """lark's tree as plain tuples (depth already bounded by `_check_tree`)."""
    from triage.parse.lark_runtime import Token, Tree

    if isinstance(node, Tree):
        return ("tree", str(node.data), tuple(_plain(c) for c in node.children))
    if isinstance(node, Token):
        return ("tok", node.type, str(node))
    return None


def _check_tree(tree: Any) -> None:
    """Refuse at load time what would fail at run time: unknown calls, private names, literals
    out of range, nesting deeper than the evaluator goes (`rules check` then names the rule)."""
    from triage.parse.lark_runtime import Token, Tree

    if not isinstance(tree, Tree):
        return
    stack = [(tree, 0)]
    while stack:  # iterative: a hostile expression must not exhaust Python's own stack
        node, depth = stack.pop()
        if depth >= MAX_EXPR_DEPTH:
            raise ExpressionError(f"expression nests more than {MAX_EXPR_DEPTH} levels deep")
        stack.extend((c, depth + 1) for c in node.children if isinstance(c, Tree))
        for tok in node.children:
            if isinstance(tok, Token) and tok.type == "NUMBER":
                _number(str(tok))
        if node.data == "path" and any(str(c).startswith("_") for c in node.children):
            raise ExpressionError("names starting with '_' are not data fields")
        if node.data == "call" and str(node.children[0]) not in FUNCTIONS:
            raise ExpressionError(
                f"unknown function {node.children[0]!s}(); must be one of: {', '.join(sorted(FUNCTIONS))}"
            )


class _Run:
    """One evaluation: the context, what it read (the trace) and the budget it spends from."""

    __slots__ = ("budget", "ctx", "trace")

    def __init__(self, ctx: Mapping[str, Any], trace: Trace) -> None:
        self.ctx, self.trace, self.budget = ctx, trace, trace.budget


Fn = Callable[[_Run], Any]


def _compile(node: Node) -> Fn:
    """One closure per node. Each spends one operation when called, as each node evaluated
    always has (`in` and function calls also spend for what they walk)."""
    if node[0] == "tok":
        return _token(node)
    make = _MAKERS.get(node[1])
    if make is None:
        raise ExpressionError(f"unsupported expression node {node[1]}")
    body = make(node[2])

    def spend(r: _Run) -> Any:
        if r.budget is not None:
            r.budget.spend()
        return body(r)

    return spend


def _token(node: Node) -> Fn:
    if node[1] != "NUMBER":
        raise ExpressionError(f"unexpected token {node[2]}")
    value = _number(node[2])

    def number(r: _Run) -> Any:
        if r.budget is not None:
            r.budget.spend()
        return value

    return number


def _constant(value: Any) -> Fn:
    return lambda r: value


def _number_node(ch: tuple) -> Fn:
    value = _number(ch[0][2])
    return _constant(value * UNITS[ch[1][2]] if len(ch) > 1 and ch[1] is not None else value)


def _fns(ch: tuple) -> list[Fn]:
    return [_compile(c) for c in ch if c is not None]


def _list_node(ch: tuple) -> Fn:
    fns = _fns(ch)
    return lambda r: [f(r) for f in fns]


def _conditional(ch: tuple) -> Fn:
    then, test, other = _fns(ch)
    return lambda r: then(r) if _truthy(test(r)) else other(r)


def _or_node(ch: tuple) -> Fn:
    fns = _fns(ch)
    return lambda r: any(_truthy(f(r)) for f in fns)


def _and_node(ch: tuple) -> Fn:
    fns = _fns(ch)
    return lambda r: all(_truthy(f(r)) for f in fns)


def _not_node(ch: tuple) -> Fn:
    (f,) = _fns(ch)
    return lambda r: not _truthy(f(r))


def _neg(ch: tuple) -> Fn:
    (f,) = _fns(ch)

    def neg(r: _Run) -> Any:
        v = f(r)
        return None if v is None else _bounded(-_numeric(v))

    return neg


def _compare_node(ch: tuple) -> Fn:
    first = _compile(ch[0])
    steps = [(re.sub(r"\s+", " ", ch[i][2]), _compile(ch[i + 1])) for i in range(1, len(ch), 2)]

    def compare(r: _Run) -> bool:
        left = first(r)
        for op, f in steps:
            right = f(r)
            if r.budget is not None and op.endswith("in"):
                r.budget.spend(_walk_cost(right))
            if not _compare(op, left, right):
                return False
            left = right
        return True

    return compare


def _arith_node(ch: tuple) -> Fn:
    first = _compile(ch[0])
    steps = [(ch[i][2], _compile(ch[i + 1])) for i in range(1, len(ch), 2)]

    def arith(r: _Run) -> Any:
        acc = first(r)
        for op, f in steps:
            right = f(r)
            if acc is None or right is None:
                return None
            acc = _bounded(_arith(op, _numeric(acc), _numeric(right)))
            if acc is None:
                return None
        return acc

    return arith


def _call_node(ch: tuple) -> Fn:
    name = ch[0][2]
    args = _fns(ch[1:])
    function = FUNCTIONS[name]

    def call(r: _Run) -> Any:
        values = [f(r) for f in args]
        if r.budget is not None:
            r.budget.spend(sum(_walk_cost(a) for a in values))
        try:
            return function(*values)
        except TypeError:
            raise ExpressionError(f"wrong number of arguments to {name}()") from None
        except (ValueError, ArithmeticError, IndexError, KeyError, AttributeError):
            return None  # a function given data it cannot use yields none, like missing data

    return call


def _path_node(ch: tuple) -> Fn:
    root, rest = ch[0][2], [c[2] for c in ch[1:]]

    def path(r: _Run) -> Any:
        if root not in r.ctx:
            known = ", ".join(sorted(n for n in r.ctx if not n.startswith("_")))
            raise ExpressionError(f"unknown name {root!r}; must be one of: {known}")
        value = r.ctx[root]
        if value.__class__ is PackFigure:
            value = value.read(r)
        for name in rest:
            if value is None:
                return None
            value = _field(value, name, r.trace)
        if _record_fields(value) is not None:
            r.trace.saw(getattr(value, "line", None))
        return value

    return path


def _field(value: Any, name: str, trace: Trace) -> Any:
    if isinstance(value, FactView):
        return value.get(name, trace)
    declared = _record_fields(value)
    if declared is not None:
        if name not in declared:
            raise ExpressionError(f"{type(value).__name__} has no field {name!r}")
        trace.saw(getattr(value, "line", None))
        return getattr(value, name)
    if isinstance(value, Mapping):
        return value.get(name)
    raise ExpressionError(f"cannot read .{name} of a {type(value).__name__}")


_MAKERS: dict[str, Callable[[tuple], Fn]] = {
    "number": _number_node,
    "string": lambda ch: _constant(ch[0][2][1:-1]),
    "true": lambda ch: _constant(True),
    "false": lambda ch: _constant(False),
    "none": lambda ch: _constant(None),
    "list_": _list_node,
    "conditional": _conditional,
    "or_": _or_node,
    "and_": _and_node,
    "not_": _not_node,
    "neg": _neg,
    "compare": _compare_node,
    "arith": _arith_node,
    "call": _call_node,
    "path": _path_node,
}


def _record_fields(value: Any) -> Any:
    """The declared field names of an event (a Struct), a dataclass or a pydantic model; None for other values."""
    pydantic = sys.modules.get("pydantic")  # no model exists before pydantic is imported:
    if pydantic is not None and isinstance(value, pydantic.BaseModel):  # evaluating never imports it
        return type(value).model_fields
    if isinstance(value, Struct):  # an event, the failure
        return _dataclass_fields(type(value))
    if is_dataclass(value) and not isinstance(value, type):
        return _dataclass_fields(type(value))
    return None


@cache
def _dataclass_fields(cls: type) -> frozenset[str]:
    """Its data fields, and its `kind` (a class attribute of events, readable as before)."""
    names = cls.__struct_fields__ if issubclass(cls, Struct) else (f.name for f in fields(cls))  # type: ignore[arg-type]
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
