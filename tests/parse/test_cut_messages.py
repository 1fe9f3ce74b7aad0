"""Exception lines a paste cut inside a word, before any family's wording began ("...Total numb" +
"er of attention heads ..."): the pieces are joined only where the joined text states more than
the cut line did, and only onto a follower that opens with a lowercase letter or digit and no
prefix of its own."""

from __future__ import annotations

import io

from triage.ingest.control import ScanControl
from triage.ingest.read import InputStats, iter_chunks
from triage.ingest.scan import iter_marked
from triage.parse import stream
from triage.parse.vocabulary import matcher

HEAD = "(EngineCore_DP0 pid=212) ERROR 10-06 12:00:09 [core.py:718] "


def kinds_of(text: str) -> list[tuple[int, str]]:
    stats = InputStats("t")
    control = ScanControl()
    marked = iter_marked(
        iter_chunks(io.BytesIO(text.encode()), stats), stats, matcher(), stream.MAX_JOINS, control=control
    )
    return [(line.no, e.kind) for line, events in stream.line_events(marked, None, control) for e in events]


def test_a_cut_before_the_family_wording_is_joined_back():
    got = kinds_of(
        f"{HEAD}ValueError: Total numb\ner of attention heads (40) must be divisible by tensor parallel size (3).\n"
    )
    assert (1, "not_divisible") in got


def test_a_cut_inside_a_path_is_joined_back():
    text = (
        "ImportError: /usr/local/lib/python3.11/site-packages/flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.\n"
        "so: undefined symbol: _ZN3c105ErrorC2ENS_14SourceLocationE\n"
    )
    assert (1, "loader_error") in kinds_of(text)


def test_a_follower_with_a_header_of_its_own_is_never_joined():
    text = f"{HEAD}ValueError: Total numb\n{HEAD}er of attention heads (40) must be divisible by tensor parallel size (3).\n"
    assert all(kind != "not_divisible" for _, kind in kinds_of(text))


def test_a_join_that_states_nothing_new_is_not_made():
    """An unrelated lowercase line after a whole message stays a line of its own: the message keeps its text."""
    text = (
        f"{HEAD}RuntimeError: Worker failed while loading the checkpoint shards from disk\nsee the worker log above\n"
    )
    stats = InputStats("t")
    control = ScanControl()
    marked = iter_marked(
        iter_chunks(io.BytesIO(text.encode()), stats), stats, matcher(), stream.MAX_JOINS, control=control
    )
    messages = [
        e.message for _, events in stream.line_events(marked, None, control) for e in events if e.kind == "exception"
    ]
    assert messages == ["Worker failed while loading the checkpoint shards from disk"]
