"""Writing a report file where others may have planted links: `-o FILE`, `batch --jsonl FILE`.

The output folder of a CI job is often shared with what the job downloaded (the logs
themselves). A link planted at FILE would make a plain `open(FILE, "w")` overwrite the
file it points to, or create one where a dangling link points. So a report is written to
a new file in FILE's folder (created with O_EXCL | O_NOFOLLOW: never through a link) and
renamed over FILE, which replaces a name and never follows one; FILE itself being a link
is refused; FILE being one of the inputs (the same file by device and inode: a hard link
or another spelling counts) is refused, since replacing a log with its report loses the
log; a file replaced keeps its permission bits. A device or a FIFO (`-o /dev/stdout`) is
written in place, opened without following a link.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Iterable

from triage.errors import UsageError

_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_IN_PLACE = os.O_WRONLY | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def _identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def write_file(path: str, text: str, inputs: Iterable[str] = (), what: str = "") -> None:
    """`text` (UTF-8) to `path` as described above; every refusal and OSError is a UsageError
    of one line naming the path."""
    label = what or path
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot write {label}: {_reason(exc)}") from None
    if st is not None:
        if stat.S_ISLNK(st.st_mode):
            raise UsageError(
                f"cannot write {label}: it is a symbolic link (not followed: remove it or name the file it points to)"
            )
        if stat.S_ISDIR(st.st_mode):
            raise UsageError(f"cannot write {label}: it is a directory")
        if (st.st_dev, st.st_ino) in {_identity(p) for p in inputs if p != "-"}:
            raise UsageError(f"cannot write {label}: it is an input log (its report would replace it)")
        if not stat.S_ISREG(st.st_mode):
            _write_in_place(path, text, label)
            return
    data = text.encode("utf-8", "surrogateescape")
    folder = os.path.dirname(path) or "."
    temp = os.path.join(folder, f".{os.path.basename(path)[:64]}.{secrets.token_hex(6)}.tmp")
    try:
        try:
            fd = os.open(temp, _NEW, 0o666)
        except PermissionError:  # a writable file in a folder we cannot add to: in place, still no link
            if st is None:
                raise
            _write_in_place(path, text, label)
            return
        try:
            if st is not None:
                os.fchmod(fd, stat.S_IMODE(st.st_mode))
            _write_all(fd, data)
        finally:
            os.close(fd)
        os.replace(temp, path)
    except (OSError, ValueError) as exc:
        _discard(temp)
        raise UsageError(f"cannot write {label}: {_reason(exc)}") from None


def append_file(path: str, text: str, what: str = "") -> None:
    """`text` appended to `path` (created if missing), never through a link."""
    try:
        fd = os.open(
            path,
            os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0),
            0o666,
        )
        try:
            _write_all(fd, text.encode("utf-8", "surrogateescape"))
        finally:
            os.close(fd)
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot write {what or path}: {_reason(exc)}") from None


def open_stream(path: str, what: str = ""):
    """A file to write as a stream (a live copy of a child's output), created or emptied,
    never through a link at `path`."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | _IN_PLACE, 0o666)
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot write {what or path}: {_reason(exc)}") from None
    return os.fdopen(fd, "wb")


def _write_in_place(path: str, text: str, label: str) -> None:
    try:
        fd = os.open(path, _IN_PLACE)
        try:
            _write_all(fd, text.encode("utf-8", "surrogateescape"))
        finally:
            os.close(fd)
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot write {label}: {_reason(exc)}") from None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _discard(temp: str) -> None:
    try:
        os.unlink(temp)
    except OSError:
        pass


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.errno == errno.ELOOP:
        return "a symbolic link is in the way (not followed)"
    return (exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)) or type(exc).__name__
