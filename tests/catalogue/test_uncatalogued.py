"""Messages the catalogue does not hold: a release it left out, read as its build reads vLLM's source.

Leave one release out: the catalogue is loaded without the messages first seen in one of the
newest releases, and each of those messages (one line, filled with values by `pastes.py`) is
pasted twice: alone as its exception line, and at the end of a traceback whose innermost frame
is where vLLM raises it. The tool is asked with the run-time reading of uncatalogued messages
(`diagnose/uncatalogued.py`) and without it. The catalogue's own cause for each message (its
build read the release) is the answer key: the reading must name it far more often, and name
another cause rarely. `-s` prints the figures.
"""

from __future__ import annotations

import json
import re
from functools import cache

import pytest
from conftest import triage_text
from pastes import message
from test_pastes import DOC, ORDER, RELEASES, live

from triage.parse import catalogue as catalogue_module

HELD_OUT = RELEASES[-4:]  # the four newest releases, one at a time


def _without(release: str) -> catalogue_module.Catalogue:
    """The shipped catalogue as if its build had not read `release` (its new messages left out)."""
    native = []
    for name in catalogue_module.FILES[1:]:
        with open(catalogue_module.path(name), encoding="utf-8") as f:
            native += json.load(f)["entries"]
    return catalogue_module.Catalogue([e for e in DOC["entries"] if e["first"] != release] + native)


def _new_in(release: str) -> list[dict]:
    return [e for e in live(release) if e["first"] == release and "\n" not in message(e)]


def _traceback(e: dict, text: str) -> str:
    """The message at the end of a traceback whose innermost frame is its raise site."""
    return (
        "Traceback (most recent call last):\n"
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/openai/api_server.py", line 1, in run\n'
        "    run_server()\n"
        f'  File "/usr/local/lib/python3.12/dist-packages/{e["file"]}", line {e["line"]}, in {e["function"]}\n'
        f"    raise {e['exception']}(...)\n"
        f"{text}\n"
    )


@cache
def results(release: str, reading: bool) -> tuple[tuple[str, str, str | None], ...]:
    """(form, the catalogue's cause, the tool's first cause) for each held-out message and form."""
    from triage.diagnose import uncatalogued

    mp = pytest.MonkeyPatch()
    mp.setattr(catalogue_module, "_LOADED", _without(release))
    if not reading:
        mp.setattr(uncatalogued, "uncatalogued_hit", lambda fatal: None)
    try:
        out = []
        for e in _new_in(release):
            if not re.fullmatch(r"\w*(Error|Exception)", e["exception"]):
                continue
            line = f"{e['exception']}: {message(e)}"
            forms = (("line", line + "\n"), ("traceback", _traceback(e, line)), ("bare", message(e) + "\n"))
            for form, text in forms:
                got = triage_text(text).diagnoses
                out.append((form, e["cause"], got[0].id if got else None))
        return tuple(out)
    finally:
        mp.undo()


def _figures(rows, forms: tuple[str, ...]) -> tuple[int, int, int, int]:
    """(messages naming a cause, named right, named wrong, internal ones given a cause), in these forms."""
    rows = [r for r in rows if r[0] in forms]
    named = [r for r in rows if r[1] != "unknown_failure"]
    right = sum(1 for r in named if r[2] == r[1])
    wrong = sum(1 for r in named if r[2] not in (r[1], None, "unknown_failure"))
    false = sum(1 for r in rows if r[1] == "unknown_failure" and r[2] not in (None, "unknown_failure"))
    return len(named), right, wrong, false


# (forms, least share named right, most share of the named ones wrong): with its class a message
# is read by its wording, its place or the check-class prior.
BARS = {("line", "traceback"): (0.80, 0.12), ("bare",): (0.30, 0.20)}  # bare: 60-130 messages a release


@pytest.mark.parametrize("release", HELD_OUT)
def test_a_release_the_catalogue_left_out_is_read_by_its_wording_and_place(release, capsys):
    for forms, (recall_bar, wrong_bar) in BARS.items():
        before, after = _figures(results(release, False), forms), _figures(results(release, True), forms)
        with capsys.disabled():
            for label, (named, right, wrong, false) in (("without", before), ("with", after)):
                print(
                    f"\n{release} new messages as {'/'.join(forms)}, {label} the reading: {right}/{named} named "
                    f"right, {wrong} another cause; {false} of the rest given a cause"
                )
        named, right, wrong, _ = after
        assert named >= 20, f"too few new messages in {release} to measure"
        assert right / named >= recall_bar and right > before[1]
        assert wrong / max(1, right + wrong) <= wrong_bar


def test_the_releases_held_out_are_the_newest():
    assert all(ORDER[r] >= len(RELEASES) - 4 for r in HELD_OUT)
