"""Every search engine reports every occurrence of every word, overlapping ones included:
held to a brute-force search on texts built from the real vocabulary's words, pieces of them and
the bytes the scan searches between them (NUL runs of masked prompts, log headers), and, for the
pure-Python engine's key cover, on random small vocabularies whose words overlap and nest."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from triage.ingest import matcher
from triage.parse import vocabulary

WORDS = vocabulary.matcher("python").words


def _engines() -> dict[str, object]:
    out = {}
    for name, make in matcher._BACKENDS.items():
        try:
            out[name] = make(WORDS)
        except ImportError:
            continue
    return out


ENGINES = _engines()


def _brute(words: list[bytes], data: bytes) -> list[tuple[int, int]]:
    out = []
    for k, w in enumerate(words):
        i = data.find(w)
        while i >= 0:
            out.append((i, k))
            i = data.find(w, i + 1)
    return sorted(out)


_word = st.sampled_from(WORDS)
_piece = st.tuples(_word, st.integers(0, 80), st.integers(0, 80)).map(lambda t: t[0][t[1] : t[1] + t[2]])
_filler = st.sampled_from(
    [
        b"\0" * 700,
        b"\0",
        b"\n",
        b" ",
        b"INFO 10-02 16:20:11 [x.py:1] ",
        b"0",
        b"401 ",
        b'"POST /v1/completions HTTP/1.1" 200 OK',
        b"\xe2\x96",
        b"\xff",
        b"e",
        b"u",
    ]
)
_text = st.lists(st.one_of(_word, _piece, _filler), max_size=30).map(b"".join)


@pytest.mark.parametrize("engine", sorted(ENGINES))
@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(data=_text)
def test_engines_find_every_occurrence_of_the_vocabulary(engine, data):
    """The compiled engines report by end offset (the scan sorts), the pure-Python one sorted."""
    found = ENGINES[engine].hits(data)
    assert (found if engine == "python" else sorted(found)) == _brute(WORDS, data)


_small_words = st.lists(
    st.binary(min_size=1, max_size=6).map(lambda b: bytes(b"ab\0e:"[c % 5] for c in b)),
    min_size=1,
    max_size=12,
    unique=True,
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    words=_small_words, pieces=st.lists(st.sampled_from([b"a", b"b", b"\0", b"e", b":", b"ab", b"ee:"]), max_size=40)
)
def test_python_engine_on_overlapping_vocabularies(words, pieces):
    """Words that are prefixes, suffixes and repeats of each other (keys shared, nested and
    begun again inside a key hit) are each found once per occurrence."""
    data = b"".join(pieces) + b"".join(words) + b"".join(reversed(pieces))
    assert matcher._PurePython(words).hits(data) == _brute(words, data)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(words=_small_words)
def test_python_keys_are_prefix_free_and_own_each_word_once(words):
    keys = matcher._cover(words)
    owned = sorted(i for _, owners in keys for i in owners)
    assert owned == list(range(len(words)))
    for key, owners in keys:
        assert all(key in words[i] for i in owners)
        assert not any(other != key and other.startswith(key) for other, _ in keys)


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_a_number_word_counts_only_where_the_grammars_word_boundary_sees_it_whole(engine):
    """The HTTP status words (`\\b40[13]\\b` in the grammar) beside an ASCII letter, digit or `_`
    are no hits (a request id `chatcmpl-...cb401a05...`, `# noqa: F401`, a port 54013), so such
    lines never reach the parser; beside punctuation, a space, a line's edge or a non-ASCII
    byte they are (a superset of what the grammar's `\\b` accepts on the decoded text)."""
    m = vocabulary.matcher(engine)
    status = {m.index("401"), m.index("403")}

    def statuses(data: bytes) -> int:
        return sum(1 for _, i in m.hits(data) if i in status)

    for inside in (
        b"chatcmpl-ae4001e3880cb401a050609804d2be09",
        b"# noqa: F401",
        b"port 54013",
        b"x_403_y",
        b"4010",
        b"A403",
    ):
        assert statuses(inside) == 0, inside
    for whole in (
        b"401 Client Error",
        b"(403)",
        b"status=401,",
        b"HTTP 403",
        b"401",
        b"\xc3\xa9401",
        b"code:403\n",
        b"-401-",
    ):
        assert statuses(whole) == 1, whole
