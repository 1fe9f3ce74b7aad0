"""What a client sent: the format asked for, the JSON and multipart bodies, their limits.

Every parser error becomes an `ApiError` 400 with one line: the multipart parser's own
exceptions (a boundary too long, a broken part), JSON nested past the recursion limit, bytes
that are not UTF-8. Nothing here touches the network or the framework.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from typing import Any

from triage.apps.serve.limits import FORMATS, MAX_NAME, MAX_PARTS, ApiError, too_large

# python-multipart warns about broken bodies on its own logger; without this, Python's
# last-resort handler would print the bare warning on stderr, outside the server's log format.
logging.getLogger("python_multipart").addHandler(logging.NullHandler())
logging.getLogger("python_multipart").propagate = False


def media_type(header: str | None) -> str:
    return (header or "").split(";")[0].strip().lower()


def pick_format(query: str | None, field: str | None, accept: str | None) -> str:
    """`?format=` beats the body's `format` field, which beats the Accept header; JSON by default."""
    for value in (query, field):
        if value:
            if value not in FORMATS:
                raise ApiError(400, f"unknown format {value[:40]!r}; must be one of: {', '.join(FORMATS)}")
            return value
    for part in (accept or "").split(","):
        media = part.split(";")[0].strip().lower()
        if media in ("text/markdown", "text/x-markdown"):
            return "markdown"
        if media in ("application/json", "*/*", "application/*"):
            return "json"
    return "json"


def check_length(headers: Mapping[str, str], limit: int) -> None:
    """Refuse on Content-Length before any of the body is read; the stream is counted as well."""
    length = headers.get("content-length")
    if length is None:
        return
    if not length.isdigit():
        raise ApiError(400, "bad Content-Length header")
    if int(length) > limit:
        raise too_large(limit)


def clean_name(name: Any, default: str) -> str:
    if not isinstance(name, str) or not name.strip():
        return default
    name = "".join(ch for ch in os.path.basename(name.replace("\\", "/")) if ch.isprintable())
    return name[:MAX_NAME] or default


def parse_json_body(body: bytes) -> tuple[bytes, str | None, str]:
    """`{"log": "...", "format": "...", "name": "..."}` -> (log bytes, format, name)."""
    try:
        data = json.loads(body)
    except UnicodeDecodeError:
        raise ApiError(400, "the JSON body is not UTF-8") from None
    except RecursionError:
        raise ApiError(400, "the JSON body is nested too deeply") from None
    except ValueError as exc:
        raise ApiError(400, f"the body is not valid JSON: {str(exc)[:120]}") from None
    if not isinstance(data, dict):
        raise ApiError(400, 'the JSON body must be an object: {"log": "...", "format": "json", "name": "..."}')
    unknown = sorted(set(data) - {"log", "format", "name"})
    if unknown:
        raise ApiError(400, f"unknown field {unknown[0][:40]!r} in the JSON body; known: log, format, name")
    if not isinstance(data.get("log"), str):
        raise ApiError(400, 'the JSON body needs "log": the startup log as a string')
    fmt = data.get("format")
    if fmt is not None and not isinstance(fmt, str):
        raise ApiError(400, '"format" must be a string')
    return data["log"].encode("utf-8", "replace"), fmt, clean_name(data.get("name"), "request.log")


class Multipart:
    """A multipart/form-data body parsed in memory as it streams in, at most MAX_PARTS parts."""

    def __init__(self, content_type: str, limit: int) -> None:
        from python_multipart.multipart import MultipartParser, parse_options_header

        self._options = parse_options_header
        self.limit, self.total = limit, 0
        _, params = parse_options_header(content_type)
        if not params.get(b"boundary"):
            raise ApiError(400, "the multipart body has no boundary")
        self.parts: list[dict[str, Any]] = []
        self._field, self._value = bytearray(), bytearray()
        callbacks = {
            "on_part_begin": self._begin,
            "on_header_field": lambda d, s, e: self._field.extend(d[s:e]),
            "on_header_value": lambda d, s, e: self._value.extend(d[s:e]),
            "on_header_end": self._header_end,
            "on_part_data": lambda d, s, e: self.parts[-1]["data"].extend(d[s:e]),
        }
        with _parse_errors():
            self._parser = MultipartParser(params[b"boundary"], callbacks)  # type: ignore[arg-type]

    def _begin(self) -> None:
        if len(self.parts) >= MAX_PARTS:
            raise ApiError(400, f"the multipart body has more than {MAX_PARTS} parts")
        self.parts.append({"headers": {}, "data": bytearray()})

    def _header_end(self) -> None:
        self.parts[-1]["headers"][bytes(self._field).lower()] = bytes(self._value)
        self._field.clear()
        self._value.clear()

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        if self.total > self.limit:
            raise too_large(self.limit)
        with _parse_errors():
            self._parser.write(chunk)

    def fields(self) -> tuple[bytes, str | None, str]:
        """(the `file` part, the `format` field, a name) once the body is complete."""
        with _parse_errors():
            self._parser.finalize()
        found: dict[str, tuple[bytes, str | None]] = {}
        for part in self.parts:
            _, disp = self._options(part["headers"].get(b"content-disposition", b""))
            name = disp.get(b"name", b"").decode("utf-8", "replace")
            filename = disp.get(b"filename")
            found.setdefault(name, (bytes(part["data"]), filename.decode("utf-8", "replace") if filename else None))
        if "file" not in found:
            raise ApiError(400, "the multipart body has no 'file' part: upload the log as the field 'file'")
        data, filename = found["file"]  # type: ignore[assignment]
        fmt = found["format"][0].decode("utf-8", "replace").strip() if "format" in found else None
        given = found["name"][0][:MAX_NAME].decode("utf-8", "replace") if "name" in found else None
        return data, fmt or None, clean_name(given or filename, "upload.log")


class _parse_errors:
    """python-multipart raises ValueError subclasses (FormParserError and others): a 400 each."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, exc, tb) -> bool:  # type: ignore[exit-return]
        if exc is not None and isinstance(exc, ValueError) and not isinstance(exc, ApiError):
            raise ApiError(400, f"malformed multipart body: {str(exc)[:120]}") from None
        return False
