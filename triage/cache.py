"""An on-disk cache of what every run would otherwise rebuild: the LALR tables, the compiled rules.

Start-up time is most of the run for a typical log, so work that depends only on files
(the grammar, the rule packs) is done once and pickled. A cache file is named after the
version and the sizes and modification times of its sources, so an edited pack is never
read stale. Pickles run code when loaded: the folder must be this user's own and writable
by no one else, or nothing is read from it (or written to it).

Names hold a checksum (zlib's CRC-32 and Adler-32: C, and imported with the interpreter, where
hashlib's OpenSSL costs ~3 ms a run) of what they stand for, not a cryptographic hash: the
inputs are this tool's own (its version, its packs' paths, sizes and mtimes, its scanner's
words), in a folder no one else can write, so nothing forges a collision, and two honest keys
sharing 64 bits of checksum is the residual risk (~2^-64 a pair). The other one, as before:
a pack edited within the file system's mtime granularity to the same size keeps its old key.
"""

from __future__ import annotations

import os
import stat
import sys
import zlib
from typing import TYPE_CHECKING, Any

from triage.version import __version__

if TYPE_CHECKING:
    from pathlib import Path


def cache_dir() -> str | None:
    """$XDG_CACHE_HOME/vllm-triage (or a per-user folder in /tmp), if it is safe to use."""
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = os.path.join(xdg, "vllm-triage") if xdg else os.path.join(_temp_root(), f"vllm-triage-{os.getuid()}")
    try:
        os.makedirs(base, mode=0o700, exist_ok=True)
        st = os.stat(base)
    except OSError:
        return None
    if st.st_uid != os.getuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) or not stat.S_ISDIR(st.st_mode):
        return None  # someone else's folder, or one others can write: do not trust what is in it
    return base


def _temp_root() -> str:
    """The temporary folder `tempfile.gettempdir()` names, without importing tempfile (~4 ms
    with shutil and random) on every run: $TMPDIR, $TEMP or $TMP if set, else /tmp. (tempfile
    also probes each for writability; here an unwritable one just means no cache.)"""
    for name in ("TMPDIR", "TEMP", "TMP"):
        value = os.environ.get(name)
        if value:
            return value
    return "/tmp"


def stamp(paths: list[str | Path], *extra: str) -> str | None:
    """A short key for the current state of these files (None when one cannot be read)."""
    parts = [__version__, sys.version, *extra]
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            return None
        parts.append(f"{os.path.abspath(path)}:{st.st_mtime_ns}:{st.st_size}")
    return _checksum("\n".join(parts).encode())


def _checksum(data: bytes) -> str:
    """64 bits of checksum of `data` as 16 hex digits (see the module's doc for why not a hash)."""
    return f"{zlib.crc32(data):08x}{zlib.adler32(data):08x}"


def load(name: str) -> Any | None:
    base = cache_dir()
    if base is None:
        return None
    try:
        with open(os.path.join(base, name), "rb") as fh:
            import pickle  # only where a cache file is there to read

            return pickle.load(fh)  # noqa: S301 - our own file in our own folder (see cache_dir)
    except Exception:  # noqa: BLE001 - missing, stale or damaged: rebuild
        return None


def save(name: str, value: Any) -> None:
    base = cache_dir()
    if base is None:
        return
    import pickle  # only when a cache file is written
    import tempfile

    try:
        fd, tmp = tempfile.mkstemp(dir=base, prefix=".tmp-")
        with os.fdopen(fd, "wb") as fh:
            pickle.dump(value, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, os.path.join(base, name))
    except Exception:  # noqa: BLE001 - a cache that cannot be written only costs time
        try:
            os.unlink(tmp)
        except Exception:  # noqa: BLE001
            pass
        return
    prune(base, name)


# Files of one kind kept (the newest): every edit of a rule pack, upgrade or new word list names
# a new file, and nothing else ever removes the old ones.
KEEP_PER_KIND = 8


def prune(base: str, written: str) -> None:
    """Remove all but the newest KEEP_PER_KIND files of the kind just written (its name up to
    the first `-`). Done only after a write, which is rare: a run that reads pays nothing."""
    kind = written.split("-", 1)[0] + "-"
    try:
        with os.scandir(base) as entries:
            same = [(e.stat().st_mtime_ns, e.path) for e in entries if e.name.startswith(kind) and e.is_file()]
    except OSError:
        return
    same.sort(reverse=True)
    for _, path in same[KEEP_PER_KIND:]:
        try:
            os.unlink(path)
        except OSError:
            pass


def content_name(kind: str, parts: list[bytes], suffix: str) -> str:
    """A cache file name for something built from these parts on this machine (a compiled
    scanner database is specific to the CPU and the library that built it)."""
    digest = _checksum(b"\0".join([*parts, _machine().encode()]))
    return f"{kind}-{__version__}-{digest}{suffix}"


def _machine() -> str:
    """`platform.machine()` without importing `platform` (~1 ms): on POSIX it is `uname`'s."""
    uname = getattr(os, "uname", None)
    if uname is not None:
        return uname().machine
    import platform

    return platform.machine()
