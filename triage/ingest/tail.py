"""`--follow FILE`'s reader: a file read as it grows, opened by kind so no open() can hang.

A regular file is read as it grows; a truncated one is read again from its start, a rotated
one (a new file at the path) after the old one is drained. A named pipe is opened without
waiting for a writer and read without blocking, so `--timeout` still ends the wait; devices
(`/dev/zero` never ends), sockets and directories are refused in one line.
"""

from __future__ import annotations

import os
from typing import IO

from triage.errors import InputError
from triage.ingest.read import CHUNK_SIZE, file_kind

FIFO = "named pipe (FIFO)"


class Tail:
    def __init__(self, path: str) -> None:
        self.path = path
        self.fh: IO[bytes] | None = None
        self.ident: tuple[int, int] = (0, 0)
        self.fifo = False

    def open(self) -> bool:
        """Open the path if it is there (False if not yet); refuse what is not a log."""
        try:
            _refuse(self.path, file_kind(os.stat(self.path).st_mode))
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise InputError(f"cannot read {self.path}: {exc.strerror or exc}") from None
        st = os.fstat(fd)  # what was opened, not what the name pointed at a moment before
        kind = file_kind(st.st_mode)
        try:
            _refuse(self.path, kind)
        except InputError:
            os.close(fd)
            raise
        self.fifo = kind == FIFO
        if not self.fifo:
            os.set_blocking(fd, True)
        self.fh, self.ident = os.fdopen(fd, "rb", buffering=0), (st.st_dev, st.st_ino)
        return True

    def read(self) -> bytes:
        """What has arrived since the last read (b"" if nothing has)."""
        if self.fh is None and not self.open():
            return b""
        assert self.fh is not None
        data = self.fh.read(CHUNK_SIZE)
        if self.fifo:  # None: no data yet; b"": no writer (yet, or any more); neither ends the wait
            return data or b""
        if data:
            return data
        try:
            st = os.stat(self.path)
        except OSError:
            return b""  # moved away; the new file is not there yet
        if (st.st_dev, st.st_ino) != self.ident:  # rotated, and the old file is drained
            self.close()
            return self.fh.read(CHUNK_SIZE) if self.open() else b""  # type: ignore[union-attr]
        if st.st_size < self.fh.tell():  # truncated (copytruncate, or a new run with >)
            self.fh.seek(0)
        return b""

    def close(self) -> None:
        if self.fh is not None:
            self.fh.close()
            self.fh = None


def _refuse(path: str, kind: str) -> None:
    if kind == "directory":
        raise InputError(f"{path} is a directory, not a log file")
    if kind not in ("regular file", FIFO):
        raise InputError(f"{path} is a {kind}, not a log file")
