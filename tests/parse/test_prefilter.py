"""The fast paths change nothing: every event line passes the prefilter, the anchor search
that tries only candidate positions finds what a full regex search finds, and the trees
built without the parser for `HEAD TAIL?` rules are the parser's own.

Lines come from every fixture log and, when present, the shared corpus.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import pytest
from conftest import log_text
from hypothesis import given, settings
from hypothesis import strategies as st

from triage.ingest.lines import peel
from triage.parse import grammar, parse
from triage.parse.sysinfo import BundleReader
from triage.parse.vocabulary import HINT_LOOKBACK, REGEX_HINTS, matcher, prefilter

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT.parent / "shared" / "corpus"


@lru_cache(maxsize=1)
def _logs() -> tuple[Path, ...]:
    return tuple(sorted((ROOT / "fixtures" / "logs").rglob("*.log")) + sorted(CORPUS.glob("*.log")))


@lru_cache(maxsize=1)
def _lines() -> tuple[str, ...]:
    out = []
    for path in _logs():
        out.extend(log_text(path).split("\n"))
    return tuple(out)


# The prefilter reads raw lines, the grammar reads them with whitespace runs collapsed: an
# anchor printed with a doubled space must be found by a word without it (vLLM's ASCII logo,
# "▀▄▀ █  version 0.24.0", is found by its block character). No gaps are allowed.
WHITESPACE_GAPS: tuple[str, ...] = ()


def test_every_line_the_grammar_turns_into_events_passes_the_prefilter():
    missed = []
    for raw in _lines():
        if parse.parse_line(peel(raw, 1)) and not prefilter(raw):
            collapsed = " ".join(raw.split())
            if not any(w in collapsed for w in WHITESPACE_GAPS):
                missed.append(raw[:160])
    assert not missed, f"{len(missed)} event line(s) fail the prefilter, e.g. {missed[:3]}"


def test_every_line_the_evidence_reader_reads_holds_an_evidence_word():
    reader, missed = BundleReader(), []
    for raw in _lines():
        if reader.read(peel(raw, 1)) and not matcher().classify(raw)[1]:
            missed.append(raw[:160])
    assert not missed, f"{len(missed)} evidence line(s) hold no evidence word, e.g. {missed[:3]}"


def _full_search(pattern, text: str) -> list:
    out, pos = [], 0
    while len(out) < 64 and (m := pattern.search(text, pos)):
        out.append((m.span(), m.lastgroup))
        pos = m.start() + 1  # overlapping: the strictest form of the search parse_line_detail runs
    return out


def _candidate_search(pattern, text: str) -> list:
    candidates = parse._anchor_candidates(text)
    out, pos = [], 0
    while len(out) < 64 and (m := parse._search(text, pos, candidates)):
        out.append((m.span(), m.lastgroup))
        pos = m.start() + 1
    return out


def test_candidate_anchor_search_finds_what_a_full_search_finds():
    pattern, _ = grammar.anchors()
    for raw in _lines():
        if not prefilter(raw):
            continue
        text = parse.normalise(peel(raw, 1).text)
        assert _candidate_search(pattern, text) == _full_search(pattern, text), text[:200]


@pytest.mark.parametrize(
    "text",
    [
        "RuntimeError: CUDA out of memory. Tried to allocate 2.00 MiB",
        "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.",
        "Worker VllmWorkerProcess pid 4711 died, exit code: -9",
        "vllm: error: unrecognized arguments: --foo",
        "Repo model meta-llama/Llama-3.1-8B is gated. You must be authenticated to access it.",
        "AssertionError: 32 is not divisible by 3",
        "x # GPU blocks: 12, # CPU blocks: 4 (HTTP 403) ÿ █ version 0.9.1",
        "container vllm Reason: OOMKilled",
    ],
)
def test_candidate_anchor_search_on_hint_anchors(text):
    pattern, _ = grammar.anchors()
    assert _candidate_search(pattern, text) == _full_search(pattern, text)


def test_every_hint_anchor_says_where_its_match_can_begin():
    anchors = {name for firsts in grammar.first_terminals(grammar.grammar()).values() for name in firsts}
    missing = sorted(n for n in anchors if n in REGEX_HINTS and n not in HINT_LOOKBACK)
    assert not missing, f"add these terminals to vocabulary.HINT_LOOKBACK (correct without, but slow): {missing}"


def test_trees_built_without_the_parser_are_the_parsers():
    simple = parse._simple_rules()
    pattern, names = grammar.anchors()
    checked = 0
    for raw in _lines():
        if not prefilter(raw):
            continue
        text = parse.normalise(peel(raw, 1).text)
        for m in pattern.finditer(text):
            rule = names[m.lastgroup or ""]
            if rule not in simple and rule != "frame":
                continue
            quick = parse._quick_tree(rule, text[m.start() :])
            try:
                slow = grammar.grammar().parse(text[m.start() :], start=rule)
            except Exception:  # noqa: BLE001 - lark refuses: the quick path must not build a tree either
                slow = None
            if quick is not None:
                checked += 1
                assert slow is not None and quick == slow, text
                assert [c.type for c in quick.children] == [c.type for c in slow.children]
    assert checked > 50


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    path=st.text(st.characters(blacklist_characters='"\n'), max_size=30),
    func=st.text(st.sampled_from("ab_<>.x in\t"), max_size=12),
    tail=st.text(st.sampled_from("ab \t\x0b=()'\""), max_size=12),
    spaces=st.sampled_from([" ", "  ", "", ",", ", "]),
)
def test_frames_built_without_the_parser_are_the_parsers(path, func, tail, spaces):
    text = f'File "{path}", line 12, in{spaces}{func}{tail}'
    quick = parse._quick_tree("frame", text)
    try:
        slow = grammar.grammar().parse(text, start="frame")
    except Exception:  # noqa: BLE001 - lark refuses: the quick path must not build a tree either
        slow = None
    if quick is not None:
        assert slow is not None and quick == slow
        assert [c.type for c in quick.children] == [c.type for c in slow.children]
