"""Bytes in, physical text lines out: streaming, bounded, never trusting the input.

Reading is the only stage that touches raw bytes. It decodes incrementally (UTF-8 with
invalid bytes replaced, UTF-16 when a BOM says so), unpacks gzip with a cap on the
expanded size, refuses input that is plainly binary, keeps only the last frame of a
`\\r`-redrawn progress bar, and caps line length so one hostile line cannot hold memory.
"""

from __future__ import annotations

import codecs
import gzip
import io
import os
import stat
import sys
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from .errors import InputError

CHUNK_SIZE = 1 << 20
MAX_LINE_CHARS = 64 * 1024
MAX_GZIP_EXPANDED = 4 << 30
BINARY_SNIFF_BYTES = 8192


@dataclass
class InputStats:
    """What the reader saw, for the report's `input` block."""

    name: str
    bytes: int = 0
    lines: int = 0
    truncated_lines: int = 0
    compressed: bool = False
    encoding: str = "utf-8"
    wrap_width: int | None = None  # a hard-wrapped paste: the column its lines were cut at
    indent: str = ""  # a paste indented as a block: the whitespace cut from every line
    notes: list[str] = field(default_factory=list)


def open_source(path: str, stdin: BinaryIO | None = None) -> tuple[BinaryIO, str]:
    """Open a path or '-' for binary reading, with one clear error for each way it fails."""
    if path == "-":
        stream = stdin if stdin is not None else sys.stdin.buffer
        return stream, "<stdin>"
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise InputError(f"no such file: {path}") from None
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"{path} is a directory, not a log file")
    try:
        return open(path, "rb"), os.path.basename(path)
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None


def _looks_binary(head: bytes) -> bool:
    """Text logs hold almost no control bytes; executables, images and archives hold many."""
    if not head:
        return False
    sample = head[:BINARY_SNIFF_BYTES]
    if sample.count(0) > len(sample) // 4:
        return True
    controls = sum(1 for b in sample if b < 9 or 13 < b < 27 or 27 < b < 32)
    return controls > len(sample) // 10


class _CappedGzip(io.RawIOBase):
    """A gzip stream that refuses to expand past a limit (a decompression bomb stops here)."""

    def __init__(self, raw: BinaryIO, limit: int) -> None:
        self._gz = gzip.GzipFile(fileobj=raw, mode="rb")
        self._limit = limit
        self._out = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[override]
        try:
            data = self._gz.read(len(buffer))
        except (OSError, EOFError, gzip.BadGzipFile, zlib.error) as exc:
            raise InputError(f"damaged gzip input: {exc}") from None
        self._out += len(data)
        if self._out > self._limit:
            raise InputError(f"gzip input expands past {self._limit >> 20} MiB; refusing to read on")
        buffer[: len(data)] = data
        return len(data)


def _peek(stream: BinaryIO, n: int) -> tuple[bytes, BinaryIO]:
    """Read the first bytes without losing them, for streams that cannot seek (stdin, pipes)."""
    head = stream.read(n) or b""
    return head, io.BufferedReader(_Prefixed(head, stream), CHUNK_SIZE)


