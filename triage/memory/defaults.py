"""vLLM's defaults that move the startup memory budget, by release and GPU, and the change a log's release made.

The table (vllm_defaults.txt beside this file) is generated from vLLM's own sources by
scripts/catalogue/budget_defaults.py: `vllm serve`'s default max_num_batched_tokens and
max_num_seqs per kind of GPU (vLLM picks them from the GPU's total memory, name and compute
capability), and whether the CUDA graphs' estimate is counted inside gpu_memory_utilization.
A log names its release and, often, its GPU's total memory or name; `change` says what the
latest release up to the log's changed about a setting, with the release before it: what a
user who upgraded across it saw move. Where the log does not tell the GPU apart (an 80 GiB
card without its name: an A100 and an H100 got different defaults), and the kinds it could be
disagree, there is no answer.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from itertools import pairwise

from msgspec import Struct

from triage.units import GiB

TABLE = os.path.join(os.path.dirname(__file__), "vllm_defaults.txt")  # os.path: pathlib is ~3 ms a run
# The GPU kinds of the table that a device name tells apart (vLLM tests the name for these).
NAMED = {"a100-80gb": "a100", "h100-80gb": "h100", "h200": "h200", "gb10": "gb10", "b200": "b200"}
# Without a telling name, the total memory decides (vLLM's thresholds: 70 GiB, 160 GiB).
MID = ("a100-80gb", "h100-80gb", "h200", "gb10")
RECENT = 6  # minor releases: a change further back than this is not what a user just upgraded across
_VERSION = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?")
WHERE = {
    "max_num_batched_tokens": "vllm serve's default max_num_batched_tokens",
    "max_num_seqs": "vllm serve's default max_num_seqs",
    "cudagraph_memory_in_budget": "counting the CUDA graphs' estimated memory inside gpu_memory_utilization",
}


class Change(Struct, frozen=True):
    """A default that moved: `release` made it `new`; `before` (the release read just before) had `old`."""

    setting: str
    release: str
    before: str
    old: int
    new: int
    source: str

    def describe(self, device: str = "") -> str:
        """One sentence with the provenance: the releases, the values and vLLM's file."""
        on = f" on {device}" if device else ""
        if self.setting == "cudagraph_memory_in_budget":
            return (
                f"vLLM {self.release} turned on by default {WHERE[self.setting]} (off in {self.before}; "
                f"{self.source.replace(':', ' ')})"
            )
        verb = "raised" if self.new > self.old else "lowered"
        # one release per minor is read: a change first seen in 0.8.5.post1 came somewhere in 0.8
        name = self.release if self.release.endswith(".0") else ".".join(self.release.split(".")[:2])
        file, where = self.source.split(":", 1)
        return (
            f"vLLM {name} {verb} {WHERE[self.setting]}{on} from {self.old} ({self.before}) to "
            f"{self.new} ({self.release}: {file}, {where})"
        )


def _key(version: str) -> tuple[int, int, int] | None:
    m = _VERSION.match(version.strip())
    return (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)) if m else None


@lru_cache(maxsize=1)
def table() -> dict[tuple[str, str], list[tuple[str, int, str]]]:
    """(setting, device) -> [(release, value, source)] in release order."""
    out: dict[tuple[str, str], list[tuple[str, int, str]]] = {}
    with open(TABLE, encoding="utf-8") as fh:
        text = fh.read()
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        release, setting, device, value, source = line.split()
        out.setdefault((setting, device), []).append((release, int(value), source))
    for rows in out.values():
        rows.sort(key=lambda r: _key(r[0]) or (0, 0, 0))
    return out


def devices(name: str | None, total_bytes: float | None) -> tuple[str, ...]:
    """The GPU kinds of the table this GPU may be: by its name where vLLM tests the name, else by memory."""
    low = (name or "").lower()
    named = tuple(d for d, token in NAMED.items() if token in low)
    if named:
        return named[:1]
    if total_bytes is None or total_bytes <= 0:
        return ()
    gib = total_bytes / GiB
    return ("under-70gib",) if gib < 70 else ("b200",) if gib >= 160 else MID


def _up_to(rows: list[tuple[str, int, str]], version: str) -> list[tuple[str, int, str]]:
    """The releases read up to the log's: its own minor's release stands for it (0.8.4 runs 0.8.5's code)."""
    have = _key(version)
    if have is None:
        return []
    return [r for r in rows if (k := _key(r[0])) is not None and k[:2] <= have[:2]]


def change(setting: str, version: str | None, kinds: tuple[str, ...]) -> Change | None:
    """The latest change of `setting` up to `version`, when every kind the GPU may be agrees on it
    and it came within RECENT minor releases of the log's (an upgrade a user plausibly made)."""
    have = _key(version or "")
    if have is None or not kinds:
        return None
    found: set[Change | None] = set()
    for kind in kinds:
        rows = _up_to(table().get((setting, kind), []), version or "")
        last = None
        for prev, cur in pairwise(rows):
            if prev[1] != cur[1]:
                last = Change(setting, cur[0], prev[0], prev[1], cur[1], cur[2])
        found.add(last)
    got = found.pop() if len(found) == 1 else None
    made = _key(got.release) if got is not None else None
    if got is None or made is None or made[0] != have[0] or have[1] - made[1] > RECENT:
        return None
    return got


def value(setting: str, version: str | None, kinds: tuple[str, ...]) -> int | None:
    """The default in force at `version` (its minor's release read), when every kind the GPU may be agrees."""
    if not version or not kinds:
        return None
    found = set()
    for kind in kinds:
        rows = _up_to(table().get((setting, kind), []), version)
        found.add(rows[-1][1] if rows else None)
    got = found.pop() if len(found) == 1 else None
    return got


def device_words(kinds: tuple[str, ...]) -> str:
    """How the report names the GPU kind a default was picked for."""
    if kinds == ("under-70gib",):
        return "GPUs under 70 GiB"
    if kinds == ("b200",):
        return "GPUs with 160 GiB or more"
    if len(kinds) == 1:
        return f"{kinds[0].upper()} GPUs"
    return "GPUs of 70-160 GiB"
