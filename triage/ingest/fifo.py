"""A named pipe given as the log: read as a stream, as `cat` would, and never taken as an empty
healthy log.

`cat FIFO` waits in open() until a writer comes, then reads to the writer's end. The tool does
the same, with the wait bounded (FIFO_WAIT seconds, env VLLM_TRIAGE_FIFO_WAIT): no writer
in that time, or a writer that closes without writing a byte, is "no input" (exit 2), never a
report. The open itself waits in a helper thread; at the bound the tool opens the pipe for
writing itself, which ends that open() at once, and closes it again.
"""

from __future__ import annotations

import io
import os
import threading
from typing import BinaryIO

from triage.errors import InputError

FIFO_WAIT = 30.0  # seconds for a writer to open the pipe


def fifo_wait() -> float:
    """FIFO_WAIT, or VLLM_TRIAGE_FIFO_WAIT when that is a number above 0."""
    try:
        wait = float(os.environ.get("VLLM_TRIAGE_FIFO_WAIT", ""))
    except ValueError:
        return FIFO_WAIT
    return wait if 0 < wait < 86400 else FIFO_WAIT


def no_input(path: str, why: str) -> InputError:
    return InputError(f"no input: {path} is a named pipe (FIFO) and {why}")


def open_fifo(path: str, wait: float | None = None) -> BinaryIO:
    """The pipe's read end once a writer has opened it, as a stream that refuses to end empty."""
    wait = fifo_wait() if wait is None else wait
    opened: dict[str, int | OSError] = {}
    done = threading.Event()

    def open_blocking() -> None:
        try:
            opened["fd"] = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError as exc:
            opened["error"] = exc
        done.set()

    threading.Thread(target=open_blocking, name="fifo-open", daemon=True).start()
    if not done.wait(wait):
        _unblock(path, done)
        _close(opened)
        raise no_input(path, f"nothing opened it for writing within {wait:g} s")
    if "error" in opened:
        exc = opened["error"]
        raise InputError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}")
    return io.BufferedReader(_NotEmpty(os.fdopen(opened["fd"], "rb", buffering=0), path))  # type: ignore[arg-type]


def _unblock(path: str, done: threading.Event) -> None:
    """End the helper's open() by being the writer it waits for, for a moment."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:  # the reader went away already, or the pipe is gone
        return
    try:
        done.wait(5)
    finally:
        os.close(fd)


def _close(opened: dict) -> None:
    if isinstance(opened.get("fd"), int):
        os.close(opened["fd"])


class _NotEmpty(io.RawIOBase):
    """The pipe's bytes; an end before the first byte is "no input", not an empty log."""

    def __init__(self, raw: BinaryIO, path: str) -> None:
        self._raw, self._path, self._seen = raw, path, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[override]
        data = self._raw.read(len(buffer)) or b""
        if not data and not self._seen:
            raise no_input(self._path, "its writer closed it without writing anything")
        self._seen += len(data)
        buffer[: len(data)] = data
        return len(data)

    def fileno(self) -> int:
        return self._raw.fileno()

    def close(self) -> None:
        self._raw.close()
        super().close()