class _Prefixed(io.RawIOBase):
    def __init__(self, head: bytes, rest: BinaryIO) -> None:
        self._head = head
        self._rest = rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[override]
        if self._head:
            n = min(len(buffer), len(self._head))
            buffer[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        readinto = getattr(self._rest, "readinto", None)
        if readinto is not None:
            return readinto(buffer) or 0  # straight into the caller's buffer: no copy
        data = self._rest.read(len(buffer)) or b""
        buffer[: len(data)] = data
        return len(data)


def _last_frame(segment: str) -> str:
    """A `\\r`-redrawn line shows only its last non-empty frame on a terminal; keep that."""
    if "\r" not in segment:
        return segment
    parts = [p for p in segment.split("\r") if p.strip()]
    return parts[-1] if parts else ""


def iter_chunks(stream: BinaryIO, stats: InputStats, max_bytes: int | None = None) -> Iterator[bytes]:
    """The input as UTF-8 bytes, in chunks of up to CHUNK_SIZE: gzip unpacked, UTF-16 and BOMs decoded.

    UTF-8 input passes through untouched (invalid bytes are replaced when a line is decoded),
    so the fast scanner (`scan.py`) can search the bytes without decoding the whole log.
    """
    head, stream = _peek(stream, 4)
    if head[:2] == b"\x1f\x8b":
        stats.compressed = True
        # the encoding is that of the unpacked text (a gzipped UTF-16 log has its BOM inside)
        head, stream = _peek(io.BufferedReader(_CappedGzip(stream, MAX_GZIP_EXPANDED)), 4)
    encoding = _sniff_encoding(head, stats)
    transcode = None if encoding == "utf-8" else codecs.getincrementaldecoder(encoding)(errors="replace")
    first = True
    # The first read waits for enough bytes to tell text from binary; after that read1, so
    # a live pipe yields what it has instead of waiting for a full chunk.
    while chunk := (stream.read(BINARY_SNIFF_BYTES) if first else stream.read1(CHUNK_SIZE)):
        if first and encoding == "utf-8" and _looks_binary(chunk):
            raise InputError(f"{stats.name} looks like a binary file, not a text log")
        first = False
        stats.bytes += len(chunk)
        if max_bytes is not None and stats.bytes > max_bytes:
            raise InputError(f"input is larger than the limit of {max_bytes} bytes")
        yield chunk if transcode is None else transcode.decode(chunk).encode("utf-8", "replace")
    if transcode is not None:
        rest = transcode.decode(b"", final=True)
        if rest:
            yield rest.encode("utf-8", "replace")


def iter_lines(stream: BinaryIO, stats: InputStats, max_bytes: int | None = None) -> Iterator[str]:
    """Yield decoded physical lines (no newline), streaming in chunks of CHUNK_SIZE."""
    return lines_of(iter_chunks(stream, stats, max_bytes), stats)


def lines_of(chunks: Iterable[bytes], stats: InputStats) -> Iterator[str]:
    """The decoded physical lines of UTF-8 chunks, cut and counted in `stats`."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pending, skipping = "", False
    for chunk in chunks:
        pieces = decoder.decode(chunk).split("\n")
        for piece in pieces[:-1]:
            if skipping:
                skipping, pending = False, ""
                continue
            yield _finish(pending + piece, stats)
            pending = ""
        if not skipping:
            pending += pieces[-1]
        if len(pending) > MAX_LINE_CHARS:
            cut = pending.rfind("\r", 0, len(pending) - 1)
            if 0 <= cut and len(pending) - cut <= MAX_LINE_CHARS:
                pending = pending[cut + 1 :]
            else:
                yield _finish(pending, stats)
                pending, skipping = "", True
    pending += decoder.decode(b"", final=True)
    if pending and not skipping:
        yield _finish(pending, stats)


def _finish(piece: str, stats: InputStats) -> str:
    stats.lines += 1
    if len(piece) > MAX_LINE_CHARS:
        stats.truncated_lines += 1
        piece = cut_long(piece)
    return _last_frame(piece) if "\r" in piece else piece


CUT_WORD_CHARS = 4096


def cut_long(text: str) -> str:
    """A line cut to MAX_LINE_CHARS without the word the cut went through.

    Redaction sees lines after this cut: half a URL credential or a token's first half is a
    fragment no pattern knows, so the word the cut falls in goes too (up to CUT_WORD_CHARS).
    """
    if len(text) <= MAX_LINE_CHARS:
        return text
    head = text[:MAX_LINE_CHARS]
    space = max(head.rfind(" ", MAX_LINE_CHARS - CUT_WORD_CHARS), head.rfind("\t", MAX_LINE_CHARS - CUT_WORD_CHARS))
    return head[: space + 1] if space >= 0 else head[: MAX_LINE_CHARS - CUT_WORD_CHARS]


def _sniff_encoding(head: bytes, stats: InputStats) -> str:
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        stats.encoding = "utf-16"
        return "utf-16"
    if head.startswith(b"\xef\xbb\xbf"):
        stats.encoding = "utf-8-sig"
        return "utf-8-sig"
    return "utf-8"
