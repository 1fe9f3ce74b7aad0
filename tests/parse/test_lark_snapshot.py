"""The parser loaded from its snapshot (parse/lark_snapshot.py) parses as lark's own build does.

Each side runs in a fresh interpreter (string hashes differ between processes, and a snapshot
is read by a later process than the one that wrote it) over every line of the fixture logs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import FIXTURES, ROOT

PARSE_ALL = """
import json, sys
from triage.parse import grammar as g, lark_snapshot
mode = sys.argv[1]
if mode == "built":  # as lark builds it from its own cache: no snapshot read or written
    lark_snapshot.load = lambda name: None
    lark_snapshot.save = lambda parser, name: None
else:
    name = lark_snapshot.snapshot_name(g._cache_path(), g._options())
    assert lark_snapshot.load(name) is not None, "no snapshot was read"
from triage.ingest.lines import peel
from triage.parse.parse import parse_line_detail
out = []
for path in sys.argv[2:]:
    with open(path, encoding="utf-8", errors="replace") as fh:
        for no, raw in enumerate(fh, 1):
            events, cut = parse_line_detail(peel(raw.rstrip("\\n"), no))
            out.append([repr(events), cut])
print(json.dumps(out))
"""


def _parse_all(mode: str, logs: list[str], env: dict[str, str]) -> list:
    done = subprocess.run([sys.executable, "-c", PARSE_ALL, mode, *logs], capture_output=True, text=True,
                          env=env, cwd=ROOT, check=True)
    return json.loads(done.stdout)


def test_the_snapshot_parses_every_fixture_line_as_lark_builds_it(tmp_path):
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path), "PYTHONPATH": str(ROOT)}
    logs = sorted(str(p) for p in FIXTURES.glob("*/*.log"))
    # the first start writes the snapshot; the ones after read it
    subprocess.run([sys.executable, "-c", "from triage.parse.grammar import grammar; grammar()"],
                   env=env, cwd=ROOT, check=True)
    assert any(p.name.endswith(".snapshot") for p in (tmp_path / "vllm-triage").iterdir())
    assert _parse_all("snapshot", logs, env) == _parse_all("built", logs, env)
