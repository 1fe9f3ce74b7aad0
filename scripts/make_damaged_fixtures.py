"""Build fixtures/logs/damaged/ from two of our own clean fixtures, one damage per file.

Each damaged copy must still be diagnosed as its clean original is: the tests assert it.
Run from the project root: python scripts/make_damaged_fixtures.py
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "fixtures" / "logs" / "damaged"
KV = ROOT / "fixtures/logs/kv_cache_insufficient/v1-0.9.2-tp2-qwen14b-4090-estimated-max-len.log"
GRAPH = ROOT / "fixtures/logs/cuda_graph_capture_oom/v0-0.3.3-llama2-13b-a100-40g-capture-oom-capacty-typo.log"


def hard_wrap(text: str, width: int) -> str:
    """A terminal or chat box that breaks every long line at `width` columns, mid-word."""
    out = []
    for line in text.splitlines():
        while len(line) > width:
            out.append(line[:width])
            line = line[width:]
        out.append(line)
    return "\n".join(out) + "\n"


def split_frames_before_line(text: str) -> str:
    """Editors that wrap a frame at its comma: `File "..."` / `, line N, in f`."""
    return re.sub(r'(File "[^"]+")(, line \d+, in )', r"\1\n\2", text)


def split_number(text: str) -> str:
    """A wrap that lands inside a figure: `Tried to allocate 1.` / `25 GiB`."""
    return re.sub(r"(Tried to allocate \d+\.)(\d+ [GM]iB)", r"\1\n\2", text, count=1)


def cut_mid_word(text: str) -> str:
    """A chat box that truncates long lines without a marker."""
    return "\n".join(line[:150] for line in text.splitlines()) + "\n"


def blockquote(text: str) -> str:
    return "".join(f"> {line}\n" for line in text.splitlines())


def grep_n(text: str) -> str:
    return "".join(f"{i}:{line}\n" for i, line in enumerate(text.splitlines(), 1))


def newest_first(text: str) -> str:
    return "\n".join(reversed(text.splitlines())) + "\n"


def caret_ansi(text: str) -> str:
    text = re.sub(r"^(\([^)]*pid=\d+\))", r"^[[1;36m\1^[[0;0m", text, flags=re.M)
    return re.sub(r"^((?:\S+ )?)(INFO|WARNING|ERROR)( \d\d-\d\d)", r"\1^[[32m\2^[[0m\3", text, flags=re.M)


def crlf(text: str) -> str:
    return text.replace("\n", "\r\n")


def stop_mid_traceback(text: str) -> str:
    lines = text.splitlines()
    last_frame = max(i for i, line in enumerate(lines) if 'File "' in line)
    return "\n".join(lines[: last_frame + 1]) + "\n"


CASES = [
    ("kv-hard-wrapped-at-100-columns", KV, lambda t: hard_wrap(t, 100), "kv_cache_insufficient", "failed"),
    ("graph-frames-split-before-line-number", GRAPH, split_frames_before_line, "cuda_graph_capture_oom", "failed"),
    ("graph-oom-figure-split-across-lines", GRAPH, split_number, "cuda_graph_capture_oom", "failed"),
    ("kv-lines-cut-at-150-characters", KV, cut_mid_word, "kv_cache_insufficient", "failed"),
    ("kv-pasted-as-blockquote", KV, blockquote, "kv_cache_insufficient", "failed"),
    ("graph-grep-n-line-numbers", GRAPH, grep_n, "cuda_graph_capture_oom", "failed"),
    ("kv-newest-first-export", KV, newest_first, "kv_cache_insufficient", "failed"),
    ("kv-pasted-caret-ansi", KV, caret_ansi, "kv_cache_insufficient", "failed"),
    ("graph-crlf-line-endings", GRAPH, crlf, "cuda_graph_capture_oom", "failed"),
    ("kv-log-stops-mid-traceback", KV, stop_mid_traceback, "kv_cache_insufficient", "failed"),
    # The OOM line itself is lost: only the frames say where it died, not why. The honest
    # answer is an unexplained failure in graph capture, not a guess at the cause.
    ("graph-log-stops-mid-traceback", GRAPH, stop_mid_traceback, "unknown_failure", "incomplete"),
]


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, source, damage, cause, outcome in CASES:
        text = source.read_text(encoding="utf-8")
        (OUT / f"{name}.log").write_bytes(damage(text).encode("utf-8"))
        (OUT / f"{name}.expect.yaml").write_text(
            f'about: "{source.name} after one kind of damage ({name}); the cause must still be found."\n'
            f"source: {source.relative_to(ROOT)}\n"
            f"expect: [{cause}]\n"
            f"outcome: {outcome}\n" + ("phase: cuda_graph_capture\n" if source == GRAPH else "")
        )


if __name__ == "__main__":
    main()
