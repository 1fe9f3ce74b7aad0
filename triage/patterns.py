"""Regexes compiled on first use.

Compiling a pattern costs 50-400 us; a module of secret shapes or log prefixes holds dozens,
and most runs meet a few of them. A `LazyPattern` is a `re.Pattern` to its callers (the
methods they call, the rest through `__getattr__`) that compiles the first time it is used.
Keep it for patterns a run may well never need: each call pays one Python-level hop.
"""

from __future__ import annotations

import re
from typing import Any


class LazyPattern:
    """`re.compile(source, flags)`, done on the first call."""

    __slots__ = ("_compiled", "flags", "source")

    def __init__(self, source: str, flags: int = 0) -> None:
        self.source, self.flags = source, flags
        self._compiled: re.Pattern[str] | None = None

    @property
    def compiled(self) -> re.Pattern[str]:
        compiled = self._compiled
        if compiled is None:
            compiled = self._compiled = re.compile(self.source, self.flags)
        return compiled

    @property
    def pattern(self) -> str:
        return self.source

    def sub(self, repl: Any, string: str, count: int = 0) -> str:
        return self.compiled.sub(repl, string, count)

    def search(self, string: str, *bounds: int) -> re.Match[str] | None:
        return self.compiled.search(string, *bounds)

    def match(self, string: str, *bounds: int) -> re.Match[str] | None:
        return self.compiled.match(string, *bounds)

    def fullmatch(self, string: str, *bounds: int) -> re.Match[str] | None:
        return self.compiled.fullmatch(string, *bounds)

    def __getattr__(self, name: str) -> Any:  # finditer, findall, split, groupindex, ...
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.compiled, name)

    def __repr__(self) -> str:
        return f"LazyPattern({self.source!r}, {self.flags})"
