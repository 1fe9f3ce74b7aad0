"""Start-up beside a familiar tool: `vllm-triage` on a small log against `black --check` on a one-line file.

    python benchmarks/startup_pair.py                 # the default install (as bench.py builds it)
    python benchmarks/startup_pair.py --cli dev       # this interpreter's `vllm-triage`
    python benchmarks/startup_pair.py --pairs 31

Both are Python command-line tools that start, read a small input and answer; black is not a
dependency: install it where the benchmark runs (`pip install black` into the venv measured,
or give `--black PATH`). The runs are paired (one of each, in alternating order, so a load
spike hits both) and the medians printed, with the median of the per-pair ratios.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import CHILD_ENV, SMALL, default_install  # the benchmark folder is not a package


def _wall(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=CHILD_ENV, check=False)
    return time.perf_counter() - t0


def pairs(triage: list[str], black: list[str], n: int) -> list[tuple[float, float]]:
    """(triage seconds, black seconds) for n pairs, the first of each pair alternating."""
    out = []
    for i in range(n):
        if i % 2:
            b = _wall(black)
            t = _wall(triage)
        else:
            t = _wall(triage)
            b = _wall(black)
        out.append((t, b))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cli", default="default", help="'default' (pip install . into benchmarks/out/), 'dev', or a path")
    ap.add_argument("--black", help="the black to run (default: the one beside the CLI, else on PATH)")
    ap.add_argument("--pairs", type=int, default=21)
    args = ap.parse_args(argv)
    if args.cli == "default":
        cli = default_install()
    elif args.cli == "dev":
        cli = [str(Path(sys.executable).parent / "vllm-triage")]
    else:
        cli = [args.cli]
    black = args.black or str(Path(cli[0]).parent / "black")
    if not os.path.exists(black):
        black = shutil.which("black") or ""
    if not black:
        print("black is not installed: pip install black (into the venv measured), or --black PATH", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        one = Path(tmp) / "one.py"
        one.write_text("x = 1\n")
        triage_cmd = [*cli, "--format", "json", str(SMALL)]
        black_cmd = [black, "--check", "-q", str(one)]
        for cmd in (triage_cmd, black_cmd):  # warm caches (ours, black's) and the page cache
            _wall(cmd)
        got = pairs(triage_cmd, black_cmd, args.pairs)
    t = statistics.median(p[0] for p in got)
    b = statistics.median(p[1] for p in got)
    ratio = statistics.median(p[0] / p[1] for p in got)
    load = os.getloadavg()
    print(f"{args.pairs} paired runs, load average {load[0]:.2f}; CLI: {' '.join(cli)}")
    print(f"  vllm-triage --format json {SMALL.name}: median {t * 1000:.0f} ms")
    print(f"  black --check (one line): median {b * 1000:.0f} ms")
    print(f"  ratio: {t / b:.2f} (medians), {ratio:.2f} (median of the pairs' ratios)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
