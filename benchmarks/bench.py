"""Throughput, memory, report size and start-up of the `vllm-triage` CLI as `pip install .` gives it.

    python benchmarks/bench.py                               # every log below but serve-1GB
    python benchmarks/bench.py --logs startup-2MB,longserve-200MB --keep
    python benchmarks/bench.py --logs serve-1GB --keep --runs 1
    python benchmarks/bench.py --cli dev                     # this interpreter's `python -m triage`

The CLI measured is the default install: a virtual environment under benchmarks/out/
(git-ignored) into which this checkout is installed with `pip install .`, no extras, as a
user gets it (refreshed on each run; `--cli PATH` names another `vllm-triage`). Logs
(generated under benchmarks/out/, seeded; `--keep` reuses them):

  startup-2MB      a TP=8 startup (NCCL chatter, warnings, progress bars) failing at KV-cache allocation
  serve-200MB      a startup, hours of serving with request logging (25 requests/s, access lines,
                   metrics every 10 s, request-level tracebacks), then the engine dies of a CUDA OOM
  access-200MB     the same without request logging
  serve-1GB        serve-200MB at 1 GiB (not in the default set)
  longserve-200MB  ~35 h at ~2 requests/s: 12k metrics lines, prompts that quote errors densely
  metrics-10MB     nothing but metrics lines (V1 and V0 wording)
  restarts-500     500 identical failing startup attempts (a restart loop)
  smi-100k         a startup refused for want of free memory, then an nvidia-smi CSV of 100 000 processes
  chains-10k       10 000 exceptions chained by "During handling of the above exception ..."
  batch-200        200 startup logs through `vllm-triage batch`, 1 job and one per core

Each log is triaged in a subprocess (best of `--runs`): wall time, MB/s, peak RSS, the size
of the JSON report, `grep -c 'out of memory'` on the same file and the ratio; for the
serving logs, whether the diagnosis equals that of the log without its serving section.
Then the start-up of a small log: the CLI beside `python -c pass` (same interpreter), and
where the time goes (benchmarks/startup.py: import, rules, scan, parse, diagnose, render).
Absolute times move with the machine's load; the ratios, taken in one run, move less.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import floor
import logs
import shapes

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "out"
VENV = OUT / "venv-default"
MB = 1_000_000
LOGS = {  # name -> (writer, target size)
    "startup-2MB": (lambda p, n: logs.write_log("startup", p, n), 2 * MB),
    "serve-200MB": (lambda p, n: logs.write_log("serve", p, n), 200 * MB),
    "access-200MB": (lambda p, n: logs.write_log("access", p, n), 200 * MB),
    "serve-1GB": (lambda p, n: logs.write_log("serve", p, n), 1 << 30),
    "longserve-200MB": (shapes.longserve, 200 * MB),
    "metrics-10MB": (shapes.metrics, 10 * MB),
    "restarts-500": (shapes.restarts, 0),
    "smi-100k": (shapes.smi, 0),
    "chains-10k": (shapes.chains, 0),
    "batch-200": (None, 0),
}
DEFAULT = [n for n in LOGS if n != "serve-1GB"]
SERVING = ("serve", "access", "longserve")  # logs with a startup+failure twin (logs.write_short)
SMALL = ROOT / "fixtures" / "logs" / "foreign_gpu_processes" / "v1-0.10.2-oom-with-nvidia-smi-bundle.log"
BATCH_LOGS = 200
REPORT_LIMIT = 64 << 10
# The children run as an installed tool would: with .pyc files (pip writes them at install;
# PYTHONDONTWRITEBYTECODE=1 in a dev shell would make every run compile the package again).
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def default_install() -> list[str]:
    """`pip install .` (no extras) into benchmarks/out/venv-default; the command that runs its CLI."""
    python = VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--force-reinstall", "--no-deps", str(ROOT)],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", str(ROOT)],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    shutil.rmtree(ROOT / "build", ignore_errors=True)  # pip's build folder in the checkout
    return [str(VENV / "bin" / "vllm-triage")]


def _measure(cmd: list[str]) -> tuple[float, int, str, int, float]:
    """Wall seconds, peak RSS (KiB), stdout, exit code and CPU seconds of one run of `cmd`
    (CPU time moves less than wall time with the machine's load)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    if os.path.exists("/usr/bin/time"):
        p = subprocess.run(["/usr/bin/time", "-f", "%M", *cmd], capture_output=True, text=True, env=CHILD_ENV)
        last = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "0"
        rss = int(last) if last.isdigit() else 0
    else:
        p = subprocess.run(cmd, capture_output=True, text=True, env=CHILD_ENV)
        rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return wall, rss, p.stdout, p.returncode, cpu


def _best(cmd: list[str], runs: int) -> tuple[float, int, str, int, float]:
    best, rss, out, rc, cpu = float("inf"), 0, "", 0, float("inf")
    for _ in range(runs):
        wall, r, out, rc, c = _measure(cmd)
        best, rss, cpu = min(best, wall), max(rss, r), min(cpu, c)
    return best, rss, out, rc, cpu


def _grep_time(path: Path) -> float:
    best = float("inf")
    for _ in range(2):  # the second run reads from the page cache like the triage runs
        t0 = time.perf_counter()
        # to a pipe: GNU grep stops at the first match when its output is /dev/null
        subprocess.run(["grep", "-c", "out of memory", str(path)], stdout=subprocess.PIPE)
        best = min(best, time.perf_counter() - t0)
    return best


def _diagnosis(report: dict) -> tuple:
    diags = report.get("diagnoses") or []
    failure = report.get("failure") or {}
    return report.get("outcome"), diags[0]["id"] if diags else None, failure.get("phase")


def bench_log(cli: list[str], python: str, name: str, keep: bool, runs: int, problems: list[str]) -> tuple:
    path = OUT / f"{name}.log"
    writer, size = LOGS[name]
    if not (keep and path.exists()):
        t0 = time.perf_counter()
        writer(path, size)
        print(
            f"generated {path.relative_to(ROOT)} ({path.stat().st_size / MB:.1f} MB) in "
            f"{time.perf_counter() - t0:.1f} s",
            file=sys.stderr,
        )
    nbytes = path.stat().st_size
    with open(path, "rb") as fh:
        lines = sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 24), b""))
    grep = _grep_time(path)
    best, rss, out, rc, cpu = _best([*cli, "--format", "json", str(path)], runs)
    try:
        report = json.loads(out)
    except ValueError:
        problems.append(f"{name}: no JSON report (exit {rc})")
        report = {}
    if len(out) > REPORT_LIMIT:
        problems.append(f"{name}: the JSON report is {len(out) / 1024:.0f} KiB (limit {REPORT_LIMIT >> 10})")
    diag = _diagnosis(report)
    same = ""
    if name.startswith(SERVING):
        short = OUT / "serve-short.log"
        logs.write_short(short)
        sout = _measure([*cli, "--format", "json", str(short)])[2]
        theirs = _diagnosis(json.loads(sout))
        same = "yes" if theirs == diag else f"NO ({theirs})"
        if theirs != diag:
            problems.append(f"{name}: diagnosis {diag} differs from the startup+failure log's {theirs}")
    under = ""
    if name.startswith(SERVING):  # what any Python design pays on this log (floor.py)
        p = subprocess.run(
            [python, str(ROOT / "benchmarks" / "floor.py"), str(path)], stdout=subprocess.PIPE, text=True, env=CHILD_ENV
        )
        under = f"{json.loads(p.stdout)['floor'] / grep:.1f}" if p.returncode == 0 else "?"
    return (
        name,
        nbytes / MB,
        lines,
        best,
        nbytes / MB / best,
        rss / 1024,
        len(out) / 1024,
        grep,
        best / grep,
        f"{diag[0]}/{diag[1]}",
        same,
        cpu,
        under,
    )


