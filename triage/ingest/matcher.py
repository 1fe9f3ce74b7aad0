"""Multi-literal search over raw bytes: one compiled engine (Hyperscan), the pure-Python
fallback, both behind `Engine`, and the `Matcher` that says which words are the grammar's and
which the evidence reader's.

One compiled engine, measured (`benchmarks/matchers.py`: the scan's 500-odd words, the
benchmark's log shapes, 8 MB each, 1 MiB chunks; Linux x86-64). Hyperscan against the Rust
Aho-Corasick automaton (`ahocorasick-rs`, dropped):

    start-up: import 2.0 ms vs 0.8 ms; build 3.7 ms from the cache (11-15 ms compiled once) vs 4.5 ms
    search alone, MB/s:     startup 3134 vs 514, serve 2564 vs 543, access 3428 vs 571,
                            longserve 511 vs 320, metrics 743 vs 401, smi 194 vs 182, chains 227 vs 197
    whole quiet scan, MB/s: startup 321 vs 210, serve 1103 vs 416, access 851 vs 348,
                            longserve 434 vs 214, metrics 180 vs 143, smi 54 vs 50, chains 89 vs 73

Hyperscan won every shape and costs under 1 ms more at start-up once its database is cached,
so Aho-Corasick won nowhere. Where Hyperscan has no wheel (Linux x86-64 only) the pure-Python
search runs (scan: 24-119 MB/s on the same shapes). Every engine yields the same hits; only
the speed differs.

It knows no grammar: the words are handed in (`vocabulary.matcher()` builds the process's one).
`VLLM_TRIAGE_MATCHER=python|hyperscan` picks an engine (tests, benchmarks)."""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterable
from typing import Protocol


class LineHeads(Protocol):
    """A search for line heads (regexes matched from a line's start)."""

    def spans(self, data: bytes) -> list[tuple[int, int]]:
        """(line start, match end) of each head found, by end offset."""
        ...


class Engine(Protocol):
    """A multi-literal search built once for a word list (word i is `words[i]`)."""

    name: str

    def hits(self, data: bytes) -> list[tuple[int, int]]:
        """(start offset, word index) of every occurrence, overlapping ones included."""
        ...

    def hits_upto(self, data: bytes, cap: int) -> list[tuple[int, int]] | None:
        """`hits(data)`, or None when there are more than `cap` (or the engine would rather the
        caller masked request text first: `QuietSearch`)."""
        ...

    def line_heads(self, patterns: list[bytes]) -> LineHeads | None:
        """A search for lines starting with one of these regexes, if the engine runs regexes."""
        ...


class _Hyperscan:
    name = "hyperscan"

    def __init__(self, words: list[bytes]) -> None:
        import hyperscan

        self._sizes = [len(w) for w in words]
        self._make_scratch = hyperscan.Scratch
        self._terminated = hyperscan.ScanTerminated
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
        out: list[tuple[int, int]] = []
        add, sizes = out.append, self._sizes
        self._db.scan(
            data,
            match_event_handler=lambda i, _start, end, _flags, _ctx: add((end - sizes[i], i)),
            scratch=self._scratch(),
        )
        return out

    def hits_upto(self, data: bytes, cap: int) -> list[tuple[int, int]] | None:
        """`hits(data)`, or None as soon as more than `cap` are found (the scan stops there)."""
        out: list[tuple[int, int]] = []
        add, sizes = out.append, self._sizes
        try:
            self._db.scan(
                data,
                scratch=self._scratch(),
                match_event_handler=lambda i, _s, end, _f, _c: add((end - sizes[i], i)) or len(out) > cap,
            )
        except self._terminated:
            return None
        return out

    def _scratch(self):
        scratch = getattr(self._local, "scratch", None)
        if scratch is None:
            scratch = self._local.scratch = self._make_scratch(self._db)
        return scratch

    def line_heads(self, patterns: list[bytes]) -> _HyperscanHeads:
        """A search for line heads (regexes matched from a line's start), compiled on first use."""
        return _HyperscanHeads(patterns)


