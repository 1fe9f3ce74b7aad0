"""Bytes in, physical text lines out: streaming, bounded, never trusting the input.

Reading is the only stage that touches raw bytes. It decodes incrementally (UTF-8 with
invalid bytes replaced, UTF-16 when a BOM says so), unpacks gzip with a cap on the
expanded size, refuses input that is plainly binary, keeps only the last frame of a
`\\r`-redrawn progress bar, and caps line length so one hostile line cannot hold memory.
"""

from __future__ import annotations

import codecs
import io
import os
import re
import stat
import sys
from collections.abc import Iterable, Iterator
from typing import BinaryIO

from msgspec import Struct, field

from triage.errors import InputError

CHUNK_SIZE = 1 << 20
MAX_LINE_CHARS = 64 * 1024
MAX_GZIP_EXPANDED = 4 << 30
BINARY_SNIFF_BYTES = 64 * 1024
UTF16_SNIFF_BYTES = 4096


class InputStats(Struct):
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


def file_kind(mode: int) -> str:
    """What a path is, in the words of an error message."""
    for test, kind in (
        (stat.S_ISREG, "regular file"),
        (stat.S_ISDIR, "directory"),
        (stat.S_ISFIFO, "named pipe (FIFO)"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISSOCK, "socket"),
    ):
        if test(mode):
            return kind
    return "special file"


def open_source(path: str, stdin: BinaryIO | None = None, regular_only: bool = False) -> tuple[BinaryIO, str]:
    """Open a path or '-' for binary reading, by kind, with one clear error for each way it fails.

    Regular files are read as they are; a named pipe is read like `cat` reads it, with the
    wait for its writer bounded and an empty one refused as "no input" (fifo.py); devices (`/dev/urandom`
    never ends), sockets and directories are refused. `regular_only` (batch): a FIFO is refused
    too, and a file is read only as far as it was long when opened, so a log still being written
    cannot keep one entry going forever.
    """
    if path == "-":
        stream = stdin if stdin is not None else sys.stdin.buffer
        return stream, "<stdin>"
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise InputError(f"no such file: {path}") from None
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    _check_kind(path, st.st_mode, regular_only)
    if stat.S_ISFIFO(st.st_mode):
        return _open_fifo(path, regular_only), os.path.basename(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)  # what was opened, not what the name pointed at a moment before
        _check_kind(path, st.st_mode, regular_only)
        os.set_blocking(fd, True)  # a FIFO's writer, once there, is waited for like a pipe's
    except BaseException:
        os.close(fd)
        raise
    stream: BinaryIO = os.fdopen(fd, "rb")  # type: ignore[no-redef]
    if regular_only:
        stream = io.BufferedReader(_Snapshot(stream, st.st_size), CHUNK_SIZE)  # type: ignore[assignment]
    return stream, os.path.basename(path)


def _open_fifo(path: str, regular_only: bool) -> BinaryIO:
    from triage.ingest.fifo import open_fifo

    stream = open_fifo(path)
    try:
        _check_kind(path, os.fstat(stream.fileno()).st_mode, regular_only)  # what was opened
    except BaseException:
        stream.close()
        raise
    return stream


def _check_kind(path: str, mode: int, regular_only: bool) -> None:
    kind = file_kind(mode)
    if kind == "regular file" or (kind.startswith("named pipe") and not regular_only):
        return
    if kind == "directory":
        raise InputError(f"{path} is a directory, not a log file")
    raise InputError(f"{path} is a {kind}, not a log file")


class _Snapshot(io.RawIOBase):
    """A file read no further than it was long when opened (a log still growing ends there)."""

    def __init__(self, raw: BinaryIO, size: int) -> None:
        self._raw, self._left = raw, size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[override]
        if self._left <= 0:
            return 0
        data = self._raw.read(min(len(buffer), self._left)) or b""
        self._left -= len(data)
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._raw.close()
        super().close()


# Bytes a text log almost never holds: C0 controls other than TAB, LF, VT, FF, CR and ESC (colours).
# NULs are counted on their own: a log can hold a run of them (a file's hole after a crash).
_CONTROLS = bytes(b for b in range(1, 32) if b not in (9, 10, 11, 12, 13, 27)) + b"\x7f"
_NOT_CONTROLS = bytes(b for b in range(256) if b not in _CONTROLS)
_INVALID = re.compile("[\udc80-\udcff]")  # bytes that are no UTF-8 (surrogateescape's stand-ins)
MAX_BAD_SHARE = 0.05
MIN_BAD = 16  # a short note with an é or two in Latin-1 is still text


