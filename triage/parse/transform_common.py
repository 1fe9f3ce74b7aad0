"""Token readers shared by the transformer's mixins: a figure as printed, as a number; and
the decorator that gives each mixin's methods their children inline."""

from __future__ import annotations

import types
from typing import TypeVar

from triage.parse.lark_runtime import Token, v_args

ClassT = TypeVar("ClassT", bound=type)


def inline_children(cls: ClassT) -> ClassT:
    """`@v_args(inline=True)` on a class, applied to the methods the class itself defines: what
    lark's class decorator does, without its walk over every member of every base (~0.4 ms a
    class at each start). Names starting with `_` are left alone, as lark leaves them."""
    inline = v_args(inline=True)
    for name, value in list(vars(cls).items()):
        if not name.startswith("_") and isinstance(value, types.FunctionType):
            setattr(cls, name, inline(value))
    return cls


def num(tok: Token | str) -> float:
    """A decimal figure (`0.90`, `12.5`)."""
    return float(str(tok))


def whole(tok: Token | str) -> int:
    """A whole number, thousands separators allowed (`1,024`)."""
    return int(str(tok).replace(",", ""))