def bench_batch(cli: list[str], runs: int) -> tuple:
    """`vllm-triage batch` over BATCH_LOGS startup logs (the fixtures, copied round-robin), with
    one job and with one per core: wall time, CPU use, speed-up."""
    folder = OUT / "batch-200"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    fixtures = sorted((ROOT / "fixtures" / "logs").rglob("*.log"))
    total = 0
    for i in range(BATCH_LOGS):
        data = fixtures[i % len(fixtures)].read_bytes()
        (folder / f"log{i:03d}.log").write_bytes(data)
        total += len(data)
    out = {}
    for jobs in (1, os.cpu_count() or 1):
        best, cpu = float("inf"), ""
        for _ in range(runs):
            t0 = time.perf_counter()
            p = subprocess.run(
                ["/usr/bin/time", "-f", "%P", *cli, "batch", str(folder), "--jobs", str(jobs)],
                capture_output=True,
                text=True,
                env=CHILD_ENV,
            )
            wall = time.perf_counter() - t0
            if wall < best:
                best, cpu = wall, p.stderr.strip().splitlines()[-1]
        out[jobs] = (best, cpu)
    return total, out


def bench_startup(cli: list[str], python: str, runs: int) -> list[str]:
    """The CLI on a small log beside `python -c pass`, and the in-process phase breakdown."""
    runs = max(runs, 5)
    bare = min(_measure([python, "-c", "pass"])[0] for _ in range(runs))
    tool = min(_measure([*cli, "--format", "json", str(SMALL)])[0] for _ in range(runs))
    tool_cpu = min(_measure([*cli, "--format", "json", str(SMALL)])[4] for _ in range(runs))
    bare_cpu = min(_measure([python, "-c", "pass"])[4] for _ in range(runs))
    phases: dict[str, float] = {}
    for _ in range(runs):
        p = subprocess.run(
            [python, str(ROOT / "benchmarks" / "startup.py"), str(SMALL)],
            stdout=subprocess.PIPE,
            text=True,
            env=CHILD_ENV,
        )
        got = json.loads(p.stdout)
        if not phases or got["total"] < phases["total"]:
            phases = got
    imports = floor.start_time(python, runs)
    return [
        f"start-up, {SMALL.name} ({SMALL.stat().st_size / 1000:.1f} kB), best of {runs}:",
        f"  python -c pass {bare * 1000:.0f} ms; vllm-triage {tool * 1000:.0f} ms = x{tool / bare:.1f} "
        f"(CPU: {bare_cpu * 1000:.0f} ms, {tool_cpu * 1000:.0f} ms = x{tool_cpu / max(bare_cpu, 1e-3):.1f})",
        f"  the run's imports alone (benchmarks/floor.py): {imports * 1000:.0f} ms = x{imports / bare:.1f}",
        "  in process (ms): " + ", ".join(f"{k} {v:.0f}" for k, v in phases.items()),
    ]


