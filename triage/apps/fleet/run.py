"""The driver of `batch --ray`: list the logs, run the workers on Ray Data, count, print, write.

The driver holds only the listing and the small summary rows; the logs are read and the
reports written by the workers. Without an address a local Ray is started for this run
(and stopped after); with one (`auto`, `HOST:PORT`, `ray://HOST:PORT`) the job joins that
cluster, whose workers must have vllm-triage installed with the `ray` extra. A Ray already
initialised in this process (a notebook, a test) is used as it is.
"""

from __future__ import annotations

import json
import math
import os
import time
from typing import IO, Any

from triage.errors import UsageError

DEFAULT_LIMIT = 512 << 20  # a worker holds one whole log in memory: larger ones are error rows
MAX_BATCH = 64  # logs per worker call (one part file each)
PROGRESS_SECONDS = 2.0
EXTRA_MISSING = (
    "--ray needs the [ray] extra (vllm-triage is not on PyPI): pip install '.[ray]' in a checkout, "
    'or pip install "vllm-triage[ray] @ git+URL"'
)


def ray_batch(args: Any, stdout: IO[str], stderr: IO[str]) -> tuple[list[Any], str]:
    """Triage `args.inputs` on Ray; (cause-table entries in input order, the table's text)."""
    from triage.api import Summary, Triager
    from triage.apps.cause_table import Entry, head_line, render
    from triage.apps.fleet.sources import list_sources
    from triage.apps.fleet.store import TABLE_FILE, Store
    from triage.apps.logfiles import own_outputs

    ray = _import_ray()
    storage = storage_options(args.storage_option)
    sources = list_sources(args.inputs, storage, skip=own_outputs(stdout, stderr, None))
    if not sources:
        raise UsageError(f"no log files found in: {' '.join(args.inputs)}")
    limit = args.max_bytes if args.max_bytes is not None else DEFAULT_LIMIT
    triager = Triager(args.rules, redact=not args.no_redact, max_bytes=limit)
    store = Store(args.output, args.output_format, storage)
    store.prepare()
    index = store.index()
    started = time.monotonic()
    own = not ray.is_initialized()
    if own:
        _start(ray, args.ray, args.jobs)
    _quiet_data(ray)
    try:
        workers = _workers(ray, args.jobs, len(sources))
        results = _run(ray, sources, triager, store, storage, limit, index, workers, stderr)
    finally:
        if own:
            ray.shutdown()
    entries, skipped = [], 0
    for r in sorted(results, key=lambda r: r["index"]):
        if r["skipped"]:
            skipped += 1
            r = {**r, **index[(r["name"], r["sha256"])]}
        summary = Summary(
            status=r["status"], cause=r["cause"], model=r["model"], vllm_version=r["vllm_version"], gpu=r["gpu"]
        )
        entries.append(Entry(r["name"], summary, r["error"]))
    head = head_line(len(entries), time.monotonic() - started, workers, entries, what="batch --ray")
    if skipped:
        head += f"skipped {skipped} logs already triaged in {args.output} (same path and content)\n"
    table = render(entries, head)
    store.write_text(TABLE_FILE, table)
    return entries, table


