"""The catalogue at run time: what it answers, when it is loaded, who may read it.

The generalisation cases come from vLLM's source (the shipped catalogue), not from any log:
each message of vLLM 0.33 is rendered with plausible values as the one line a user pastes."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from conftest import FIXTURES, ROOT, triage_text

from triage.ingest.last_bytes import LastBytes
from triage.parse.catalogue import catalogue, path
from triage.rule_engine.load import load_rules

with open(path(), encoding="utf-8") as _file:
    ENTRIES = json.load(_file)["entries"]
RULE_CAUSES = {r.cause for r in load_rules() if r.id.startswith("catalogue-")}
PER_CAUSE = 4


def _value(name: str) -> str:
    n = name.lower()
    if re.search(r"gib|memory", n):
        return "3.50"
    if re.search(r"len|size|num|count|tokens|blocks|rank|heads", n):
        return "4096"
    if re.search(r"model|path|repo", n):
        return "acme/orca-13b"
    return "auto"


def _line(entry: dict) -> str:
    text = re.sub(r"\{([^{}]*)\}", lambda m: _value(m.group(1)), entry["template"])
    return f"{entry['exception']}: {text}"


def _sample() -> list[dict]:
    """Up to PER_CAUSE one-line ValueError/RuntimeError messages of vLLM 0.33 per cause a rule reads."""
    out = []
    for cause in sorted(RULE_CAUSES):
        mine = sorted(
            (
                e
                for e in ENTRIES
                if e["cause"] == cause
                and e["package"] == "vllm"
                and e["last"] == "0.33.0"
                and e["exception"] in ("ValueError", "RuntimeError")
                and "\n" not in e["template"]
                and len(e["template"]) < 400
            ),
            key=lambda e: e["id"],
        )
        out += mine[:PER_CAUSE]
    return out


SAMPLE = _sample()


@pytest.mark.parametrize("entry", SAMPLE, ids=[f"{e['cause']}-{e['id']}" for e in SAMPLE])
def test_a_pasted_vllm_033_message_is_matched_to_its_cause(entry):
    hit = catalogue().match(_line(entry))
    assert hit is not None and hit["cause"] == entry["cause"], _line(entry)


def test_pasted_vllm_033_messages_get_their_cause_from_the_tool():
    """End to end: the report's first cause. A hand-written rule may know the message better
    (and name another cause by the taxonomy's tie-breaks); at most one in ten may differ."""
    wrong = []
    for entry in SAMPLE:
        got = [d.id for d in triage_text(_line(entry) + "\n").diagnoses]
        if got[:1] != [entry["cause"]]:
            wrong.append((entry["cause"], got[:1], _line(entry)[:120]))
    assert len(SAMPLE) >= 25
    assert len(wrong) <= len(SAMPLE) // 10, wrong


def test_text_that_only_resembles_a_message_is_not_matched():
    assert catalogue().match("ValueError: User-specified something went wrong here") is None
    assert catalogue().match("") is None


def _modules(code: str) -> set[str]:
    probe = f"{code}\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    return set(json.loads(out.splitlines()[-1]))


@pytest.mark.parametrize(
    "log",
    [
        "healthy/v0-0.2.7-mistral7b-a100-uvicorn-running.log",  # no failure
        "invalid_arguments/v0102-pydantic-gpu-memory-utilization-1-5.log",  # a specific rule explains it
    ],
)
def test_the_catalogue_is_not_loaded_unless_a_failure_needs_it(log):
    code = f"import io\nfrom triage.apps.cli import main\nmain([{str(FIXTURES / log)!r}, '-f', 'json'], stdout=io.StringIO())"
    assert "triage.parse.catalogue" not in _modules(code)


def test_an_unexplained_failure_loads_it():
    log = FIXTURES / "invalid_arguments" / "v0141-catalogue-message.log"
    code = f"import io\nfrom triage.apps.cli import main\nmain([{str(log)!r}, '-f', 'json'], stdout=io.StringIO())"
    assert "triage.parse.catalogue" in _modules(code)


def test_only_a_fallback_rule_may_read_the_catalogue(tmp_path):
    from triage.errors import RulePackError
    from triage.rule_engine.load import load_packs

    pack = tmp_path / "p.yaml"
    pack.write_text(
        "schema: 1\nrules:\n  - id: x\n    cause: invalid_arguments\n    title: t\n"
        "    when:\n      all: [\"catalogue.cause == 'invalid_arguments'\"]\n    rank: 50\n"
        "    explanation: [e]\n    remedies: [{text: r}]\n"
    )
    with pytest.raises(RulePackError, match="fallback"):
        load_packs([pack])


def test_the_tail_keeps_the_last_lines_with_their_numbers():
    tail = LastBytes(size=32)
    data = b"".join(f"line {i}\n".encode() for i in range(1, 21))
    chunks = [data[i : i + 7] for i in range(0, len(data), 7)]
    assert b"".join(tail.watch(chunks)) == data
    lines = tail.lines(20)
    assert lines[-1] == (20, "line 20") and all(text == f"line {no}" for no, text in lines)
    assert len(lines) >= 3