class _HyperscanHeads:
    """(line start, end) of every line head matching one of a few regexes (`^` anchored, multi-line).

    Hyperscan finds them in C: the scanner then spends a few operations per such line instead of
    a `find`, an `rfind` and a regex match in Python (profiled: most of a long serving log's scan)."""

    def __init__(self, patterns: list[bytes]) -> None:
        import hyperscan

        flags = hyperscan.HS_FLAG_MULTILINE | hyperscan.HS_FLAG_SOM_LEFTMOST
        self._db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        self._db.compile(
            expressions=[b"^(?:" + p + b")" for p in patterns],
            ids=list(range(len(patterns))),
            elements=len(patterns),
            flags=[flags] * len(patterns),
        )
        self._make_scratch = hyperscan.Scratch
        self._local = threading.local()

    def spans(self, data: bytes) -> list[tuple[int, int]]:
        """(start, end) of each head found, by end offset."""
        scratch = getattr(self._local, "scratch", None)
        if scratch is None:
            scratch = self._local.scratch = self._make_scratch(self._db)
        out: list[tuple[int, int]] = []
        add = out.append
        self._db.scan(data, match_event_handler=lambda _i, start, end, _f, _c: add((start, end)), scratch=scratch)
        return out


def _db_name(hyperscan, words: list[bytes]) -> str:
    from triage.cache import content_name

    return content_name("hyperscan", [*words, str(getattr(hyperscan, "__version__", "")).encode()], ".db")


# How common each byte is in log text, in bands of halving frequency: band 0 is ~15% of the bytes,
# band 1 ~7%, and so on; a byte in no band is rarer than all of them. Measured on the corpus's
# failure logs and on serving logs with their prompts masked (as the scan searches them), taking
# each byte's highest frequency among them. The pure-Python keys start with rare bytes (`_cover`).
_BANDS = (
    b" ",
    b"1e0.r/io",
    b'nT2PacOtdl:sp^I"_vS43m',
    b"65u7-9g8,A=()\nFNKHfybh",
    b"[kERq']|C",
    b"w\xe2\x96\x1bx\x88;G<>Y\\",
    b"DWL\rMUz",
    b"*B%V`",
    b"Qj{}~",
)


def _byte_costs(bands: tuple[bytes, ...]) -> list[float]:
    """byte -> its rough share of log text (halved each band), the weight `_anchors` minimises."""
    costs = [2.0 ** -len(bands)] * 256
    for band, chars in enumerate(bands):
        for c in chars:
            costs[c] = 2.0**-band
    return costs


_COST = _byte_costs(_BANDS)


class _PurePython:
    """Find key substrings with one compiled `re` alternation, then confirm each word owning the
    key in place: a word holds its key at a known offset, so a hit of the key at `i` is a hit of
    the word at `i - offset` exactly when the buffer starts with the word there.

    Every alternative begins with a literal byte, so sre skips, in C, each byte that begins no
    key, and the keys begin with bytes rare in logs (`_cover`): Python runs only at key hits,
    tens per MiB. Profiled on the benchmark's serving logs (1 MiB chunks, prompts masked): this
    ran at 150-200 MB/s, one `bytes.find` pass per 4-gram key (61 keys) at 17-28 MB/s, and an
    alternation of the words themselves at 1-10 MB/s (their first bytes are common ones)."""

    name = "python"

    def __init__(self, words: list[bytes]) -> None:
        cover = _cover(words)
        # key -> (word, offset of the key's first occurrence in it, word index)
        self._owners = {key: [(words[w], words[w].find(key), w) for w in owners] for key, owners in cover}
        self._search = re.compile(_alternation(sorted(self._owners))).search if cover else None

    def hits(self, data: bytes) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        search = self._search
        if search is None:
            return out
        add, starts, owners = out.append, data.startswith, self._owners
        m = search(data)
        while m is not None:
            i = m.start()
            for word, off, w in owners[m.group()]:  # each occurrence of `word` holds `key` first at `off`: found once
                if i >= off and starts(word, i - off):
                    add((i - off, w))
            m = search(data, i + 1)  # the keys are prefix-free: one key at most begins at `i`
        out.sort()
        return out

    def hits_upto(self, data: bytes, cap: int) -> None:
        """Always None: this search costs by the occurrences of its keys, which masked request
        text holds fewer of, so the caller masks first (`QuietSearch`)."""
        return None

    def line_heads(self, patterns: list[bytes]) -> None:
        """None: no regex engine here (the caller finds request heads itself)."""
        return None


