"""Rule texts with `{expression|filter}` placeholders (explanations, remedies, flag values):
compiled once with the pack, rendered against a diagnosis's context, None if a value is missing."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from msgspec import Struct

from triage.errors import ExpressionError
from triage.patterns import LazyPattern
from triage.rule_engine.expr import Trace, compile_expr
from triage.units import gib, human, mib

MAX_PLACEHOLDERS = 100  # per template; the built-in packs use at most a handful

_PLACEHOLDER = LazyPattern(r"\{([^{}|]+)(?:\|(\w+))?\}")


def _flag_number(v: Any) -> str:
    if isinstance(v, float) and not v.is_integer():  # thousandths below 0.1 (a small utilization)
        return (f"{v:.3f}" if abs(v) < 0.1 else f"{v:.2f}").rstrip("0").rstrip(".")
    return str(int(v)) if isinstance(v, (int, float)) else str(v)


FILTERS: dict[str, Callable[[Any], str]] = {
    "gib": gib,
    "mib": mib,
    "human": human,
    "int": lambda v: str(int(v)),
    "comma": lambda v: f"{int(v):,}",
    "pct": lambda v: f"{v * 100:.0f}%",
    "x": lambda v: f"{v:.2f}x",
    "fixed2": lambda v: f"{v:.2f}",
    "num": _flag_number,
    "str": str,
    "list": lambda v: ", ".join(str(x) for x in v) if isinstance(v, (list, tuple)) else str(v),
    "pids": lambda v: ", ".join(f"{p['pid']}{' ' + p['name'] if p.get('name') else ''} ({gib(p['bytes'])})" for p in v),
}

# What each `{value|filter}` writes, as docs/rule-expressions.md lists it (scripts/gen_docs.py).
FILTER_DOCS: dict[str, str] = {
    "gib": "bytes in GiB with two decimals: `8.30 GiB`",
    "mib": "bytes in whole MiB: `512 MiB`",
    "human": "bytes in MiB under 1 GiB, else in GiB",
    "int": "a whole number: `12`",
    "comma": "a whole number with thousands separators: `32,768`",
    "pct": "a fraction as a whole percentage: `0.9` gives `90%`",
    "x": "a ratio with two decimals: `1.50x`",
    "fixed2": "a number with two decimals: `0.85`",
    "num": "a number as a flag takes it: whole numbers bare, fractions with two decimals (three below 0.1), "
    "trailing zeros dropped (the default when no filter is given)",
    "str": "the value as text",
    "list": "a list's items joined with `, `",
    "pids": "a list of processes as `1234 python (8.00 GiB), ...`",
}


class Template(Struct, frozen=True):
    """Text with `{expression|filter}` placeholders; renders to None if any value is missing."""

    source: str
    parts: tuple

    def render(self, context: Mapping[str, Any], trace: Trace | None = None) -> str | None:
        out = []
        for part in self.parts:
            if isinstance(part, str):
                out.append(part)
                continue
            expr, filt = part
            value = expr.evaluate(context, trace)
            if value is None:
                return None
            try:
                out.append(FILTERS[filt](value) if filt else _flag_number(value))
            except (TypeError, ValueError, KeyError, IndexError, AttributeError, OverflowError):
                return None
        return "".join(out)


_OPEN_LITERAL, _CLOSE_LITERAL = "\x00L", "\x00R"


def compile_template(source: object) -> Template:
    """`{expr|filter}` placeholders; `{{` and `}}` are literal braces (for JSON flag values)."""
    text = str(source).replace("{{", _OPEN_LITERAL).replace("}}", _CLOSE_LITERAL)
    parts: list = []
    pos = 0
    if len(_PLACEHOLDER.findall(text)) > MAX_PLACEHOLDERS:
        raise ExpressionError(f"more than {MAX_PLACEHOLDERS} placeholders in one text")
    for m in _PLACEHOLDER.finditer(text):
        parts.append(_literal(text[pos : m.start()]))
        filt = m.group(2)
        if filt and filt not in FILTERS:
            raise ExpressionError(f"unknown filter |{filt}; must be one of: {', '.join(sorted(FILTERS))}")
        parts.append((compile_expr(m.group(1)), filt))
        pos = m.end()
    parts.append(_literal(text[pos:]))
    return Template(str(source), tuple(p for p in parts if p != ""))


def _literal(text: str) -> str:
    return text.replace(_OPEN_LITERAL, "{").replace(_CLOSE_LITERAL, "}")