def _looks_binary(head: bytes) -> bool:
    """Text logs hold almost no NULs, control bytes or invalid UTF-8; executables, images,
    archives and random data hold many (random bytes: about half of them are one or the other).

    Counted over the first BINARY_SNIFF_BYTES, not a few bytes, so a file that merely starts
    like text is still refused; a Latin-1 log (an é here and there) stays far below the bar.
    NULs refuse only when they are a quarter of it (UTF-16 without a BOM, a disk image).
    """
    sample = head[:BINARY_SNIFF_BYTES]
    if not sample:
        return False
    if sample.count(0) > len(sample) // 4:
        return True
    controls = len(sample.translate(None, _NOT_CONTROLS))
    text = (
        sample[:-3].decode("utf-8", "surrogateescape") if len(sample) > 3 else sample.decode("utf-8", "surrogateescape")
    )
    invalid = len(_INVALID.findall(text))
    return controls + invalid > max(MIN_BAD, MAX_BAD_SHARE * len(sample))


class _CappedGzip(io.RawIOBase):
    """A gzip stream that refuses to expand past a limit (a decompression bomb stops here)."""

    def __init__(self, raw: BinaryIO, limit: int) -> None:
        import gzip  # only for a gzipped input
        import zlib

        self._gz = gzip.GzipFile(fileobj=raw, mode="rb")
        self._damaged = (OSError, EOFError, gzip.BadGzipFile, zlib.error)
        self._limit = limit
        self._out = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[override]
        try:
            data = self._gz.read(len(buffer))
        except self._damaged as exc:
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


def last_frame(segment: str) -> str:
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
    if head.startswith((b"\xff\xfe", b"\xfe\xff", UTF32_BE_BOM)):  # enough text to check the BOM's word
        head, stream = _peek(stream, UTF16_SNIFF_BYTES)
    encoding = _sniff_encoding(head, stats)
    if encoding == "utf-8-bom16":  # the two BOM bytes are no text: drop them, read the rest as UTF-8
        encoding = "utf-8"
        stats.bytes += len(stream.read(2))
    transcode = None if encoding == "utf-8" else codecs.getincrementaldecoder(encoding)(errors="replace")
    first = True
    # The first read waits for enough bytes to tell text from binary; after that read1, so
    # a live pipe yields what it has instead of waiting for a full chunk.
    while chunk := (stream.read(BINARY_SNIFF_BYTES) if first else stream.read1(CHUNK_SIZE)):  # type: ignore[attr-defined]
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


def _reads_as_utf16(head: bytes) -> bool:
    """Whether the bytes after a UTF-16 BOM decode to text: a log is mostly ASCII, which UTF-16
    spells with a NUL in every other byte; UTF-8 read as UTF-16 gives CJK-looking noise instead.
    Text that is neither (no NULs, and not valid UTF-8 either) keeps the BOM's word."""
    body = head[2:]
    if len(body) < 8 or body.count(0) * 4 >= len(body):
        return True
    try:
        body[: len(body) - 3].decode("utf-8") if len(body) > 3 else body.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


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
            yield finish_line(pending + piece, stats)
            pending = ""
        if not skipping:
            pending += pieces[-1]
        if len(pending) > MAX_LINE_CHARS:
            cut = pending.rfind("\r", 0, len(pending) - 1)
            if cut >= 0 and len(pending) - cut <= MAX_LINE_CHARS:
                pending = pending[cut + 1 :]
            else:
                yield finish_line(pending, stats)
                pending, skipping = "", True
    pending += decoder.decode(b"", final=True)
    if pending and not skipping:
        yield finish_line(pending, stats)


def finish_line(piece: str, stats: InputStats) -> str:
    """A line as the reader hands it on: counted, cut at MAX_LINE_CHARS, its last `\\r` frame."""
    stats.lines += 1
    if len(piece) > MAX_LINE_CHARS:
        stats.truncated_lines += 1
        piece = cut_long(piece)
    return last_frame(piece) if "\r" in piece else piece


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


UTF32_LE_BOM, UTF32_BE_BOM = b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff"


def _reads_as_utf32(head: bytes) -> bool:
    """Whether the bytes after a UTF-32 BOM are UTF-32 (the LE BOM is also UTF-16's BOM and a
    NUL: the text after it tells which). Nothing after the LE BOM (`\xff\xfe\x00\x00` alone is
    also a UTF-16 NUL): UTF-16's word, which keeps its one line."""
    body = head[4 : 4 + (len(head) - 4) // 4 * 4]
    if not body and head.startswith(UTF32_LE_BOM):
        return False
    try:
        body.decode("utf-32-le" if head.startswith(UTF32_LE_BOM) else "utf-32-be")
    except UnicodeDecodeError:
        return False
    return True


def _sniff_encoding(head: bytes, stats: InputStats) -> str:
    if head.startswith((UTF32_LE_BOM, UTF32_BE_BOM)) and _reads_as_utf32(head):
        stats.encoding = "utf-32"
        return "utf-32"
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        if not _reads_as_utf16(head):  # a BOM, then UTF-8 (PowerShell's `>`, then `cat >>`)
            stats.encoding = "utf-8"
            return "utf-8-bom16"
        stats.encoding = "utf-16"
        return "utf-16"
    if head.startswith(b"\xef\xbb\xbf"):
        stats.encoding = "utf-8-sig"
        return "utf-8-sig"
    return "utf-8"