def _cover(words: list[bytes], size: int = 4, longest: int = 8) -> list[tuple[bytes, list[int]]]:
    """Keys such that every (non-empty) word holds one, each beginning with a rare byte (`_anchors`)
    and `longest` bytes long where the word allows, so that few key hits fail their words; prefix-free
    (a key that begins with another gives its words to that one), so that at most one key begins at
    a position; each word owned by one key only, so that it is reported once per occurrence."""
    spots = _spots(words, size)
    chosen = _anchors(spots, {i for i, w in enumerate(words) if w})
    keys: dict[int, bytes] = {}
    for i, w in enumerate(words):
        held = [(_COST[b], spots[b][i]) for b in chosen if i in spots[b]]
        if held:
            at = min(held)[1]  # the word's rarest chosen byte, its first spot
            keys[i] = w[at : at + longest]
    final: dict[bytes, bytes] = {}
    for k in sorted(set(keys.values())):  # a prefix sorts first
        final[k] = next((final[k[:j]] for j in range(1, len(k)) if k[:j] in final), k)
    owners: dict[bytes, list[int]] = {}
    for i, k in keys.items():
        owners.setdefault(final[k], []).append(i)
    return sorted(owners.items())


def _spots(words: list[bytes], size: int) -> dict[int, dict[int, int]]:
    """byte -> {word index: the first offset in the word where a key may begin with that byte}
    (one that leaves at least `size` bytes of the word, or the start of a shorter word)."""
    spots: dict[int, dict[int, int]] = {}
    for i, w in enumerate(words):
        for at in range(max(1, len(w) - size + 1) if w else 0):
            spots.setdefault(w[at], {}).setdefault(i, at)
    return spots


def _anchors(spots: dict[int, dict[int, int]], words: set[int]) -> list[int]:
    """Bytes for the keys to begin with, together in every word and rare together in logs (so that
    sre stops at few bytes): a greedy weighted cover by `_COST`, then each byte the others make
    needless dropped, costliest first."""
    left, chosen = set(words), []
    while left:
        best = max(spots, key=lambda b: (len(spots[b].keys() & left) / _COST[b], -b))
        chosen.append(best)
        left -= spots[best].keys()
    for b in sorted(chosen, key=lambda b: (-_COST[b], b)):
        if set().union(*(spots[c].keys() for c in chosen if c != b)) >= words:
            chosen.remove(b)
    return chosen


def _alternation(keys: list[bytes]) -> bytes:
    """A regular expression for prefix-free keys, nested by their shared leading bytes, so that sre
    reads a byte once where keys share it; every alternative begins with a literal byte, so that
    sre finds the spots to try by the set of first bytes, in C."""
    groups: dict[bytes, list[bytes]] = {}
    for k in keys:
        groups.setdefault(k[:1], []).append(k[1:])
    alts = []
    for head, tails in sorted(groups.items()):
        if len(tails) == 1:
            alts.append(re.escape(head + tails[0]))
        else:
            alts.append(re.escape(head) + b"(?:" + _alternation(tails) + b")")
    return b"|".join(alts)


