"""The other forms a log could have taken: our generator for tests/corpus/test_invariance.py.

Each variant is a pure function text -> bytes (or None when it does not apply to the log),
grouped in families. A log re-expressed must keep its primary cause: the same failure seen
through docker compose, kubectl logs --timestamps, journalctl, SkyPilot, Ray, torchrun's
`[rankN]:`, an editor's search results, a paste that lost its first characters, Windows
line ends, a UTF-16 file, or another accelerator's spelling of the same error.

Platform spellings follow ../shared/errors.md and change only texts it shows that platform
printing: HIP (§1.2, §2.1-2.2: `HIP out of memory.`, `HIP error: <same text>`, `HIP kernel
errors might be ...`), XPU (§1.3: the new OOM form, whose body keeps the word GPU) and NPU
(§1.5: the old OOM form, with `NPU <i>` for `GPU <i>`).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable

Variant = Callable[[str], "bytes | None"]


def _lines(text: str) -> list[str]:
    return text.replace("\r\n", "\n").split("\n")


def _prefixed(make: Callable[[int], str]) -> Variant:
    """Every line (blank ones too, as the tools print them) behind a prefix made from its index."""

    def variant(text: str) -> bytes:
        lines = _lines(text)
        end = lines.pop() if lines and lines[-1] == "" else None
        out = [make(i) + line for i, line in enumerate(lines)]
        return ("\n".join(out) + ("\n" if end is not None else "")).encode()

    return variant


def _k8s_stamp(i: int) -> str:
    seconds = 10 + i // 1000
    return f"2026-02-24T20:{seconds // 60 % 60:02d}:{seconds % 60:02d}.{i % 1000:03d}456789Z "


WRAPPERS: dict[str, Variant] = {
    "compose": _prefixed(lambda i: "vllm-1  | "),
    "k8s": _prefixed(_k8s_stamp),
    "journald": _prefixed(lambda i: "Feb 23 16:58:05 gpu-node-3 vllm[4242]: "),
    "skypilot": _prefixed(lambda i: "(task, pid=4242) "),
    "ray": _prefixed(lambda i: "(pid=4242) "),
    "rank": _prefixed(lambda i: "[rank0]: "),
    "grep-tool": _prefixed(lambda i: f"  Line {i + 1}: "),
}


def cut_first_line(text: str) -> bytes | None:
    """A paste that starts mid-word: the first line loses its first few characters."""
    lines = _lines(text)
    first = next((i for i, line in enumerate(lines) if len(line.strip()) >= 8), None)
    if first is None:
        return None
    lines = lines[first:]
    lines[0] = lines[0][3:]
    return "\n".join(lines).encode()


def crlf(text: str) -> bytes:
    return text.replace("\r\n", "\n").replace("\n", "\r\n").encode()


def utf16(text: str) -> bytes:
    return text.encode("utf-16")  # with a BOM, in the machine's order (little-endian here)


ENCODINGS: dict[str, Variant] = {"cut-first-line": cut_first_line, "crlf": crlf, "utf-16": utf16}

_CUDA_OOM = re.compile(r"CUDA out of memory\. Tried to allocate")
_NEW_OOM = re.compile(r"CUDA out of memory\. Tried to allocate \S+ ?[KMGT]?i?B\. GPU")
_OLD_OOM = re.compile(r"CUDA out of memory\. Tried to allocate (\S+ \S+) \(GPU (\d+);")
# CUDA error texts whose HIP text is the same (errors.md §2.2 "same" rows, and §2.1's wrapper).
_HIP_SAME = (
    "out of memory",
    "invalid device function",
    "invalid device ordinal",
    "no kernel image is available for execution on the device",
    "an illegal memory access was encountered",
    "device-side assert triggered",
    "unspecified launch failure",
    "operation not supported",
    "too many resources requested for launch",
    "peer access is not supported between these two devices",
)
_CUDA_ERROR = re.compile(r"CUDA error: (" + "|".join(re.escape(t) for t in _HIP_SAME) + ")")


def to_hip(text: str) -> bytes | None:
    if not (_CUDA_OOM.search(text) or _CUDA_ERROR.search(text)):
        return None
    out = _CUDA_OOM.sub("HIP out of memory. Tried to allocate", text)
    out = _CUDA_ERROR.sub(r"HIP error: \1", out)
    out = out.replace(
        "CUDA kernel errors might be asynchronously reported", "HIP kernel errors might be asynchronously reported"
    ).replace("CUDA_LAUNCH_BLOCKING=1", "AMD_SERIALIZE_KERNEL=3")
    return out.encode()


def to_xpu(text: str) -> bytes | None:
    if not _NEW_OOM.search(text):
        return None
    return _CUDA_OOM.sub("XPU out of memory. Tried to allocate", text).encode()


def to_npu(text: str) -> bytes | None:
    if not _OLD_OOM.search(text):
        return None
    return _OLD_OOM.sub(lambda m: f"NPU out of memory. Tried to allocate {m[1]} (NPU {m[2]};", text).encode()


PLATFORMS: dict[str, Variant] = {"hip": to_hip, "xpu": to_xpu, "npu": to_npu}

FAMILIES: dict[str, dict[str, Variant]] = {"wrappers": WRAPPERS, "encodings": ENCODINGS, "platform": PLATFORMS}
WRAPPERS_PER_LOG = 3  # of the seven, chosen per log by a hash of its name: every wrapper gets its share


def variants_for(name: str) -> list[tuple[str, str, Variant]]:
    """(family, variant name, function) for one log: the encodings and platforms all, and a
    deterministic sample of the wrappers (the suite must stay quick on two cores)."""
    wrappers = list(WRAPPERS.items())
    start = zlib.crc32(name.encode()) % len(wrappers)
    chosen = [wrappers[(start + k * 2) % len(wrappers)] for k in range(WRAPPERS_PER_LOG)]
    out = [("wrappers", n, f) for n, f in chosen]
    out += [("encodings", n, f) for n, f in ENCODINGS.items()]
    out += [("platform", n, f) for n, f in PLATFORMS.items()]
    return out + chat_variants_for(name)


# --- excerpts: what a user pastes instead of the whole log (issue 22, part 5) ---------------
# Each cut takes the text and the failure's line (1-based, as the report cites it) and gives
# the kept lines' range (first, last), 1-based and inclusive, or None when it does not apply.
Cut = Callable[[list[str], int], "tuple[int, int] | None"]
TRACEBACK_START = "Traceback (most recent call last)"
TAIL_LINES = 20


MAX_CONTINUED = 10


def error_line(lines: list[str], failure: int) -> tuple[int, int] | None:
    """The error line alone (what a chat box gets most often), with the physical lines a
    terminal wrapped it into: those that start no record of their own."""
    from triage.ingest.lines import starts_record

    if not 1 <= failure <= len(lines):
        return None
    last = failure
    while (
        last < min(len(lines), failure + MAX_CONTINUED)
        and lines[last].strip()
        and not starts_record(lines[last])
        and not lines[last].startswith((" ", "\t"))
    ):
        last += 1
    return failure, last


def last_traceback(lines: list[str], failure: int) -> tuple[int, int] | None:
    """The last traceback that ends at the error: from its `Traceback` line to the error."""
    start = next((i for i in range(min(failure, len(lines)), 0, -1) if TRACEBACK_START in lines[i - 1]), None)
    return (start, failure) if start is not None else None


def last_lines(lines: list[str], failure: int) -> tuple[int, int] | None:
    """The last TAIL_LINES lines of the log (`tail -20`)."""
    body = len(lines) - (1 if lines and lines[-1] == "" else 0)
    return (max(1, body - TAIL_LINES + 1), body) if body > TAIL_LINES else None


EXCERPTS: dict[str, Cut] = {"error-line": error_line, "last-traceback": last_traceback, "last-20": last_lines}


def cut(text: str, span: tuple[int, int]) -> bytes:
    lines = _lines(text)
    return ("\n".join(lines[span[0] - 1 : span[1]]) + "\n").encode()


# --- the chat family: the log as a person passes it through a chat tool, an issue tracker or a
# browser (issue: chat pastes). Markdown around it, HTML or JSON escaping, a chat client's
# typography, and the headers and gutters those tools put before each line.
def _wrapped(head: str, tail: str) -> Variant:
    def variant(text: str) -> bytes:
        body = text.replace("\r\n", "\n")
        return (head + body + ("" if body.endswith("\n") else "\n") + tail).encode()

    return variant


_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}


def html_escaped(text: str) -> bytes:
    """Copied from a web page's source or a JSON field that held HTML (`&gt;`, `&#39;`)."""
    return "".join(_HTML.get(c, c) for c in text).encode()


