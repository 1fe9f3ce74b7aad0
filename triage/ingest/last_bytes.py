"""The input's last bytes, kept as read: the lines a failure's message may lie on that the
fast scanner skipped (it hands on only lines holding a grammar word).

Keeping them costs a slice per chunk; they are decoded, numbered and redacted only when a
failure needs them (the error catalogue, `diagnose/catalogue_sign.py`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

TAIL_BYTES = 16 << 10  # about the last 100-200 lines of a vLLM log


class LastBytes:
    """Passes chunks through, remembering the last TAIL_BYTES and how many lines came before."""

    def __init__(self, size: int = TAIL_BYTES) -> None:
        self.size = size
        self._kept = b""
        self._newlines = 0  # newlines in the bytes before `_kept`

    def watch(self, chunks: Iterable[bytes]) -> Iterator[bytes]:
        for chunk in chunks:
            kept = self._kept + chunk
            if len(kept) > self.size:
                cut = len(kept) - self.size
                self._newlines += kept.count(b"\n", 0, cut)
                kept = kept[cut:]
            self._kept = kept
            yield chunk

    def lines(self, clean=None, repair=None) -> list[tuple[int, str]]:
        """(line number, text) of the kept lines that are whole (the first may be cut), with a
        reshaped paste's `repair` undone as the scanner undid it (wrapped lines joined, numbered
        by their first physical line), cleaned (the redactor)."""
        from triage.ingest.lines import strip_ansi

        first = self._newlines + 1
        parts = self._kept.decode("utf-8", "replace").split("\n")
        physical = [(first + i, raw.rstrip("\r")) for i, raw in enumerate(parts) if i or not self._newlines]
        if repair:
            from triage.ingest.repair import repaired

            physical = list(repaired(physical, repair))
        out = []
        for no, raw in physical:
            line = strip_ansi(raw).strip()[:2000]
            if line:
                out.append((no, clean(line) if clean else line))
        return out