def _table(rows: list[tuple]) -> list[str]:
    header = (
        "log",
        "MB",
        "lines",
        "wall s",
        "cpu s",
        "MB/s",
        "RSS MiB",
        "JSON KB",
        "grep s",
        "x grep",
        "floor x",
        "outcome/cause",
        "same as short",
    )
    fmt = "{:<15} {:>6} {:>8} {:>7} {:>6} {:>6} {:>7} {:>7} {:>6} {:>6} {:>7}  {:<30} {}"
    out = [fmt.format(*header)]
    for r in rows:
        out.append(
            fmt.format(
                r[0],
                f"{r[1]:.1f}",
                r[2],
                f"{r[3]:.2f}",
                f"{r[11]:.2f}",
                f"{r[4]:.0f}",
                f"{r[5]:.1f}",
                f"{r[6]:.1f}",
                f"{r[7]:.3f}",
                f"{r[8]:.1f}",
                r[12],
                r[9],
                r[10],
            )
        )
    out.append(
        "floor x: benchmarks/floor.py's floor (start-up with the run's imports, then reading, line counting"
        " and one vocabulary search, no hit handled) over grep's time"
    )
    return out


def bench(cli: list[str], python: str, names: list[str], keep: bool, runs: int) -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    subprocess.run([*cli, "--format", "json", str(SMALL)], stdout=subprocess.DEVNULL, env=CHILD_ENV)  # warm caches
    rows, problems, batch = [], [], None
    for name in names:
        if name == "batch-200":
            batch = bench_batch(cli, runs)
        else:
            rows.append(bench_log(cli, python, name, keep, runs, problems))
    load = os.getloadavg()
    print(
        f"{len(os.sched_getaffinity(0))} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
        f"CLI: {' '.join(cli)}"
    )
    print("\n".join(_table(rows)))
    if batch is not None:
        total, by_jobs = batch
        print(f"\nbatch of {BATCH_LOGS} startup logs ({total / MB:.1f} MB):")
        one = by_jobs.get(1, (0, ""))[0]
        for jobs, (wall, cpu) in sorted(by_jobs.items()):
            speed = f"  speed-up x{one / wall:.2f}" if jobs != 1 and wall else ""
            print(f"  --jobs {jobs}: {wall:.2f} s wall, {BATCH_LOGS / wall:.0f} logs/s, CPU {cpu}{speed}")
    print()
    print("\n".join(bench_startup(cli, python, runs)))
    for p in problems:
        print("problem:", p, file=sys.stderr)
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--logs", "--sizes", dest="logs", default=",".join(DEFAULT), help=f"comma-separated, from: {', '.join(LOGS)}"
    )
    ap.add_argument("--keep", action="store_true", help="reuse logs already generated under benchmarks/out/")
    ap.add_argument("--runs", type=int, default=3, help="triage runs per log (the best wall time is shown)")
    ap.add_argument(
        "--cli",
        default="default",
        help="'default' (pip install . into benchmarks/out/venv-default), 'dev' (python -m triage "
        "with this interpreter), or the path of a vllm-triage executable",
    )
    ap.add_argument(
        "--matcher",
        choices=("hyperscan", "python"),
        help="force one search engine (VLLM_TRIAGE_MATCHER), e.g. the pure-Python fallback",
    )
    args = ap.parse_args(argv)
    if args.matcher:
        CHILD_ENV["VLLM_TRIAGE_MATCHER"] = args.matcher
    names = [n.strip() for n in args.logs.split(",") if n.strip()]
    unknown = [n for n in names if n not in LOGS]
    if unknown:
        ap.error(f"unknown log {unknown[0]!r}; must be one of: {', '.join(LOGS)}")
    os.chdir(ROOT)
    if args.cli == "default":
        cli, python = default_install(), str(VENV / "bin" / "python")
    elif args.cli == "dev":
        cli, python = [sys.executable, "-m", "triage"], sys.executable
    else:
        cli, python = [args.cli], str(Path(args.cli).parent / "python")
    return bench(cli, python, names, args.keep, max(1, args.runs))


if __name__ == "__main__":
    sys.exit(main())