def json_escaped(text: str) -> bytes | None:
    """The log as one JSON string's body (a log shipper's `message` field, a k8s event): one
    line, `\\n` and `\\"` literally."""
    import json

    body = json.dumps(text.replace("\r\n", "\n"), ensure_ascii=False)[1:-1]
    return (body + "\n").encode() if len(body) < 60_000 else None


def _smart(text: str) -> str:
    out, opened = [], False
    for i, c in enumerate(text):
        if c == '"':
            out.append("\u201d" if opened else "\u201c")
            opened = not opened
        elif c == "'":
            prev = text[i - 1] if i else " "
            out.append("\u2019" if prev.isalnum() or prev in ".)]" else "\u2018")
        else:
            out.append(c)
        if c == "\n":
            opened = False
    return "".join(out).replace("...", "…").replace(" --", " —")


def smart_typography(text: str) -> bytes:
    """A chat client's typography: curly quotes, `…`, an em dash for a flag's `--`."""
    return _smart(text).encode()


def odd_spaces(text: str) -> bytes:
    """Indentation as non-breaking spaces (Teams, Outlook) and a zero-width space at each
    line's start (a rich-text editor's join)."""
    out = []
    for line in _lines(text):
        bare = line.lstrip(" ")
        out.append(("\u200b" if line else "") + "\u00a0" * (len(line) - len(bare)) + bare)
    return "\n".join(out).encode()


