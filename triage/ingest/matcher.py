"""Multi-literal search over raw bytes: the engines (Hyperscan, Aho-Corasick, pure Python) and
the `Matcher` that says which words are the grammar's and which the evidence reader's.

It knows no grammar: the words are handed in (`vocabulary.matcher()` builds the process's one).
`VLLM_TRIAGE_MATCHER=python|ahocorasick|hyperscan` picks an engine (tests, benchmarks)."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable


class _Hyperscan:
    name = "hyperscan"

    def __init__(self, words: list[bytes]) -> None:
        import hyperscan

        self._sizes = [len(w) for w in words]
        self._make_scratch = hyperscan.Scratch
        self._local = threading.local()  # scratch space serves one scan at a time: one per thread
        self._db = self._cached(hyperscan, words) or self._compile(hyperscan, words)

    def _compile(self, hyperscan, words: list[bytes]):
        db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        exprs = [b"".join(b"%c" % c if chr(c).isalnum() else b"\\x%02x" % c for c in w) for w in words]
        db.compile(expressions=exprs, ids=list(range(len(words))), elements=len(words))
        from triage import cache

        try:
            cache.save(_db_name(hyperscan, words), hyperscan.dumpb(db))
        except Exception:  # noqa: BLE001 - a database that cannot be saved is compiled again next run
            pass
        return db

    def _cached(self, hyperscan, words: list[bytes]):
        """The database compiled by an earlier run (compiling costs ~60 ms), if it loads and finds
        every word (a database from another CPU or library version is refused or rebuilt)."""
        from triage import cache

        blob = cache.load(_db_name(hyperscan, words))
        if not isinstance(blob, bytes):
            return None
        try:
            self._db = hyperscan.loadb(blob, hyperscan.HS_MODE_BLOCK)
            found = {i for _, i in self.hits(b"\n".join(words))}
        except Exception:  # noqa: BLE001 - damaged or foreign: compile afresh
            return None
        finally:
            self._local = threading.local()
        return self._db if found == set(range(len(words))) else None

    def hits(self, data: bytes) -> list[tuple[int, int]]:
        """(start offset, word index) of every match, overlapping ones included, by end offset."""
        scratch = getattr(self._local, "scratch", None)
        if scratch is None:
            scratch = self._local.scratch = self._make_scratch(self._db)
        out: list[tuple[int, int]] = []
        add, sizes = out.append, self._sizes
        self._db.scan(data, match_event_handler=lambda i, _start, end, _flags, _ctx: add((end - sizes[i], i)),
                      scratch=scratch)
        return out


def _db_name(hyperscan, words: list[bytes]) -> str:
    from triage.cache import content_name

    return content_name("hyperscan", [*words, str(getattr(hyperscan, "__version__", "")).encode()], ".db")


class _AhoCorasick:
    name = "ahocorasick"

    def __init__(self, words: list[bytes]) -> None:
        import ahocorasick_rs as acr

        self._ac = acr.BytesAhoCorasick(words, implementation=acr.Implementation.DFA)

    def hits(self, data: bytes) -> list[tuple[int, int]]:
        return [(start, i) for i, start, _end in self._ac.find_matches_as_indexes(data, overlapping=True)]


class _PurePython:
    """Search a few key substrings with `bytes.find` (C speed), then confirm each word owning
    the key in place: a word holds its key at a known offset, so a hit of the key at `i` is a
    hit of the word at `i - offset` exactly when the buffer starts with the word there.

    No line is cut out or searched again: the cost is one `find` pass per key and a few
    `startswith` calls per key hit (profiled: slicing each hit's line and searching it for
    every owner word took most of the time on logs whose lines quote errors densely)."""

    name = "python"

    def __init__(self, words: list[bytes]) -> None:
        self._words = words
        # key -> (word, offset of the key's first occurrence in it, word index)
        self._keys = [(key, [(words[w], words[w].find(key), w) for w in owners]) for key, owners in _cover(words)]

    def hits(self, data: bytes) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        add, find, starts = out.append, data.find, data.startswith
        for key, owners in self._keys:
            i = find(key)
            while i >= 0:
                for word, off, w in owners:  # each occurrence of `word` holds `key` first at `off`: found once
                    if i >= off and starts(word, i - off):
                        add((i - off, w))
                i = find(key, i + 1)
        out.sort()
        return out


def _cover(words: list[bytes], size: int = 4) -> list[tuple[bytes, list[int]]]:
    """Few key substrings such that every word holds one (greedy set cover over its n-grams);
    each word is owned by one key only, so that it is reported once per occurrence."""
    grams: dict[bytes, set[int]] = {}
    for i, w in enumerate(words):
        for g in {w[j:j + size] for j in range(max(1, len(w) - size + 1))}:
            grams.setdefault(g, set()).add(i)
    left, keys = set(range(len(words))), []
    while left:
        best = max(grams, key=lambda g: (len(grams[g] & left), g))
        owners = sorted(grams[best] & left)
        keys.append((best, owners))
        left -= set(owners)
    return keys


_BACKENDS = {"hyperscan": _Hyperscan, "ahocorasick": _AhoCorasick, "python": _PurePython}


class Matcher:
    """Every anchor word in a buffer; which of them are the grammar's, which the evidence reader's."""

    def __init__(self, grammar_words: Iterable[str], evidence_words: Iterable[str], backend: str | None = None,
                 numbers: Iterable[str] = ()):
        g, e = set(grammar_words), set(evidence_words)
        self._str_words = sorted(g | e)
        self.words = [w.encode() for w in self._str_words]
        self._grammar = [w in g for w in self._str_words]  # by word index: an anchor word, an evidence word
        self._evidence = [w in e for w in self._str_words]
        # Words that count only as a whole number (`\b401\b`): a port 54013 holds no HTTP 401.
        self._numbers = {i: len(w) for i, w in enumerate(self.words) if w.decode() in set(numbers)}
        self.engine = _engine(self.words, backend)

    def index(self, word: str) -> int | None:
        """The index of a word in `words` (None: not one of them)."""
        try:
            return self._str_words.index(word)
        except ValueError:
            return None

    def hits(self, data: bytes) -> list[tuple[int, int]]:
        """(start, word index) of the words in a buffer (numbers inside longer numbers left out)."""
        found = self.engine.hits(data)
        if not self._numbers:
            return found
        return [(start, i) for start, i in found if i not in self._numbers or self._whole(data, start, i)]

    def _whole(self, data: bytes, start: int, i: int) -> bool:
        end = start + self._numbers[i]
        return not (start > 0 and 48 <= data[start - 1] <= 57) and not (end < len(data) and 48 <= data[end] <= 57)

    def occurrences(self, text: str) -> list[tuple[int, str]]:
        """(position, word) of every grammar word in a line of text, overlapping ones included."""
        words, anchor = self._str_words, self._grammar
        data = text.encode("utf-8", "surrogatepass")
        hits = [(start, i) for start, i in self.hits(data) if anchor[i]]
        if text.isascii():
            return [(start, words[i]) for start, i in hits]
        return [(len(data[:start].decode("utf-8", "surrogatepass")), words[i]) for start, i in hits]

    def classify(self, text: str) -> tuple[bool, bool]:
        """(holds a grammar word, holds an evidence word) for one line of text."""
        return self.kinds(self.hits(text.encode("utf-8", "surrogatepass")))

    def kinds(self, hits: list[tuple[int, int]]) -> tuple[bool, bool]:
        """(a grammar word among them, an evidence word among them) for hits already found
        (a word index below 0 is no word)."""
        grammar = evidence = False
        for _, i in hits:
            if i >= 0:
                grammar = grammar or self._grammar[i]
                evidence = evidence or self._evidence[i]
        return grammar, evidence


def _engine(words: list[bytes], backend: str | None):
    choice = backend or os.environ.get("VLLM_TRIAGE_MATCHER") or ""
    if choice:
        if choice not in _BACKENDS:
            raise ValueError(f"unknown matcher {choice!r}; must be one of: {', '.join(_BACKENDS)}")
        return _BACKENDS[choice](words)
    for make in (_Hyperscan, _AhoCorasick):
        try:
            return make(words)
        except Exception:  # noqa: BLE001 - not installed, or no wheel for this machine: try the next
            continue
    return _PurePython(words)
