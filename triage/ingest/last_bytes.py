"""The input's last bytes, kept as read: the lines a failure's message may lie on that the
fast scanner skipped (it hands on only lines holding a grammar word).

Keeping them costs a slice per chunk (lines are numbered back from the reader's count); they are
decoded, numbered and redacted only when a failure needs them (the error catalogue, `diagnose/catalogue_sign.py`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

TAIL_BYTES = 16 << 10  # about the last 100-200 lines of a vLLM log


class LastBytes:
    """Passes chunks through, remembering the last `size` bytes (no per-line work)."""

    def __init__(self, size: int = TAIL_BYTES) -> None:
        self.size = size
        self._kept = b""
        self._cut = False  # bytes before `_kept` were dropped: its first line may be partial

    def watch(self, chunks: Iterable[bytes]) -> Iterator[bytes]:
        for chunk in chunks:
            kept = chunk if len(chunk) >= self.size else self._kept + chunk
            if len(kept) > self.size:
                kept = kept[-self.size :]
                self._cut = True
            elif kept is chunk and self._kept:
                self._cut = True
            self._kept = kept
            yield chunk

    def lines(self, total: int, clean=None, repair=None) -> list[tuple[int, str]]:
        """(line number, text) of the kept lines that are whole, numbered back from `total` (the
        reader's count of lines), with a reshaped paste's `repair` undone as the scanner undid
        it (wrapped lines joined, numbered by their first physical line), cleaned (the redactor)."""
        from triage.ingest.lines import readable

        parts = self._kept.decode("utf-8", "replace").split("\n")
        if parts and parts[-1] == "":
            parts.pop()  # the input ends with a newline
        first = total - len(parts) + 1
        physical = [(first + i, raw.rstrip("\r")) for i, raw in enumerate(parts) if i or not self._cut]
        if repair:
            from triage.ingest.repair import repaired

            physical = list(repaired(physical, repair))
        out = []
        for no, raw in physical:
            line = readable(raw).strip()[:2000]
            if line and no > 0:
                out.append((no, clean(line) if clean else line))
        return out
