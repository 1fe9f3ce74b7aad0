"""The reports under `--output URL`: part files of rows, written by the workers, read back to resume.

Each worker call writes one part file (`part-<uuid>.parquet` or `.jsonl`) of the logs it
triaged: a local file appears only once whole (written under a temporary name, then
renamed); an object store's put is whole or absent. So whatever a killed run wrote stays
usable, and a rerun skips every log whose (name, sha256) a part file already holds.

A row: `name` (the log's path or URL, redacted like the report's `input.name`), `sha256`
(of the bytes as stored, gzip included; null when they could not be read), `size`,
the summary (`status`, `cause`, `model`, `vllm_version`, `gpu`), `error` (an unreadable
log's message), `schema_version`, and `report`: the report's JSON (a string in Parquet,
an object in JSON Lines), or the error record.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from triage.errors import UsageError

SUMMARY_COLUMNS = ("name", "sha256", "status", "cause", "model", "vllm_version", "gpu", "error")
COLUMNS = (*SUMMARY_COLUMNS[:2], "size", *SUMMARY_COLUMNS[2:], "schema_version", "report")
FORMATS = {"parquet": ".parquet", "jsonl": ".jsonl"}
TABLE_FILE = "cause-table.txt"


def row_schema() -> Any:
    import pyarrow as pa

    text = pa.string()
    return pa.schema(
        [
            ("name", text),
            ("sha256", text),
            ("size", pa.int64()),
            ("status", text),
            ("cause", text),
            ("model", text),
            ("vllm_version", text),
            ("gpu", text),
            ("error", text),
            ("schema_version", pa.int32()),
            ("report", text),
        ]
    )


class Store:
    """One output folder (local path or URL) and its part files."""

    def __init__(self, url: str, fmt: str, storage_options: dict[str, Any]) -> None:
        from triage.apps.fleet.sources import filesystem

        if fmt not in FORMATS:
            raise UsageError(f"--output-format must be one of {', '.join(FORMATS)}")
        self.url, self.fmt, self.storage_options = url, fmt, storage_options
        self.fs, self.root = filesystem(url, storage_options)
        self.local = "file" in _protocols(self.fs)

    def __reduce__(self) -> tuple[Any, ...]:  # a worker opens its own file system
        return Store, (self.url, self.fmt, self.storage_options)

    def prepare(self) -> None:
        """Create the folder (object stores have none to create); one usage error if impossible."""
        try:
            if self.local:
                self.fs.makedirs(self.root, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"cannot write to {self.url}: {exc.strerror or exc}") from None

    def write(self, rows: list[dict[str, Any]]) -> str:
        """One part file holding `rows`; its path."""
        name = f"part-{uuid.uuid4().hex}{FORMATS[self.fmt]}"
        final = f"{self.root.rstrip('/')}/{name}"
        target = f"{self.root.rstrip('/')}/.tmp-{name}" if self.local else final
        with self.fs.open(target, "wb") as fh:
            if self.fmt == "parquet":
                import pyarrow as pa
                import pyarrow.parquet as pq

                pq.write_table(pa.Table.from_pylist(rows, schema=row_schema()), fh, compression="zstd")
            else:
                for row in rows:
                    line = {**row, "report": json.loads(row["report"])}
                    fh.write((json.dumps(line, ensure_ascii=False) + "\n").encode("utf-8"))
        if target != final:
            self.fs.mv(target, final)
        return final

    def parts(self) -> list[str]:
        """The part files written so far, by any run, in either format."""
        try:
            found = self.fs.find(self.root)
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted(
            p for p in found if p.rsplit("/", 1)[-1].startswith("part-") and p.endswith(tuple(FORMATS.values()))
        )

    def index(self) -> dict[tuple[str, str], dict[str, Any]]:
        """(name, sha256) -> the summary columns, for every log a part file holds."""
        out: dict[tuple[str, str], dict[str, Any]] = {}
        for part in self.parts():
            for row in self._summaries(part):
                if row.get("sha256"):
                    out[(row["name"], row["sha256"])] = row
        return out

    def _summaries(self, part: str) -> list[dict[str, Any]]:
        with self.fs.open(part, "rb") as fh:
            if part.endswith(".parquet"):
                import pyarrow.parquet as pq

                return pq.read_table(fh, columns=list(SUMMARY_COLUMNS)).to_pylist()
            return [{k: row.get(k) for k in SUMMARY_COLUMNS} for row in map(json.loads, fh.read().splitlines()) if row]

    def write_text(self, name: str, text: str) -> str:
        path = f"{self.root.rstrip('/')}/{name}"
        with self.fs.open(path, "wb") as fh:
            fh.write(text.encode("utf-8"))
        return self.fs.unstrip_protocol(path) if not self.local else path


def _protocols(fs: Any) -> tuple[str, ...]:
    protocol = fs.protocol
    return (protocol,) if isinstance(protocol, str) else tuple(protocol)
