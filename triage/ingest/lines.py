"""One physical line in, one `Line` out: colour codes gone, prefixes peeled, origin remembered.

This stage knows the *shapes* that wrap a message (terminal colours, journald, docker,
Kubernetes and CI timestamps, vLLM's process prefixes, Ray's actor prefixes, PyTorch's
`[rankN]:`, vLLM's logger header) but no message wording: that belongs to the grammar.
"""

from __future__ import annotations

import re

from msgspec import Struct

from triage.escapes import strip_escapes
from triage.ingest.chat import peel_chat, plain, unescape_html
from triage.patterns import LazyPattern

LEVELS = "DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL"
# Patterns behind a cheap test (a first character, a substring) that most logs never pass
# are compiled on first use (LazyPattern); the ones most lines reach are compiled here.


class Line(Struct, frozen=True):
    """A log line reduced to its message, with where it came from."""

    no: int
    text: str
    origin: str = ""
    pid: int | None = None
    level: str | None = None
    time: str | None = None
    source: str | None = None
    repeat: int = 1
    raw: str = ""
    headed: bool = False  # carried vLLM's own logger header (or another logger's)


# Each peeler: (compiled pattern anchored at the start, what to take from it).
_TIMESTAMP_PEELERS = [
    # GitHub Actions / Kubernetes / RFC 3339, optionally bracketed: 2026-02-24T20:21:58.1234567Z
    re.compile(r"\[?\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\]?[ \t]"),
    # [2023-10-30 14:14:35] or [2023-10-30 14:14:35,123]
    re.compile(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?\][ \t]?"),
    # journald short format: Nov 29 10:11:40 host unit[123]: (a host name holds no colon: after
    # `ts`'s bare stamp, `ImportError: libfoo.so.12: ...` is an exception, not a host and a unit)
    re.compile(r"[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d [^\s:]+ [\w@.\-/]+(?:\[\d+\])?: "),
    # Slurm `tail` headers are dropped whole elsewhere; srun task prefix: "0: "
    re.compile(r"\d{1,4}: (?=\S)"),
]
_LOGGER_PEELERS = [
    # FastChat/loguru: 2024-02-20 21:46:23 | ERROR | stderr |
    re.compile(rf"\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)? \| (?P<level>{LEVELS}) \| [\w.\-]+ \| ?"),
    # python logging in wrappers: 2025-06-20 10:00:00,123 - __main__ - INFO -
    re.compile(rf"\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)? - [\w.\-]+ - (?P<level>{LEVELS}) - "),
    # Ray's own logger: 2023-10-30 06:14:35,574\tWARNING worker.py:2037 --
    re.compile(rf"\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?\s+(?P<level>{LEVELS})\s+(?P<source>[\w.]+:\d+) -- "),
    # glog (Triton, absl): I0219 10:54:28.679378 1 model.py:12]
    re.compile(r"(?P<glog>[IWEF])\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ (?P<source>[\w.\-]+:\d+)\] "),
]
_COMPOSE = re.compile(r"(?P<svc>[\w.\-\[\]@/]{1,64})\s+\| ?")
_PROCESS = re.compile(
    r"\(?(?P<name>[A-Za-z][\w\-]*(?: (?:rank=\d+|[A-Z]+\d+(?:_[A-Z]+\d+)*))?)"
    r"(?:,? (?:rank=(?P<rank>\d+), )?pid=(?P<pid>\d{1,18}))?(?:, ip=(?P<ip>[^)\s]*))?\)\s?"
)  # also SkyPilot's `(task, pid=N)` and `(worker1, rank=1, pid=N, ip=...)`
_BARE_PID = LazyPattern(r"\(pid=(?P<pid>\d{1,18})(?:, ip=[^)\s]*)?\)\s?")  # Ray's task output: `(pid=4242) `
_RANK = LazyPattern(r"\[rank(?P<rank>\d+)\]:\s?")
_STAGE = LazyPattern(r"\[Stage-\d+\]\s")
_VLLM_HEADER = re.compile(
    rf"(?P<level>{LEVELS}) (?:\d{{4}}-)?(?P<time>\d\d-\d\d \d\d:\d\d:\d\d)(?:\.\d+)? \[?(?P<source>[^\]\s]+:\d+)\] ?"
)  # NVIDIA NIM's own logger writes the year: `INFO 2024-06-05 17:41:59.436 ngc_profile.py:222] `
_UVICORN = re.compile(rf"(?P<level>{LEVELS}):\s+")
_QUOTE = LazyPattern(r"(?:>\s?)+")
# `grep -n` (N:) and its context lines (N-), `nl`/`cat -n` (N and blanks): peeled only before
# what starts a record, so a number that belongs to the message stays; and an editor's or chat
# paste's gutter `N: ` before an indented line (a traceback's frame or its code line: a message's
# own number is never followed by a colon, a space and an indent).
_NUMBERED = re.compile(
    rf"\d{{1,9}}(?:(?::|-|\s+)(?=(?:{LEVELS})\b|\(|\[rank|Traceback|  File |> "
    r"|[\w.\-\[\]@/]{1,64}\s+\| |\d{4}-\d\d-\d\d|[A-Z][\w.]*(?:Error|Exception)\b)|: (?= {2,}\S))"
)
# No leading `\s*` (the text before is rstripped instead): searched from every offset of a long
# run of spaces, a leading `\s*` makes the search quadratic.
# An editor's or grep tool's search results (Notepad++ "Find in Files", VS Code): `\tLine 57: `.
_SEARCH_HIT = LazyPattern(r"[ \t]*Line \d{1,9}: ")
# tmux/screen copy mode's position marker `[31/357]`, copied at the end of the screen's top line.
# Matched at the last `[` of the line's tail only: searched with a leading `\s*`, a line of
# spaces ending in a near-marker (`[1/2 ]`) was tried from every offset (quadratic).
_TMUX_MARK = LazyPattern(r"\[(\d{1,7})/(\d{1,7})\]$")
TMUX_MARK_CHARS = 17  # `[` + 7 digits + `/` + 7 digits + `]`
# PowerShell wraps a native command's first stderr line (`python.exe : <line>`) and follows it
# with an error record: `At line:1 char:1`, `+ CategoryInfo : ...`, `+ FullyQualifiedErrorId : ...`.
_PS_NATIVE = re.compile(r"(?:[\w.\-]+\.exe|python\d?|vllm|py) : (?=\S)")
_PS_RECORD = LazyPattern(r"\s*(?:At line:\d+ char:\d+$|\+ (?:CategoryInfo|FullyQualifiedErrorId)\s+: )")
_RAY_REPEAT = re.compile(r"\[repeated (\d{1,18})x across cluster\](?: \(Ray deduplicates logs.*\))?\s*$")
_RAY_DEDUP_NOTE = re.compile(r"\(Ray deduplicates logs by default\..*\)\s*$")
_PROCESS_NAMES_WITHOUT_PID = {"raylet", "autoscaler", "gcs_server", "dashboard"}
_GLOG_LEVELS = {"I": "INFO", "W": "WARNING", "E": "ERROR", "F": "CRITICAL"}


