"""The floor under the CLI's time on a log: what any design in this interpreter must pay.

    .../bin/python benchmarks/floor.py LOG      # prints one JSON object of seconds

Run by bench.py with the interpreter of the install it measures. Three parts, each the least
a Python implementation of the tool can spend, whatever it does with the lines:

- `start`: a fresh interpreter that imports the modules a plain run imports (no input read);
- `passes`: in one process, the log's bytes read in the CLI's chunks, its lines counted
  (`bytes.count`, for line numbers) and the vocabulary searched once per chunk by the engine
  the CLI uses, no hit handed back to Python (Hyperscan's scan without a handler; another
  engine's `hits`): nothing masked, cut out or decoded;
- `floor`: their sum.

bench.py prints the floor beside `grep -c` on the same file: where the floor itself is over
five times grep's time, no tuning of the Python work can bring the CLI to that ratio.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

IMPORTS = "import triage.pipeline, triage.apps.cli, triage.render"


def start_time(python: str, runs: int = 5) -> float:
    """Best wall time of a fresh interpreter importing what a run imports."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    best = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([python, "-c", IMPORTS], check=True, env=env)
        best = min(best, time.perf_counter() - t0)
    return best


def passes_time(path: str, runs: int = 2) -> float:
    """Best time of reading, counting and searching the log once (the matcher built first)."""
    from triage.ingest.read import CHUNK_SIZE
    from triage.parse.vocabulary import matcher

    m = matcher()
    db = getattr(m.engine, "_db", None)  # Hyperscan: the search alone, no Python call per hit
    search = (lambda chunk: db.scan(chunk, scratch=m.engine._scratch())) if db is not None else m.hits
    best = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        lines = 0
        with open(path, "rb") as fh:
            while chunk := fh.read1(CHUNK_SIZE):
                lines += chunk.count(b"\n")
                search(chunk)
        best = min(best, time.perf_counter() - t0)
    return best


def main(path: str) -> dict[str, float]:
    start = start_time(sys.executable)
    passes = passes_time(path)
    return {"start": round(start, 4), "passes": round(passes, 4), "floor": round(start + passes, 4)}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