def _run(
    ray: Any,
    sources: list[Any],
    triager: Any,
    store: Any,
    storage: dict[str, Any],
    limit: int,
    index: dict[tuple[str, str], Any],
    workers: int,
    stderr: IO[str],
) -> list[dict[str, Any]]:
    """The Ray Data pipeline: sources -> warm workers -> summary rows, with progress on stderr."""
    from triage.apps.fleet.worker import TriageBatch

    items = [{"index": i, "name": s.name, "url": s.url, "size": s.size} for i, s in enumerate(sources)]
    batch = max(1, min(MAX_BATCH, math.ceil(len(items) / (workers * 4))))
    ds = ray.data.from_items(items, override_num_blocks=max(1, math.ceil(len(items) / batch)))
    # The Triager (its compiled rules) and the keys to skip go into the object store once; each
    # worker fetches them (the actor's own arguments stay small).
    shared = [ray.put((triager, frozenset(index)))]
    ds = ds.map_batches(
        TriageBatch,
        fn_constructor_args=(shared, store, storage, limit),
        batch_size=batch,
        batch_format="pyarrow",
        compute=ray.data.ActorPoolStrategy(size=workers),
        num_cpus=1,
    )
    progress = _Progress(len(items), stderr)
    results: list[dict[str, Any]] = []
    for part in ds.iter_batches(batch_size=None, batch_format="pyarrow"):
        rows = part.to_pylist()
        results.extend(rows)
        progress.add(rows)
    progress.finish()
    return results


class _Progress:
    """`N/M logs (S skipped, E unreadable), R logs/s` on stderr, every few seconds; at the end
    also the workers' CPU a triaged log (reading, hashing and triage: what sizes a cluster)."""

    def __init__(self, total: int, stream: IO[str]) -> None:
        self.total, self.stream = total, stream
        self.done = self.skipped = self.errors = 0
        self.cpu = 0.0
        self.start = self.last = time.monotonic()

    def add(self, rows: list[dict[str, Any]]) -> None:
        self.done += len(rows)
        self.skipped += sum(1 for r in rows if r["skipped"])
        self.errors += sum(1 for r in rows if r["status"] == "error")
        self.cpu += sum(r["cpu"] or 0.0 for r in rows if not r["skipped"])
        if time.monotonic() - self.last >= PROGRESS_SECONDS:
            self._line()

    def finish(self) -> None:
        triaged = self.done - self.skipped
        self._line(f", {1000 * self.cpu / triaged:.1f} ms of worker CPU a log" if triaged else "")

    def _line(self, tail: str = "") -> None:
        self.last = time.monotonic()
        rate = self.done / max(self.last - self.start, 1e-6)
        self.stream.write(
            f"ray: {self.done}/{self.total} logs ({self.skipped} skipped, {self.errors} unreadable), "
            f"{rate:.0f} logs/s{tail}\n"
        )
        self.stream.flush()


def _import_ray() -> Any:
    try:
        import ray
        import ray.data
    except ImportError:
        raise UsageError(EXTRA_MISSING) from None
    return ray


def _start(ray: Any, address: str, jobs: int | None) -> None:
    """A local Ray sized by --jobs (default: the machine's CPUs), or the cluster at `address`."""
    import logging

    quiet: dict[str, Any] = {"logging_level": logging.ERROR, "log_to_driver": False, "include_dashboard": False}
    try:
        if address in ("", "local"):
            ray.init(num_cpus=jobs or os.cpu_count() or 1, **quiet)
        else:
            ray.init(address=address, **quiet)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise UsageError(f"cannot start or reach Ray at {address or 'a local cluster'}: {exc}") from None


def _quiet_data(ray: Any) -> None:
    """Ray Data's own progress bars and INFO lines would bury ours."""
    import logging

    ray.data.DataContext.get_current().enable_progress_bars = False
    logging.getLogger("ray.data").setLevel(logging.ERROR)


def _workers(ray: Any, jobs: int | None, logs: int) -> int:
    """Workers (one CPU each): --jobs, else every CPU of the cluster; never more than the logs."""
    cpus = int(ray.cluster_resources().get("CPU", 1))
    return max(1, min(jobs or cpus, cpus, logs))


def storage_options(pairs: list[str]) -> dict[str, Any]:
    """`--storage-option KEY=VALUE` (repeatable) for fsspec: a value that reads as JSON is taken as
    such (`anon=true`, `client_kwargs={"region_name": "eu-west-1"}`), else as text."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--storage-option takes KEY=VALUE, not {pair!r}")
        try:
            out[key] = json.loads(value)
        except ValueError:
            out[key] = value
    return out
