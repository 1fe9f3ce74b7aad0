"""Every event the transformer writes names a registered kind and only that class's fields.

The transformer's methods return the fields of an event as a dict with its `kind` (the parser
builds the class from it, adding where the line came from). A typo in a kind or a field
would only fail when a log states that message; this reads every dict literal with a
`"kind"` in the transformer's modules and the metrics fast path, and checks it now.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from triage.model.events.base import KINDS, event_fields

ROOT = Path(__file__).resolve().parents[2] / "triage"
MODULES = sorted(ROOT.glob("parse/transform*.py")) + [ROOT / "ingest" / "periodic.py"]
WHERE = {"line", "origin", "pid", "truncated"}  # set by the parser from the line, never by a method


def event_dicts(path: Path) -> list[tuple[int, str, set[str]]]:
    """(line, kind, keys) of each dict literal whose "kind" is a string constant."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Dict):
            continue
        keys = {k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
        kind = next(
            (
                v.value
                for k, v in zip(node.keys, node.values, strict=True)
                if isinstance(k, ast.Constant) and k.value == "kind" and isinstance(v, ast.Constant)
            ),
            None,
        )
        if kind is not None:
            found.append((node.lineno, kind, keys - {"kind"}))
    return found


CASES = [(path, *case) for path in MODULES for case in event_dicts(path)]


def test_the_transformer_writes_events():
    assert len(CASES) > 80  # the reading below found the methods' dicts


@pytest.mark.parametrize("path, lineno, kind, keys", CASES, ids=[f"{p.name}:{n}:{k}" for p, n, k, _ in CASES])
def test_each_event_dict_names_a_kind_and_its_fields(path, lineno, kind, keys):
    assert kind in KINDS, f"{path.name}:{lineno}: no event class has kind {kind!r}"
    fields = set(event_fields(KINDS[kind])) - WHERE
    assert keys <= fields, f"{path.name}:{lineno}: {kind} has no field(s) {sorted(keys - fields)}"
