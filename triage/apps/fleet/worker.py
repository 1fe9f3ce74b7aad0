"""The Ray Data task body: a warm Triager per worker, called on batches of logs.

Ray builds one `TriageBatch` per worker (an actor of `map_batches`): the compiled rules come
with the pickled Triager and the grammar and matcher are built once, in `__init__`. Each
call reads its logs (the small ones ahead, on a few threads), hashes them, skips those
already written, triages the others, writes their rows as one part file and returns the
small summary rows the driver counts. A log that
cannot be read, is binary or too large is a row with an error; nothing a log holds fails the
call. Ray is not imported here: the class is plain Python over pyarrow tables.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from triage.api import Summary, Triager, error_record, summarize
from triage.apps.fleet.sources import Reader, Source
from triage.apps.fleet.store import SUMMARY_COLUMNS, Store
from triage.errors import InputError
from triage.model.report import SCHEMA_VERSION

RESULT_COLUMNS = ("index", *SUMMARY_COLUMNS, "skipped", "cpu")
READ_THREADS = 8
PREFETCH_MAX = 4 << 20  # logs up to this size are read ahead (at most a batch's worth held at once)


class TriageBatch:
    def __init__(self, shared: Any, store: Store, storage_options: dict[str, Any], limit: int) -> None:
        """`shared`: (Triager, keys to skip), or `[ObjectRef]` of them (one copy in Ray's object store)."""
        triager, done = _resolve(shared)
        self.triager, self.store, self.done = triager, store, frozenset(done)
        self.reader = Reader(storage_options, limit)
        self.reads = ThreadPoolExecutor(READ_THREADS, thread_name_prefix="vllm-triage-read")
        triager.warm()

    def __call__(self, batch: Any) -> Any:
        import pyarrow as pa

        items = batch.to_pylist()
        sources = [Source(name=i["name"], url=i["url"], size=i["size"]) for i in items]
        # An object store answers a read in tens of ms, a log is triaged in a few: the small
        # logs of the batch are fetched together while the first ones are triaged.
        ahead = {
            n: self.reads.submit(self.reader.read, s) for n, s in enumerate(sources) if 0 <= s.size <= PREFETCH_MAX
        }
        results, rows = [], []
        for n, (item, source) in enumerate(zip(items, sources, strict=False)):
            cpu = time.process_time()
            result, row = self.one(source, ahead[n].result if n in ahead else None)
            results.append({"index": item["index"], **result, "cpu": time.process_time() - cpu})
            if row is not None:
                rows.append(row)
        if rows:
            self.store.write(rows)
        return pa.Table.from_pylist(results, schema=result_schema())

    def one(
        self, source: Source, read: Callable[[], bytes] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """(summary for the driver, row to write or None when skipped); `read`: the log's bytes
        when fetched ahead (it raises what reading raised)."""
        redact = self.triager.redact
        sha = None
        try:
            data = read() if read is not None else self.reader.read(source)
        except InputError as exc:
            record = error_record(source.name, str(exc), redact=redact)
        except Exception as exc:  # noqa: BLE001 - one bad log must not fail the job
            record = error_record(source.name, f"internal error: {type(exc).__name__}: {exc}", redact=redact)
        else:
            sha = hashlib.sha256(data).hexdigest()
            name = error_record(source.name, "", redact=redact)["input"]["name"]  # as the report names it
            if (name, sha) in self.done:
                return {"name": name, "sha256": sha, "skipped": True}, None
            record = self.triager.record(data, source.name)
            del data
        summary = summarize(record)
        result = {
            "name": record["input"]["name"],
            "sha256": sha,
            **_summary_fields(summary),
            "error": record.get("error"),
            "skipped": False,
        }
        row = {k: result[k] for k in SUMMARY_COLUMNS}
        row.update(
            size=source.size if source.size >= 0 else None,
            report=json.dumps(record, ensure_ascii=False),
            schema_version=SCHEMA_VERSION if "error" not in record else None,
        )
        return result, row


def _summary_fields(s: Summary) -> dict[str, Any]:
    return {"status": s.status, "cause": s.cause, "model": s.model, "vllm_version": s.vllm_version, "gpu": s.gpu}


def _resolve(shared: Any) -> tuple[Triager, Any]:
    if isinstance(shared, list):
        import ray

        ref: Any = shared[0]  # the (Triager, options) put in the object store once
        resolved: tuple[Triager, Any] = ray.get(ref)
        return resolved
    return shared


def result_schema() -> Any:
    import pyarrow as pa

    text = pa.string()
    return pa.schema(
        [("index", pa.int64()), *((c, text) for c in SUMMARY_COLUMNS), ("skipped", pa.bool_()), ("cpu", pa.float64())]
    )  # the worker's CPU seconds for the log (read, hash, triage)
