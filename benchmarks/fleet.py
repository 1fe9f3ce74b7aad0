"""Logs per second and CPU per log: the Python API in one process, local `batch`, and `batch --ray`.

    python benchmarks/fleet.py                    # the corpus (../shared/corpus) or the fixtures, 5 copies
    python benchmarks/fleet.py --copies 1 --skip-ray
    python benchmarks/fleet.py --logs DIR --copies 10

Every way triages the same logs (copied `--copies` times into a temporary folder, so each
run reads as many files), each in a fresh process of this interpreter, so each pays its own
start-up:

  api        `triage.api.Triager().record(bytes, name)` per log in one process (what a Ray or
             Spark task calls): CPU from the child's rusage, start-up and imports included
  batch -j1  `vllm-triage batch DIR -j 1 --jsonl FILE` (same CPU accounting)
  batch -j2  the same with two worker processes
  ray 1, 2   `vllm-triage batch --ray DIR --output TMP -j N` on a local Ray started for the run:
             wall includes Ray's start (~10 s here); "CPU/log" is the workers' own CPU per log
             (read, hash, triage), as the run reports it; logs/s is the run's own rate after start

The done-when of issue 27: the API's CPU per log is at most 1.2x local batch's (-j 1).
Not a test: nothing asserts a time; run it by hand, once or twice.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "corpus"
API_LOOP = """
import os, sys, json
from triage.api import Triager
paths = json.load(open(sys.argv[1]))
t = Triager()
n = 0
for p in paths:
    with open(p, "rb") as fh:
        n += len(json.dumps(t.record(fh.read(), p))) > 0
print(n)
"""


def _logs(source: Path, copies: int, into: Path) -> list[str]:
    """The logs of `source` copied `copies` times under `into` (names kept, one folder per copy)."""
    found = sorted(p for p in source.rglob("*") if p.is_file() and p.name.endswith((".log", ".log.gz")))
    out = []
    for c in range(copies):
        folder = into / f"copy{c}"
        folder.mkdir(parents=True)
        for i, p in enumerate(found):
            target = folder / f"{i:04d}-{p.name}"
            shutil.copyfile(p, target)
            out.append(str(target))
    return out


def _timed(cmd: list[str]) -> tuple[float, float, str]:
    """(wall s, CPU s of the child and its children that it waited for, stderr)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 1):
        sys.exit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), proc.stderr


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--logs", type=Path, default=CORPUS if CORPUS.is_dir() else ROOT / "fixtures" / "logs")
    ap.add_argument("--copies", type=int, default=5)
    ap.add_argument("--skip-ray", action="store_true")
    args = ap.parse_args()
    cli = [sys.executable, "-m", "triage"]
    rows = []
    with tempfile.TemporaryDirectory(prefix="vllm-triage-fleet-") as tmp:
        work = Path(tmp)
        paths = _logs(args.logs, args.copies, work / "logs")
        n = len(paths)
        (work / "paths.json").write_text(json.dumps(paths))
        mb = sum(os.path.getsize(p) for p in paths) / 1e6
        print(
            f"{n} logs ({mb:.1f} MB) from {args.logs}, {args.copies} copies; {os.cpu_count()} cores, "
            f"load {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
        )
        wall, cpu, _ = _timed([sys.executable, "-c", API_LOOP, str(work / "paths.json")])
        rows.append(("api, one process", wall, cpu, n / wall))
        for jobs in (1, 2):
            wall, cpu, _ = _timed(
                [*cli, "batch", str(work / "logs"), "-j", str(jobs), "--jsonl", str(work / "b.jsonl")]
            )
            rows.append((f"batch -j{jobs}", wall, cpu, n / wall))
        for workers in () if args.skip_ray else (1, 2):
            out = work / f"ray{workers}"
            wall, _, err = _timed(
                [*cli, "batch", "--ray", str(work / "logs"), "--output", str(out), "-j", str(workers)]
            )
            m = re.search(r"(\d+) logs/s, ([\d.]+) ms of worker CPU a log", err)
            if not m:
                sys.exit(f"no rate in the --ray run's output:\n{err[-2000:]}")
            rows.append(
                (
                    f"ray, {workers} worker{'s' if workers > 1 else ''}",
                    wall,
                    float(m.group(2)) * n / 1000,
                    float(m.group(1)),
                )
            )
    print(f"\n{'way':<18} {'wall s':>7} {'logs/s':>7} {'CPU ms/log':>11}")
    for name, wall, cpu, rate in rows:
        print(f"{name:<18} {wall:7.2f} {rate:7.0f} {1000 * cpu / n:11.2f}")
    api, batch = rows[0][2], rows[1][2]
    print(f"\nAPI CPU per log / batch -j1's: {api / batch:.2f}x (done-when: at most 1.2x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