def _gutter(i: int) -> str:
    return f"{i + 1:>4} | "


CHAT: dict[str, Variant] = {
    "fence": _wrapped("```\n", "```\n"),
    "fence-log": _wrapped("Here is the log:\n\n```log\n", "```\n"),
    "details": _wrapped("<details><summary>Full log</summary>\n\n```shell\n", "```\n\n</details>\n"),
    "blockquote": _prefixed(lambda i: "> "),
    "html": html_escaped,
    "json": json_escaped,
    "smart": smart_typography,
    "spaces": odd_spaces,
    "slack": _wrapped("alice  10:42 AM\n", ""),
    "teams": _prefixed(lambda i: "[10:42 AM] alice: " if i == 0 else ""),
    "irc": _prefixed(lambda i: "<bob> "),
    "ts": _prefixed(lambda i: f"Dec 05 10:42:{i % 60:02d} "),
    "gutter": _prefixed(_gutter),
    "grep-n": _prefixed(lambda i: f"{i + 1}: "),
}
CHAT_PER_LOG = 4  # of the fourteen, chosen per log by a hash of its name, as the wrappers are


def chat_variants_for(name: str) -> list[tuple[str, str, Variant]]:
    forms = list(CHAT.items())
    start = zlib.crc32(b"chat:" + name.encode()) % len(forms)
    return [("chat", *forms[(start + k * 3) % len(forms)]) for k in range(CHAT_PER_LOG)]


# One line pasted into a chat box: the error line as the one-line forms carry it.
ONE_LINE: dict[str, Callable[[str], str]] = {
    "backticks": lambda line: f"`{line}`",
    "bullet": lambda line: f"- {line}",
    "quote": lambda line: f"> {line}",
    "teams": lambda line: f"[10:42 AM] alice: {line}",
    "irc": lambda line: f"<bob> {line}",
    "html": lambda line: html_escaped(line).decode(),
    "smart": _smart,
    "fence": lambda line: f"```\n{line}\n```",
}


FAMILIES["chat"] = CHAT
