"""Where the logs are: local folders, globs and files, or object storage URLs, through fsspec.

A local item is found as `batch` finds it (the same names, so the same reports and table);
a URL (`s3://bucket/logs/`, `gs://...`, `file:///...`) is listed through its fsspec file
system: a folder recursively (log names only), a glob, or one object. Each log becomes a
`Source`: the name its report carries, what to open it by, and its listed size (a log over
the limit is refused without being read).
"""

from __future__ import annotations

import os
from typing import Any

from msgspec import Struct

from triage.errors import InputError, UsageError

GLOB_CHARS = frozenset("*?[")


class Source(Struct, frozen=True, kw_only=True):
    name: str  # as given (a path) or the full URL of the object
    url: str  # an absolute local path, or the URL
    size: int = -1  # -1: not known before reading


def is_url(item: str) -> bool:
    return "://" in item


def list_sources(
    inputs: list[str], storage_options: dict[str, Any], skip: frozenset[tuple[int, int]] = frozenset()
) -> list[Source]:
    """Every log the inputs name, each once, in the order given (each item's logs sorted)."""
    from triage.apps.logfiles import find_logs

    found: dict[str, Source] = {}
    local = [item for item in inputs if not is_url(item)]
    for path in find_logs(local, skip=skip) if local else []:
        found[path] = Source(name=path, url=os.path.abspath(path), size=_local_size(path))
    for item in (i for i in inputs if is_url(i)):
        for source in _list_url(item, storage_options):
            found.setdefault(source.name, source)
    return list(found.values())


def _local_size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return -1  # read (and reported) by the worker


def filesystem(url: str, storage_options: dict[str, Any]) -> tuple[Any, str]:
    """(fsspec file system, path in it); one usage error when no file system serves the URL."""
    import fsspec

    try:
        return fsspec.core.url_to_fs(url, **storage_options)
    except (ImportError, ValueError) as exc:  # an unknown protocol, or its package not installed
        raise UsageError(f"cannot open {url}: {exc}") from None


def _list_url(url: str, storage_options: dict[str, Any]) -> list[Source]:
    from triage.apps.logfiles import is_log_name

    fs, path = filesystem(url, storage_options)
    try:
        if GLOB_CHARS & set(path):
            infos = fs.glob(path, detail=True)
        elif fs.isdir(path):
            infos = {p: i for p, i in fs.find(path, detail=True).items() if is_log_name(p.rsplit("/", 1)[-1])}
        else:
            infos = {path: fs.info(path)}
    except FileNotFoundError:
        raise UsageError(f"no such file or folder: {url}") from None
    except OSError as exc:  # a bucket that does not exist, credentials refused
        raise UsageError(f"cannot list {url}: {exc}") from None
    out = []
    for p in sorted(infos):
        info = infos[p]
        if info.get("type", "file") != "file":
            continue
        full = fs.unstrip_protocol(p)
        out.append(Source(name=full, url=full, size=int(info.get("size") or 0)))
    return out


class Reader:
    """Reads whole logs (up to a limit) in a worker, keeping one file system per protocol."""

    def __init__(self, storage_options: dict[str, Any], limit: int) -> None:
        self.storage_options, self.limit = storage_options, limit
        self._systems: dict[str, Any] = {}

    def read(self, source: Source) -> bytes:
        """The log's bytes; `InputError` when it is over the limit or cannot be read."""
        if source.size > self.limit:
            raise InputError(f"input is larger than the limit of {self.limit} bytes")
        try:
            data = self._read_url(source.url) if is_url(source.url) else self._read_local(source.url)
        except InputError as exc:  # said of the absolute path the worker opened: say it of the name
            raise InputError(str(exc).replace(source.url, source.name)) from None
        except OSError as exc:
            raise InputError(f"cannot read {source.name}: {exc.strerror or exc}") from None
        if len(data) > self.limit:
            raise InputError(f"input is larger than the limit of {self.limit} bytes")
        return data

    def _read_local(self, path: str) -> bytes:
        from triage.ingest.read import open_source

        stream, _ = open_source(path, regular_only=True)  # a FIFO or a device is refused
        with stream:
            return stream.read(self.limit + 1)

    def _read_url(self, url: str) -> bytes:
        protocol = url.split("://", 1)[0]
        if protocol not in self._systems:
            self._systems[protocol] = filesystem(url, self.storage_options)[0]
        fs = self._systems[protocol]
        with fs.open(fs._strip_protocol(url), "rb") as fh:
            return fh.read(self.limit + 1)
