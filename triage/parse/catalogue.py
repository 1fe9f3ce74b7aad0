"""vLLM's own error messages (and its layers'), as data: which cause a message names.

The catalogue (`rules/catalogue/vllm_errors.json`) is generated from vLLM's source by
`scripts/catalogue/` (each entry: a bounded pattern, its longest literal, the cause, and where
vLLM raises it, in which releases). It is read only when a failed attempt has no specific
rule's answer: a healthy log, and a failure a hand-written rule explains, never load it.

Matching is cheap and bounded: a message is whitespace-collapsed, cut to `MAX_TEXT`
characters, split into words; only entries whose index word (the longest word of their
longest literal) is among them are tried, only those whose whole literal is in the text run
their pattern (compiled on first use), and the patterns hold no nested unbounded repeat.
Entries that name no cause (unknown_failure) are not indexed.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable

from msgspec import Struct

MAX_TEXT = 2000  # characters of one message searched
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,}")
_SPACE = re.compile(r"\s+")


class CatalogueHit(Struct, frozen=True):
    """A log line whose message is one of the catalogue's: a sign rules read as `catalogue`."""

    line: int  # the log line (so reading the hit cites it as evidence)
    cause: str
    id: str
    exception: str  # the class vLLM raises (or `logger.error` ...); a native code's enum name, `NCCL WARN`
    package: str  # vllm, huggingface_hub, transformers, safetensors, torch; cuda-runtime, cublas, cudnn, nccl
    source: str  # "vllm/config/model.py:123 in verify_with_parallel_config"
    first: str  # the first and last releases of the catalogue that hold the message ("" when it holds none)
    last: str
    text: str  # the log's message, as matched
    # False: a message the catalogue does not hold, read as its build reads vLLM's source
    # (diagnose/uncatalogued.py); `how` then says what decided the cause (wording, place, class)
    catalogued: bool = True
    how: str = "catalogue"


class Catalogue:
    """The loaded catalogue: entries indexed by a word of their longest literal."""

    def __init__(self, entries: list[dict]) -> None:
        self._index: dict[str, list[dict]] = {}
        # entries that name no cause (request-time, internal, wrappers): matched only to tell a
        # message the catalogue holds from one it does not (`holds`), never as a hit
        self._silent: dict[str, list[dict]] = {}
        self._compiled: dict[str, re.Pattern] = {}
        for e in entries:
            if not e["literal"]:
                continue
            index = self._silent if e["cause"] == "unknown_failure" else self._index
            index.setdefault(_key(e["literal"]), []).append(e)
        for bucket in [*self._index.values(), *self._silent.values()]:  # the most specific first
            bucket.sort(key=lambda e: (-len(e["literal"]), e["id"]))

    def match(self, text: str) -> dict | None:
        """The entry naming a cause whose message this text holds (the most specific), or None."""
        return self._match(text, self._index)

    def holds(self, text: str) -> bool:
        """Whether this text is one of the catalogue's messages, naming a cause or not."""
        return self._match(text, self._index) is not None or self._match(text, self._silent) is not None

    def _match(self, text: str, index: dict[str, list[dict]]) -> dict | None:
        flat = _SPACE.sub(" ", text[:MAX_TEXT])
        candidates: list[dict] = []
        for word in set(_WORD.findall(flat)):
            candidates.extend(index.get(word, ()))
        for e in sorted(candidates, key=lambda e: (-len(e["literal"]), e["id"])):
            if e["literal"] in flat and self._pattern(e).search(flat):
                return e
        return None

    def _pattern(self, e: dict) -> re.Pattern:
        compiled = self._compiled.get(e["id"])
        if compiled is None:
            compiled = self._compiled[e["id"]] = re.compile(e["pattern"])
        return compiled

    def first_hit(self, lines: Iterable[tuple[int, str]]) -> CatalogueHit | None:
        """The first (line, text) whose text is a catalogue message, as a hit."""
        for line, text in lines:
            e = self.match(text)
            if e is not None:
                return CatalogueHit(
                    line=line,
                    cause=e["cause"],
                    id=e["id"],
                    exception=e["exception"],
                    package=e["package"],
                    source=_source(e),
                    first=e["first"],
                    last=e["last"],
                    text=text[:300],
                )
        return None


def _source(e: dict) -> str:
    """Where the message comes from: a source line, or a native library's table and code."""
    if e.get("code") is not None:  # a table read from a shared object (native_errors.json)
        return f"{e['file']} ({e['function']}, code {e['code']}; {e.get('wheel', '')})"
    if e.get("wheel"):  # a native layer's source (NCCL's WARN formats)
        return f"{e['file']}:{e['line']} ({e['function']}; {e['wheel']})"
    return f"{e['file']}:{e['line']} in {e['function']}"


def _key(literal: str) -> str:
    """The index word of a literal: its longest whole word. Its first and last words may be
    pieces (the literal can begin right after a field, `{name}_size`, and is cut after 60
    letters, `pipeline_parallel` of `pipeline_parallel_size`), so the last is left out when
    another is there, the first when two others are: a piece is never a word of the text."""
    words = _WORD.findall(literal)
    inner = words[1 if len(words) > 2 else 0 : -1 if len(words) > 1 else None]
    return max(inner, key=len) if inner else literal


_LOADED: Catalogue | None = None


def path(name: str = "vllm_errors.json") -> str:
    """A shipped catalogue file, beside the built-in packs (package data in an installed copy)."""
    from triage.rule_engine.load import _builtin_folder

    return os.path.join(_builtin_folder(), "catalogue", name)


# vLLM's and its Python layers' messages, and the native layers' tables (CUDA, cuBLAS, cuDNN, NCCL)
FILES = ("vllm_errors.json", "native_errors.json")


def catalogue() -> Catalogue:
    """The shipped catalogues as one, read once per process (a file missing or of another
    schema adds nothing)."""
    global _LOADED
    if _LOADED is None:
        entries: list[dict] = []
        for name in FILES:
            try:
                with open(path(name), encoding="utf-8") as f:
                    doc = json.load(f)
                entries += doc["entries"] if doc.get("schema_version") == 1 else []
            except (OSError, ValueError, KeyError):
                continue
        _LOADED = Catalogue(entries)
    return _LOADED