# vLLM's request logger (`--enable-log-requests`, on by default before 0.10.2) prints each
# prompt and each output (entrypoints/logger.py): text from users that may quote anything,
# an error message, a whole traceback or nvidia-smi output included. Such a line is never evidence.
REQUEST_LOG_PREFIXES = ("Received request ", "Generated response ")


def strip_ansi(text: str) -> str:
    """Remove colour codes in every form a log can carry them (raw, pasted, escaped, half-lost)."""
    return strip_escapes(text)


def readable(raw: str) -> str:
    """A raw line as a report quotes it: colour codes gone, and what a chat tool or a browser
    did to its characters undone (entities, curly quotes, odd spaces), its prefixes kept. The
    redactor reads this text, so a secret behind `&quot;` or curly quotes is still seen."""
    return plain(unescape_html(strip_ansi(raw)))


def peel(raw: str, no: int) -> Line:
    """Reduce a physical line to its message, recording level, time, source and origin."""
    text = _strip_shapes(readable(raw).rstrip())
    origin, pid, level, time, source, headed = "", None, None, None, None, False
    for _ in range(12):  # a hard bound: stacked prefixes never go this deep
        before = text
        text, origin, pid = _peel_process(text, origin, pid)
        if text is before:
            m = _VLLM_HEADER.match(text)
            if m:  # vLLM's own header: what follows is the message, peel no further
                level, time, source, headed = m["level"], m["time"], m["source"], True
                text = text[m.end() :]
                break
            text, level, source, headed = _peel_outer(text, level, source, headed)
        if text is before:
            break
    text, repeat = _peel_ray_repeat(text)
    return Line(no, text, origin, pid, _norm_level(level), time, source, repeat, raw, headed)


def _strip_shapes(text: str) -> str:
    """What a tool around the log added to a whole line: a search tool's `Line N:`, a tmux
    position marker at its end, PowerShell's native-command wrapper and error record (the
    record repeats a line already read: it states nothing)."""
    if text.endswith("]") and "/" in text[-16:]:
        at = text.rfind("[", max(0, len(text) - TMUX_MARK_CHARS))
        m = _TMUX_MARK.match(text, at) if at >= 0 else None
        if m and int(m[1]) <= int(m[2]) and not text[: m.start()].rstrip().endswith("|"):
            text = text[: m.start()].rstrip()
    if text[:1] in (" ", "\t", "L"):
        m = _SEARCH_HIT.match(text)
        if m:
            text = text[m.end() :]
        elif _PS_RECORD.match(text):
            return ""
    elif text[:1] == "A" and _PS_RECORD.match(text):
        return ""
    m = _PS_NATIVE.match(text)
    return text[m.end() :] if m else text


