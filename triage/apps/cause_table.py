"""The cause table of many logs: what `batch` prints, locally or on Ray, in one form.

Logs per primary cause, then healthy, recovered, incomplete and unreadable ones; then the
failed logs by model, vLLM version and GPU, each with its leading causes (what a fleet
owner asks next: is it one model, one release, one kind of machine?).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable

from triage.api import Summary

MAX_ERRORS = 50  # unreadable logs listed by name
MAX_GROUPS = 15  # rows of each breakdown
UNKNOWN = "(not in the log)"
BREAKDOWNS = (("model", "model"), ("vLLM version", "vllm_version"), ("GPU", "gpu"))


class Entry:
    """One log of the table: its name, its summary, and the error when it could not be read."""

    __slots__ = ("error", "name", "summary")

    def __init__(self, name: str, summary: Summary, error: str | None = None) -> None:
        self.name, self.summary, self.error = name, summary, error


def render(entries: Iterable[Entry], head: str) -> str:
    """`head` (the run's one-line account, ending in a newline), then the tables."""
    causes: Counter[str] = Counter()
    other: Counter[str] = Counter()
    failed: list[Summary] = []
    errors = []
    for entry in entries:
        kind = entry.summary.status
        if kind == "failed":
            causes[entry.summary.cause or "failed, no cause named"] += 1
            failed.append(entry.summary)
        else:
            other[kind] += 1
        if kind == "error":
            errors.append(f"  {entry.name}: {entry.error}")
    width = max([len(c) for c in causes] + [24])
    rows = [f"{'primary cause':<{width}}  logs"]
    rows += [f"{c:<{width}}  {n:>4}" for c, n in sorted(causes.items(), key=lambda cn: (-cn[1], cn[0]))]
    rows += [
        f"{label:<{width}}  {other[label]:>4}"
        for label in ("healthy", "recovered", "incomplete", "error")
        if other[label]
    ]
    text = head + "\n" + "\n".join(rows) + "\n"
    for title, attr in BREAKDOWNS:
        if failed:
            text += "\n" + _breakdown(failed, title, attr)
    if errors:
        text += "\nunreadable:\n" + "\n".join(errors[:MAX_ERRORS]) + "\n"
        if len(errors) > MAX_ERRORS:
            text += f"  ... and {len(errors) - MAX_ERRORS} more\n"
    return text


def head_line(total: int, elapsed: float, jobs: int, entries: Iterable[Entry], what: str = "batch") -> str:
    """`vllm-triage batch: N logs in S s with J jobs: F failed, H healthy, ...`."""
    counts = Counter(e.summary.status for e in entries)
    return (
        f"vllm-triage {what}: {total} logs in {elapsed:.1f} s with {jobs} "
        f"job{'s' if jobs != 1 else ''}: {counts['failed']} failed, {counts['healthy']} healthy, "
        f"{counts['incomplete']} incomplete, {counts['error']} unreadable\n"
    )


def _breakdown(failed: list[Summary], title: str, attr: str) -> str:
    """Failed logs per value of one attribute, most first, with their three leading causes."""
    groups: dict[str, Counter[str]] = defaultdict(Counter)
    for s in failed:
        groups[getattr(s, attr) or UNKNOWN][s.cause or "failed, no cause named"] += 1
    ranked = sorted(groups.items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))
    width = min(40, max([len(k) for k, _ in ranked[:MAX_GROUPS]] + [24]))
    rows = [f"{'failed by ' + title:<{width}}  logs  leading causes"]
    for key, counts in ranked[:MAX_GROUPS]:
        label = key if len(key) <= width else key[: width - 1] + "…"
        top = ", ".join(f"{c} {n}" for c, n in sorted(counts.items(), key=lambda cn: (-cn[1], cn[0]))[:3])
        rows.append(f"{label:<{width}}  {sum(counts.values()):>4}  {top}")
    if len(ranked) > MAX_GROUPS:
        rest = sum(sum(c.values()) for _, c in ranked[MAX_GROUPS:])
        rows.append(f"{f'({len(ranked) - MAX_GROUPS} more)':<{width}}  {rest:>4}")
    return "\n".join(rows) + "\n"
