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
import json
import os
import re
import sys
import time
from typing import IO, TYPE_CHECKING

from triage.apps.exit_codes import ArgParser
from triage.apps.logfiles import LOG_SUFFIXES, find_logs, is_log_name, own_outputs
from triage.errors import TriageError, UsageError

__all__ = ["LOG_SUFFIXES", "batch_command", "find_logs", "is_log_name", "summary", "triage_many"]

if TYPE_CHECKING:
    from triage.api import Summary, Triager

EXIT_OK, EXIT_SOME_FAILED = 0, 1

# Set in each worker (and in-process) by _init: what every log is triaged with.
_TRIAGER = None


def _parser() -> argparse.ArgumentParser:
    from triage.apps.conventions import size_arg

    p = ArgParser(prog="vllm-triage batch", description="Triage many logs in parallel and count their causes.")
    p.add_argument(
        "inputs",
        nargs="*",
        metavar="DIR_OR_GLOB",
        help=f"a folder (its {', '.join(LOG_SUFFIXES[:4])} files and rotated ones such as vllm.log.1, "
        "recursively), a glob or a file",
    )
    p.add_argument(
        "-j",
        "--jobs",
        type=int,
        default=None,
        help="worker processes, or Ray workers with --ray (default: one per CPU of the machine or cluster)",
    )
    p.add_argument("--jsonl", metavar="FILE", help="write one JSON report per log to FILE")
    p.add_argument(
        "-f",
        "--format",
        choices=("table", "jsonl"),
        default="table",
        help="stdout: the summary table (default) or JSON Lines (the table then goes to stderr)",
    )
    p.add_argument("--rules", action="append", default=[], metavar="DIR_OR_FILE", help="add a rule pack")
    p.add_argument("--no-redact", action="store_true", help="show secrets found in the logs (local use only)")
    p.add_argument(
        "--max-bytes",
        type=size_arg,
        default=None,
        metavar="SIZE",
        help="refuse logs larger than this (e.g. 20MiB; with --ray the default is 512MiB)",
    )
    ray = p.add_argument_group("on a Ray cluster (the [ray] extra: pip install '.[ray]' in a checkout)")
    ray.add_argument(
        "--ray",
        nargs="?",
        const="local",
        default=None,
        metavar="ADDRESS",
        help="run on Ray: a local one started for the run, or the cluster at ADDRESS "
        "(auto, HOST:PORT, ray://HOST:PORT); inputs may be URLs (s3://, gs://, file://)",
    )
    ray.add_argument("--output", metavar="URL", help="with --ray: the folder (local or URL) for the reports")
    ray.add_argument(
        "--output-format",
        choices=("parquet", "jsonl"),
        default="parquet",
        help="with --ray: the reports' format (default: parquet)",
    )
    ray.add_argument(
        "--storage-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="with --ray: an fsspec option for URLs (e.g. endpoint_url=http://127.0.0.1:9000)",
    )
    return p


RAY_ADDRESS = re.compile(r"^(?:auto|local|ray(?:\+\w+)?://\S+|[\w.-]+:\d+)$")


def _ray_args(args: argparse.Namespace) -> None:
    """`--ray logs/` took the first input for an address: give it back. Refuse what --ray does not do."""
    if args.ray not in ("local", None) and not RAY_ADDRESS.match(args.ray):
        args.inputs.insert(0, args.ray)
        args.ray = "local"
    if not args.inputs:
        raise UsageError("the following arguments are required: DIR_OR_GLOB")
    if args.ray is not None and not args.output:
        raise UsageError("--ray needs --output URL: the folder the reports are written to (and resumed from)")
    if args.ray is not None and (args.jsonl or args.format == "jsonl"):
        raise UsageError("--ray writes its reports under --output (--output-format jsonl), not --jsonl")
    if args.ray is None and (args.output or args.storage_option):
        raise UsageError("--output and --storage-option go with --ray (without it, use --jsonl FILE)")


def batch_command(argv: list[str], stdin, stdout: IO[str], stderr: IO[str]) -> int:
    args = _parser().parse_args(argv)
    if args.jobs is not None and args.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    _ray_args(args)
    if args.ray is not None:
        from triage.apps.fleet.run import ray_batch

        entries, table = ray_batch(args, stdout, stderr)
        stdout.write(table)
        return EXIT_SOME_FAILED if any(e.summary.status in ("failed", "error") for e in entries) else EXIT_OK
    jobs = args.jobs if args.jobs is not None else (os.cpu_count() or 1)
    paths = find_logs(args.inputs, skip=own_outputs(stdout, stderr, args.jsonl))
    if not paths:
        raise UsageError(f"no log files found in: {' '.join(args.inputs)}")
    from triage.api import Triager

    if args.no_redact:
        from triage.apps.output import NO_REDACT_WARNING

        stderr.write(NO_REDACT_WARNING)
    # the packs are compiled here: a broken one is one usage error, not one per log
    triager = Triager(args.rules, redact=not args.no_redact, max_bytes=args.max_bytes)
    started = time.monotonic()
    results = triage_many(paths, triager, jobs)
    elapsed = time.monotonic() - started
    lines = [line for _, line, _ in results]
    if args.jsonl:
        from triage.apps.safe_write import write_file

        write_file(args.jsonl, "".join(line + "\n" for line in lines), inputs=paths)
    table = summary(results, elapsed, min(jobs, len(paths)))
    if args.format == "jsonl":
        stdout.writelines(line + "\n" for line in lines)
        stderr.write(table)
    else:
        stdout.write(table)
    bad = any(s.status in ("failed", "error") for _, _, s in results)
    return EXIT_SOME_FAILED if bad else EXIT_OK


def triage_many(paths: list[str], triager: Triager, jobs: int) -> list[tuple[str, str, Summary]]:
    """(path, JSON line, summary) per log, in input order (a summary's status is "error" for a
    log that could not be read)."""
    if jobs == 1 or len(paths) == 1:
        _init(triager)
        return [_triage_one(p) for p in paths]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    # fork (Linux): workers start with everything the parent imported and built.
    context = multiprocessing.get_context("fork") if sys.platform.startswith("linux") else None
    if context is not None:
        _init(triager)
        triager.warm()  # built once here, not in every worker
    workers = min(jobs, len(paths))
    chunk = max(1, min(16, len(paths) // (workers * 4)))
    try:
        with ProcessPoolExecutor(workers, mp_context=context, initializer=_init, initargs=(triager,)) as pool:
            return list(pool.map(_triage_one, paths, chunksize=chunk))
    except BrokenProcessPool:  # a worker died (killed for memory?): finish in this process
        _init(triager)
        return [_triage_one(p) for p in paths]


def _init(triager: Triager) -> None:
    global _TRIAGER
    _TRIAGER = triager


def _triage_one(path: str) -> tuple[str, str, Summary]:
    from triage.api import Summary, summarize

    assert _TRIAGER is not None
    try:
        report = _TRIAGER.triage_path(path)  # a FIFO or a device would hold the batch up: refused
    except TriageError as exc:
        return path, _error_line(path, str(exc)), Summary(status="error")
    except Exception as exc:  # noqa: BLE001 - one bad log must not stop the batch
        return path, _error_line(path, f"internal error: {type(exc).__name__}: {exc}"), Summary(status="error")
    from triage.render.json_format import stamp
    from triage.render.sanitise import clean_data

    report = clean_data(report)  # a name that is not UTF-8 is shown escaped, never a failed batch
    return path, stamp(report).model_dump_json(), summarize(report)


def _error_line(path: str, message: str) -> str:
    """The record of a log that could not be read; its name and message may quote a secret."""
    from triage.api import error_record
    from triage.render.sanitise import clean

    path, message = clean(path, name=True), clean(message, name=True)

    return json.dumps(error_record(path, message, redact=_TRIAGER is None or _TRIAGER.redact), ensure_ascii=False)


def summary(results: list[tuple[str, str, Summary]], elapsed: float, jobs: int) -> str:
    """The cause table (`cause_table.render`), headed by the run's counts and time."""
    from triage.apps.cause_table import Entry, head_line, render

    entries = [_error_entry(line, s) if s.status == "error" else Entry(path, s) for path, line, s in results]
    return render(entries, head_line(len(results), elapsed, jobs, entries))


def _error_entry(line: str, s: Summary):
    from triage.apps.cause_table import Entry

    record = json.loads(line)  # its name redacted like its message
    return Entry(record["input"]["name"], s, record["error"])