def _peel_process(text: str, origin: str, pid: int | None) -> tuple[str, str, int | None]:
    if text.startswith("(pid="):
        m = _BARE_PID.match(text)
        if m:
            return text[m.end() :], origin or f"pid={m['pid']}", int(m["pid"])
    if text.startswith("(") or (" pid=" in text[:60] and text[:1].isalpha()):
        m = _PROCESS.match(text)
        if m and (m["pid"] or m["name"] in _PROCESS_NAMES_WITHOUT_PID):
            name = m["name"] if m["rank"] is None else f"{m['name']} rank={m['rank']}"
            new_pid = int(m["pid"]) if m["pid"] else None
            label = name if "rank=" in name or not new_pid else f"{name} pid={new_pid}"
            return text[m.end() :], label, new_pid
    elif text.startswith("[rank"):
        m = _RANK.match(text)
        if m:
            return text[m.end() :], origin or f"rank{m['rank']}", pid
    elif text.startswith("[Stage-"):
        m = _STAGE.match(text)
        if m:
            return text[m.end() :], origin, pid
    return text, origin, pid


def _peel_outer(text: str, level, source, headed) -> tuple[str, str | None, str | None, bool]:
    """Prefixes that wrap the whole line: quotes, line numbers, timestamps, other loggers."""
    if not text:
        return text, level, source, headed
    first = text[0]
    if first == ">":
        m = _QUOTE.match(text)
        return text[m.end() :], level, source, headed  # type: ignore[union-attr]
    if first.isdigit():
        for pattern in (_NUMBERED, *_TIMESTAMP_PEELERS, *_LOGGER_PEELERS):
            m = pattern.match(text)
            if m:
                groups = m.groupdict()
                return (
                    text[m.end() :],
                    groups.get("level") or level,
                    groups.get("source") or source,
                    bool(groups.get("level")) or headed,
                )
    if first == "[" or first.isalpha():
        for pattern in (*_TIMESTAMP_PEELERS, *_LOGGER_PEELERS):
            m = pattern.match(text)
            if m:
                groups = m.groupdict()
                lv = groups.get("level") or (_GLOG_LEVELS.get(groups["glog"]) if groups.get("glog") else None)
                return text[m.end() :], lv or level, groups.get("source") or source, bool(lv) or headed
        m = _UVICORN.match(text)
        if m:
            return text[m.end() :], m["level"], source, True
        m = _COMPOSE.match(text)
        if m and not _VLLM_HEADER.match(text):
            return text[m.end() :], level, source, headed
    return peel_chat(text, starts_record), level, source, headed


def _peel_ray_repeat(text: str) -> tuple[str, int]:
    if not text.endswith(")") and not text.endswith("]"):
        return text, 1
    m = _RAY_REPEAT.search(text)
    if m:
        return text[: m.start()].rstrip(), int(m.group(1))
    m = _RAY_DEDUP_NOTE.search(text)
    if m:
        return text[: m.start()].rstrip(), 1
    return text, 1


_CHATTER_HEAD = LazyPattern(r"(?:\([^)]{0,80}\)\s*)?(?:DEBUG|INFO|WARNING|WARN)\b")


def logged_as_chatter(text: str) -> bool:
    """Was this raw line logged at INFO/WARNING/DEBUG? By its head, or behind any prefix the
    line reader peels (a wrapper's, a chat client's or a terminal tool's stamp)."""
    return _CHATTER_HEAD.match(text) is not None or peel(text, 0).level in ("DEBUG", "INFO", "WARNING")


def _norm_level(level: str | None) -> str | None:
    if level == "WARN":
        return "WARNING"
    if level == "FATAL":
        return "CRITICAL"
    return level


# What only the start of a record looks like (the peeled prefixes aside): a traceback's
# head or frame, the exception that ends it, a table rule or row, a date. A continuation
# can start with anything, so these stay specific (a capital, then `Error:`; not `yError:`).
_RECORD_START = LazyPattern(
    rf"Traceback \(most recent call last\)|  File \"|\+-|\|\s|\d{{4}}-\d\d-\d\d[ T]|(?:{LEVELS})\b"
    r"|[A-Z][\w.]*(?:Error|Exception|Interrupt)(?::|$)"
    r"|(?:Killed|Terminated|Bus error|Illegal instruction|[A-Z][a-z]+(?: [a-z]+)* \(core dumped\))$"
)  # a shell's job report


def opens_record(line: str) -> bool:
    """Does this line begin a record by its own words (a traceback, a date, a level, an
    exception), rather than by a prefix that a terminal's cut could forge ("096 ", "t[int | ")?"""
    return _RECORD_START.match(line) is not None or _SRUN_TASK.match(line) is not None


_SRUN_TASK = LazyPattern(r"\d{1,4}: \S")


def starts_record(line: str) -> bool:
    """Does this physical line begin a log record of its own (so it continues no wrapped
    message)? Anything peeled off its start counts: a prefix, a header, a quote, a number."""
    if not line.strip():
        return True
    if _RECORD_START.match(line):
        return True
    rest = line.rstrip()
    shown = plain(unescape_html(rest))  # a chat client's curly quote or entity undone is no prefix peeled
    if shown != rest and _RECORD_START.match(shown):
        return True
    peeled = peel(line, 0)
    if peeled.headed or peeled.origin or peeled.level is not None:
        return True
    return peeled.text != rest and peeled.text != shown
