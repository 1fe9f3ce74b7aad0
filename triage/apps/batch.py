"""`vllm-triage batch DIR_OR_GLOB...`: triage many logs in parallel; a table of causes, JSON Lines.

Each log (plain or gzip) is triaged in a worker process (one per core by default), the
same way `vllm-triage LOG` triages it. The summary counts logs per primary cause, healthy,
incomplete and unreadable ones. JSON Lines hold one report per log, in input order, named
by the path as given; a log that could not be read gets `{"input": {"name": ...}, "error": ...}`.

Exit codes: 0 no failure found in any log, 1 a failure found in some log (or some log
could not be read), 2 usage error.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import stat
import sys
import time
from collections import Counter
from typing import IO

from triage.errors import TriageError, UsageError
from triage.apps.exit_codes import ArgParser

EXIT_OK, EXIT_SOME_FAILED = 0, 1
LOG_SUFFIXES = (".log", ".log.gz", ".txt", ".txt.gz", ".out", ".gz")
ROTATED = re.compile(r"\.(?:log|txt|out)\.\d{1,4}(?:\.gz)?$")  # logrotate's vllm.log.1, vllm.log.2.gz

# Set in each worker (and in-process) by _init: what every log is triaged with.
_OPTIONS = None
_RULES = None


def _parser() -> argparse.ArgumentParser:
    from triage.apps.conventions import size_arg

    p = ArgParser(prog="vllm-triage batch", description="Triage many logs in parallel and count their causes.")
    p.add_argument("inputs", nargs="+", metavar="DIR_OR_GLOB",
                   help=f"a folder (its {', '.join(LOG_SUFFIXES[:4])} files and rotated ones such as vllm.log.1, "
                   "recursively), a glob or a file")
    p.add_argument("-j", "--jobs", type=int, default=None, help="worker processes (default: one per CPU)")
    p.add_argument("--jsonl", metavar="FILE", help="write one JSON report per log to FILE")
    p.add_argument("-f", "--format", choices=("table", "jsonl"), default="table",
                   help="stdout: the summary table (default) or JSON Lines (the table then goes to stderr)")
    p.add_argument("--rules", action="append", default=[], metavar="DIR_OR_FILE", help="add a rule pack")
    p.add_argument("--no-redact", action="store_true", help="show secrets found in the logs (local use only)")
    p.add_argument("--max-bytes", type=size_arg, default=None, metavar="SIZE",
                   help="refuse logs larger than this (e.g. 20MiB)")
    return p


def batch_command(argv: list[str], stdin, stdout: IO[str], stderr: IO[str]) -> int:
    args = _parser().parse_args(argv)
    jobs = args.jobs if args.jobs is not None else (os.cpu_count() or 1)
    if jobs < 1:
        raise UsageError("--jobs must be at least 1")
    paths = find_logs(args.inputs, skip=_own_outputs(stdout, stderr, args.jsonl))
    if not paths:
        raise UsageError(f"no log files found in: {' '.join(args.inputs)}")
    from triage.pipeline import Options, load_rules

    if args.no_redact:
        from triage.apps.output import NO_REDACT_WARNING

        stderr.write(NO_REDACT_WARNING)
    options = Options(redact=not args.no_redact, extra_rules=args.rules, max_bytes=args.max_bytes)
    load_rules(args.rules)  # a broken pack is one usage error here, not one per log
    started = time.monotonic()
    results = triage_many(paths, options, jobs)
    elapsed = time.monotonic() - started
    lines = [line for _, line, _ in results]
    if args.jsonl:
        try:
            with open(args.jsonl, "w", encoding="utf-8") as fh:
                fh.writelines(line + "\n" for line in lines)
        except OSError as exc:
            raise UsageError(f"cannot write {args.jsonl}: {exc.strerror or exc}") from None
    table = summary(results, elapsed, min(jobs, len(paths)))
    if args.format == "jsonl":
        stdout.writelines(line + "\n" for line in lines)
        stderr.write(table)
    else:
        stdout.write(table)
    bad = any(status.partition(":")[0] in ("failed", "error") for _, _, status in results)
    return EXIT_SOME_FAILED if bad else EXIT_OK


def find_logs(inputs: list[str], skip: frozenset[tuple[int, int]] = frozenset()) -> list[str]:
    """Files named by folders (recursively), globs and plain paths; sorted, each once.

    `skip` holds (device, inode) of files this run writes (`batch . > b.out`): never read back."""
    out: dict[str, None] = {}
    for item in inputs:
        if os.path.isdir(item):
            found = []  # type: ignore[var-annotated]
            for root, dirs, files in os.walk(item):
                dirs.sort()
                found.extend(os.path.join(root, f) for f in sorted(files) if is_log_name(f))
            out.update(dict.fromkeys(found))
        elif os.path.exists(item):
            out[item] = None
        else:
            out.update(dict.fromkeys(p for p in sorted(glob.glob(item, recursive=True)) if os.path.isfile(p)))
    return [p for p in out if _identity(p) not in skip]


def is_log_name(name: str) -> bool:
    return name.endswith(LOG_SUFFIXES) or bool(ROTATED.search(name))


def _identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _own_outputs(stdout, stderr, jsonl: str | None) -> frozenset[tuple[int, int]]:
    """The files behind our stdout/stderr (a shell redirection) and --jsonl, if they exist."""
    found = set()
    for stream in (stdout, stderr):
        try:
            st = os.fstat(stream.fileno())
        except (AttributeError, OSError, ValueError):
            continue
        if stat.S_ISREG(st.st_mode):
            found.add((st.st_dev, st.st_ino))
    if jsonl and _identity(jsonl):
        found.add(_identity(jsonl))  # type: ignore[arg-type]
    return frozenset(found)


def triage_many(paths: list[str], options, jobs: int) -> list[tuple[str, str, str]]:
    """(path, JSON line, status) per log, in input order; status is the outcome or "error"."""
    if jobs == 1 or len(paths) == 1:
        _init(options)
        return [_triage_one(p) for p in paths]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    # fork (Linux): workers start with everything the parent imported and built.
    context = multiprocessing.get_context("fork") if sys.platform.startswith("linux") else None
    if context is not None:
        _warm(options)
    workers = min(jobs, len(paths))
    chunk = max(1, min(16, len(paths) // (workers * 4)))
    try:
        with ProcessPoolExecutor(workers, mp_context=context, initializer=_init, initargs=(options,)) as pool:
            return list(pool.map(_triage_one, paths, chunksize=chunk))
    except BrokenProcessPool:  # a worker died (killed for memory?): finish in this process
        _init(options)
        return [_triage_one(p) for p in paths]


_WARM_UP = b"""INFO 10-02 16:20:11 [api_server.py:1896] vLLM API server version 0.10.2
INFO 10-02 16:20:11 [core.py:76] Initializing a V1 LLM engine (v0.10.2) with config: model='m', dtype=auto
INFO 10-02 16:20:12 [gpu_model_runner.py:2392] Model loading took 14.2474 GiB and 4.102 seconds
INFO 10-02 16:20:13 [gpu_worker.py:298] Available KV cache memory: 53.11 GiB
ERROR 10-02 16:20:14 [core.py:586] EngineCore failed to start.
ERROR 10-02 16:20:14 [core.py:586] Traceback (most recent call last):
ERROR 10-02 16:20:14 [core.py:586]   File "/x/vllm/v1/engine/core.py", line 577, in run_engine_core
ERROR 10-02 16:20:14 [core.py:586] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 \
has a total capacity of 79.19 GiB of which 1.05 GiB is free.
"""


def _warm(options) -> None:
    """Build what every worker would otherwise build for itself (grammar, matcher, validators)."""
    import io

    from triage.pipeline import run

    _init(options)
    try:
        run(io.BytesIO(_WARM_UP), "warm-up", _OPTIONS, _RULES)
    except Exception:  # noqa: BLE001 - only a warm-up
        pass


def _init(options) -> None:
    global _OPTIONS, _RULES
    from triage.pipeline import load_rules

    _OPTIONS, _RULES = options, load_rules(options.extra_rules)


def _triage_one(path: str) -> tuple[str, str, str]:
    from triage.pipeline import run
    from triage.ingest.read import open_source
    from triage.model.report import found_failure

    try:
        stream, _ = open_source(path, regular_only=True)  # a FIFO or a device would hold the batch up
        with stream:
            report = run(stream, path, _OPTIONS, _RULES)
    except TriageError as exc:
        return path, _error_line(path, str(exc)), "error"
    except Exception as exc:  # noqa: BLE001 - one bad log must not stop the batch
        return path, _error_line(path, f"internal error: {type(exc).__name__}: {exc}"), "error"
    status = "failed" if found_failure(report) else report.outcome
    primary = report.diagnoses[0].id if report.diagnoses else None
    return path, report.model_dump_json(), f"{status}:{primary}" if primary else status


def _error_line(path: str, message: str) -> str:
    """The record of a log that could not be read; its name and message may quote a secret."""
    if _OPTIONS is None or _OPTIONS.redact:
        from triage.diagnose.redact import redact_text

        path, message = redact_text(path), redact_text(message)
    return json.dumps({"input": {"name": path}, "error": message}, ensure_ascii=False)


def summary(results: list[tuple[str, str, str]], elapsed: float, jobs: int) -> str:
    """The table: logs per primary cause, then healthy, incomplete and unreadable ones."""
    causes: Counter[str] = Counter()
    other: Counter[str] = Counter()
    errors = []
    for _path, line, status in results:
        kind, _, cause = status.partition(":")
        if kind == "failed":
            causes[cause or "failed, no cause named"] += 1
        else:
            other[kind] += 1
        if kind == "error":
            record = json.loads(line)  # its name redacted like its message
            errors.append(f"  {record['input']['name']}: {record['error']}")
    failed = sum(causes.values())
    head = (f"vllm-triage batch: {len(results)} logs in {elapsed:.1f} s with {jobs} "
            f"job{'s' if jobs != 1 else ''}: {failed} failed, {other['healthy']} healthy, "
            f"{other['incomplete']} incomplete, {other['error']} unreadable\n")
    width = max([len(c) for c in causes] + [24])
    rows = [f"{'primary cause':<{width}}  logs"]
    rows += [f"{c:<{width}}  {n:>4}" for c, n in sorted(causes.items(), key=lambda cn: (-cn[1], cn[0]))]
    rows += [f"{label:<{width}}  {other[label]:>4}" for label in ("healthy", "recovered", "incomplete", "error") if other[label]]
    text = head + "\n" + "\n".join(rows) + "\n"
    if errors:
        text += "\nunreadable:\n" + "\n".join(errors[:50]) + "\n"
    return text
