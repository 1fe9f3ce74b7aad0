"""Token readers shared by the transformer's mixins: a figure as printed, as a number."""

from __future__ import annotations

from lark import Token


def num(tok: Token | str) -> float:
    """A decimal figure (`0.90`, `12.5`)."""
    return float(str(tok))


def whole(tok: Token | str) -> int:
    """A whole number, thousands separators allowed (`1,024`)."""
    return int(str(tok).replace(",", ""))
