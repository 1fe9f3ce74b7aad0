"""Generalisation to logs never seen: one-line messages of older releases, end to end.

Each catalogued vLLM message live in a release (0.6.6, 0.8.5, 0.10.2, 0.33), and each message
of the layers under it (huggingface_hub, transformers, safetensors, torch), is rendered with
plausible values as the one line a user pastes and run through the tool. Its first cause must
be the catalogue's (or none / unknown_failure where the catalogue names none): a hand-written
rule that names another cause over-fires (a precision bug), or the catalogue's mapping is
wrong. The few disagreements that stand are listed below with the reason, from vLLM's source
and the taxonomy, never from a log."""

from __future__ import annotations

import json
import re

import pytest
from conftest import triage_text
from test_runtime import _line

from triage.parse.catalogue import path

with open(path(), encoding="utf-8") as _file:
    DOC = json.load(_file)
ORDER = {v: i for i, v in enumerate(DOC["releases"]["vllm"])}
RELEASES = ["0.6.6.post1", "0.8.5.post1", "0.10.2", "0.33.0"]
CLASSES = ("ValueError", "RuntimeError", "AssertionError", "NotImplementedError", "TypeError")

# (vLLM source file, function) -> (the cause the tool gives, why it stands)
STANDING = {
    ("vllm/model_executor/models/registry.py", "_raise_for_unsupported"): (
        "dependency_missing",
        "an architecture moved to a plugin: the taxonomy names both signs; the tool's remedy installs the plugin",
    ),
    ("vllm/v1/worker/gpu_model_runner.py", "_dummy_pooler_run_task"): (
        "unknown_failure",
        "the rendered task value is unquoted; vLLM prints it quoted, as the warm-up rule reads it",
    ),
}


def _renders(e: dict) -> bool:
    """A template with literal braces (`in {4, 8}`) cannot be rendered by field substitution."""
    return re.search(e["pattern"], re.sub(r"\s+", " ", _line(e))) is not None


def _agrees(e: dict) -> bool:
    got = [d.id for d in triage_text(_line(e) + "\n").diagnoses][:1]
    want = [e["cause"]] if e["cause"] != "unknown_failure" else [[], ["unknown_failure"]]
    if got == want or got in want:
        return True
    standing = STANDING.get((e["file"], e["function"]))
    return standing is not None and got == [standing[0]]


def _live(release: str) -> list[dict]:
    """One-line messages of this release whose rendered line its own pattern still matches
    (a template with literal braces, `in {4, 8}`, cannot be rendered by field substitution)."""
    out = []
    for e in DOC["entries"]:
        if e["package"] != "vllm" or e["exception"] not in CLASSES or "\n" in e["template"]:
            continue
        if len(e["template"]) >= 400 or not ORDER[e["first"]] <= ORDER[release] <= ORDER[e["last"]]:
            continue
        if _renders(e):
            out.append(e)
    return out


@pytest.mark.parametrize("release", RELEASES)
def test_a_pasted_line_of_an_older_release_gets_the_catalogues_cause(release):
    entries = _live(release)
    assert len(entries) >= 200, len(entries)
    wrong = [(e["cause"], f"{e['file']}:{e['function']}", _line(e)[:120]) for e in entries if not _agrees(e)]
    assert not wrong, "\n".join(map(str, wrong))


def test_a_pasted_line_of_a_layer_gets_the_catalogues_cause():
    """The layers' messages whose class reads as an exception (`...Error:`, `...Exception:`)."""
    entries = [
        e
        for e in DOC["entries"]
        if e["package"] != "vllm"
        and re.fullmatch(r"\w*(Error|Exception)", e["exception"])
        and "\n" not in e["template"]
        and len(e["template"]) < 400
        and _renders(e)
    ]
    assert len(entries) >= 150, len(entries)
    wrong = [(e["cause"], f"{e['file']}:{e['function']}", _line(e)[:120]) for e in entries if not _agrees(e)]
    assert not wrong, "\n".join(map(str, wrong))


def test_the_standing_disagreements_still_happen():
    """A listed disagreement that no longer happens is removed from the list."""
    for (file, function), (cause, _why) in STANDING.items():
        mine = [e for r in RELEASES for e in _live(r) if (e["file"], e["function"]) == (file, function)]
        mine += [  # the layers' messages (no vLLM release)
            e for e in DOC["entries"] if e["package"] != "vllm" and (e["file"], e["function"]) == (file, function)
        ]
        answers = {tuple(d.id for d in triage_text(_line(e) + "\n").diagnoses[:1]) for e in mine}
        assert (cause,) in answers or (cause == "unknown_failure" and () in answers), (file, function, answers)
