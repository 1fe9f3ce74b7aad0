"""The fixed table of functions a rule expression may call (`FUNCTIONS`): each takes plain
data, and missing data (None) or a bad argument gives None rather than an error, so a rule
whose figures are not in the log simply does not fire."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from triage.units import GiB, round_down, round_up

MAX_ROUND_DIGITS = 40  # round(x, -10**9) would build 10**(10**9): a hostile pack's hang


def _none_safe(fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapped(*args: Any) -> Any:
        if any(a is None for a in args):
            return None
        try:
            return fn(*args)
        except (ValueError, TypeError, ArithmeticError, OverflowError):
            return None

    return wrapped


def _min(*args: Any) -> Any:
    vals = [a for a in _flatten(args) if a is not None]
    return min(vals) if vals else None


def _max(*args: Any) -> Any:
    vals = [a for a in _flatten(args) if a is not None]
    return max(vals) if vals else None


def _flatten(args: tuple) -> list:
    out: list = []
    for a in args:
        out.extend(a if isinstance(a, (list, tuple)) else [a])
    return out


def _coalesce(*args: Any) -> Any:
    return next((a for a in args if a is not None), None)


def _sum(values: Any) -> Any:
    if values is None:
        return None
    vals = [v if not isinstance(v, Mapping) else v.get("bytes") for v in values]
    vals = [v for v in vals if isinstance(v, (int, float))]
    return sum(vals)


def _divisors(n: Any, limit: Any = None) -> Any:
    if not isinstance(n, int) or isinstance(n, bool) or not 0 < n <= 1_000_000:
        return None
    top = n if limit is None else min(n, int(limit))
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]  # O(sqrt n), not O(n)
    found = sorted({*small, *(n // d for d in small)})
    return [d for d in found if d <= top]


def _version_tuple(v: Any) -> tuple[int, ...] | None:
    if not isinstance(v, str):
        return None
    m = re.match(r"v?(\d+(?:\.\d+){0,3})", v.strip())
    return tuple(int(x) for x in m.group(1).split(".")) if m else None


def _version_at_least(v: Any, floor: Any) -> bool | None:
    """None when the version is unknown, so `not version_at_least(...)` keeps a remedy on."""
    have, want = _version_tuple(v), _version_tuple(floor)
    if have is None or want is None:
        return None
    return have >= want


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "min": _min,
    "max": _max,
    "abs": _none_safe(abs),
    "floor": _none_safe(lambda x: math.floor(x)),
    "ceil": _none_safe(lambda x: math.ceil(x)),
    "int": _none_safe(lambda x: int(x)),
    "round": _none_safe(lambda x, n=0: round(x, max(-MAX_ROUND_DIGITS, min(MAX_ROUND_DIGITS, int(n))))),
    "round_down": _none_safe(round_down),
    "round_up": _none_safe(round_up),
    "clamp": _none_safe(lambda x, lo, hi: max(lo, min(hi, x))),
    "exists": lambda x: x is not None,
    "coalesce": _coalesce,
    "len": _none_safe(len),
    "sum": _sum,
    "gib": _none_safe(lambda x: x / GiB),
    "divisors": _divisors,
    "version_at_least": _version_at_least,
    "last": lambda xs: xs[-1] if isinstance(xs, (list, tuple)) and xs else None,
}


# What each function does, as docs/rule-expressions.md lists it (scripts/gen_docs.py writes
# that section from this table; tests/rule_engine/test_rule_docs.py keeps the two in step).
FUNCTION_DOCS: dict[str, str] = {
    "min": "`min(a, b, ...)` or `min(list)`: the smallest value; none values are skipped; none if nothing is left.",
    "max": "`max(a, b, ...)` or `max(list)`: the largest value; none values are skipped; none if nothing is left.",
    "abs": "`abs(x)`: the absolute value.",
    "floor": "`floor(x)`: the largest whole number not above x.",
    "ceil": "`ceil(x)`: the smallest whole number not below x.",
    "int": "`int(x)`: x as a whole number, cut toward zero (`int('12')` reads a number from text).",
    "round": "`round(x, n=0)`: x rounded to n decimals (n from -40 to 40; negative n rounds to tens, hundreds...).",
    "round_down": "`round_down(x, step)`: the largest multiple of step not above x (a flag value that must fit).",
    "round_up": "`round_up(x, step)`: the smallest multiple of step not below x.",
    "clamp": "`clamp(x, lo, hi)`: x held between lo and hi.",
    "exists": "`exists(x)`: true when x is not none.",
    "coalesce": "`coalesce(a, b, ...)`: the first argument that is not none.",
    "len": "`len(x)`: the number of items of a list or characters of a text.",
    "sum": "`sum(list)`: the sum of its numbers (of each item's `bytes`, for a list of processes); "
    "other items are skipped.",
    "gib": "`gib(bytes)`: bytes as a number of GiB (2**30), e.g. `gib(x) > 70`.",
    "divisors": "`divisors(n, limit=none)`: the divisors of a whole number n (1 to 1 000 000) in order, "
    "those above limit left out.",
    "version_at_least": "`version_at_least(version, floor)`: whether a version text ('0.10.1', 'v0.9') is at least "
    "floor; none when either cannot be read, so `not version_at_least(...)` keeps a remedy on.",
    "last": "`last(list)`: the last item, none for an empty list.",
}