# The bytes `\b` takes for word characters in ASCII: a number word beside one is no whole number.
WORD_BYTES = frozenset(b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_BACKENDS: dict[str, Callable[[list[bytes]], Engine]] = {"hyperscan": _Hyperscan, "python": _PurePython}


class Matcher:
    """Every anchor word in a buffer; which of them are the grammar's, which the evidence reader's."""

    def __init__(
        self,
        grammar_words: Iterable[str],
        evidence_words: Iterable[str],
        backend: str | None = None,
        numbers: Iterable[str] = (),
    ):
        g, e = set(grammar_words), set(evidence_words)
        self._str_words = sorted(g | e)
        self.words = [w.encode() for w in self._str_words]
        self._grammar = [w in g for w in self._str_words]  # by word index: an anchor word, an evidence word
        self._evidence = [w in e for w in self._str_words]
        # Words that count only as a whole number (`\b401\b`): a port 54013 holds no HTTP 401.
        self.numbers = {i: len(w) for i, w in enumerate(self.words) if w.decode() in set(numbers)}
        self.sizes = [len(w) for w in self.words]
        self.engine = _engine(self.words, backend)
        self._heads: dict[tuple[bytes, ...], LineHeads | None] = {}
        self._lock = threading.Lock()

    def index(self, word: str) -> int | None:
        """The index of a word in `words` (None: not one of them)."""
        try:
            return self._str_words.index(word)
        except ValueError:
            return None

    def hits(self, data: bytes) -> list[tuple[int, int]]:
        """(start, word index) of the words in a buffer (numbers inside longer numbers left out)."""
        found = self.engine.hits(data)
        if not self.numbers:
            return found
        return [(start, i) for start, i in found if i not in self.numbers or self.whole(data, start, i, len(data))]

    def raw_hits(self, data: bytes, cap: int) -> list[tuple[int, int]] | None:
        """The engine's (start, word index) in a buffer, numbers not checked (`whole`), in no set
        order; None when there are more than `cap`, and always from the pure-Python engine (its
        search costs by the occurrences of its keys, which masked bytes hold fewer of: 3.3 s
        unmasked against 1.8 s masked on the benchmark's 200 MB serving log)."""
        return self.engine.hits_upto(data, cap)

    def whole(self, data: bytes, start: int, i: int, limit: int) -> bool:
        """Whether word `i` found at `start` counts: a number word only where the grammar's `\\b`
        sees it whole (no ASCII letter, digit or `_` beside it: a request id `...cb401a05...`
        holds no HTTP 401), the bytes from `limit` on taken for none (as NULs masking them
        would be). A non-ASCII byte beside it counts it (a superset of `\\b` on text)."""
        size = self.numbers.get(i)
        if size is None:
            return True
        end = start + size
        return not (start > 0 and data[start - 1] in WORD_BYTES) and not (end < limit and data[end] in WORD_BYTES)

    def line_heads(self, patterns: list[bytes]) -> LineHeads | None:
        """A search for lines starting with one of these regexes, `.spans(data)` giving (line
        start, match end) of each by end offset, if the engine runs regexes (else None; built
        once per matcher, on first use)."""
        key = tuple(patterns)
        with self._lock:
            if key not in self._heads:
                try:
                    self._heads[key] = self.engine.line_heads(list(patterns))
                except Exception:  # noqa: BLE001 - a regex this engine refuses: the caller's own search
                    self._heads[key] = None
            return self._heads[key]

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


def _engine(words: list[bytes], backend: str | None) -> Engine:
    choice = backend or os.environ.get("VLLM_TRIAGE_MATCHER") or ""
    if choice:
        if choice not in _BACKENDS:
            raise ValueError(f"unknown matcher {choice!r}; must be one of: {', '.join(_BACKENDS)}")
        return _BACKENDS[choice](words)
    try:
        return _Hyperscan(words)
    except Exception:  # noqa: BLE001 - not installed, or no wheel for this machine: the fallback
        return _PurePython(words)
