"""Which files a batch reads: log files under folders, globs and paths, never its own outputs."""

from __future__ import annotations

import glob
import os
import re
import stat

LOG_SUFFIXES = (".log", ".log.gz", ".txt", ".txt.gz", ".out", ".gz")
ROTATED = re.compile(r"\.(?:log|txt|out)\.\d{1,4}(?:\.gz)?$")  # logrotate's vllm.log.1, vllm.log.2.gz


def find_logs(inputs: list[str], skip: frozenset[tuple[int, int]] = frozenset()) -> list[str]:
    """Files named by folders (recursively), globs and plain paths; sorted, each once.

    `skip` holds (device, inode) of files this run writes (`batch . > b.out`): never read back."""
    out: dict[str, None] = {}
    for item in inputs:
        if os.path.isdir(item):
            found: list[str] = []
            for root, dirs, files in os.walk(item):
                dirs.sort()
                found.extend(os.path.join(root, f) for f in sorted(files) if is_log_name(f))
            out.update(dict.fromkeys(found))
        elif os.path.exists(item):
            out[item] = None
        else:
            out.update(dict.fromkeys(p for p in sorted(glob.glob(item, recursive=True)) if os.path.isfile(p)))
    return [p for p in out if _identity(p) not in skip]


def is_log_name(name: str) -> bool:
    """A log by its name, whatever the case (NODE.LOG from a Windows share, Startup.Log)."""
    name = name.lower()
    return name.endswith(LOG_SUFFIXES) or bool(ROTATED.search(name))


def _identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def own_outputs(stdout, stderr, jsonl: str | None) -> frozenset[tuple[int, int]]:
    """The files behind our stdout/stderr (a shell redirection) and --jsonl, if they exist."""
    found: set[tuple[int, int]] = set()
    for stream in (stdout, stderr):
        try:
            st = os.fstat(stream.fileno())
        except (AttributeError, OSError, ValueError):
            continue
        if stat.S_ISREG(st.st_mode):
            found.add((st.st_dev, st.st_ino))
    written = _identity(jsonl) if jsonl else None
    if written is not None:
        found.add(written)
    return frozenset(found)
