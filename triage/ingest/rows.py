"""Long tables at chunk level: past its first rows, a run of same-shaped rows goes on as one block.

`nvidia-smi --query-compute-apps=... --format=csv` on a shared node lists thousands of
processes, one row each, and every row holds an evidence word (`MiB`). Handed on one by one,
each row cost ~40 us in Python (decode, peel, redaction, the evidence reader, an event, the
timeline): 100 000 of them took seconds, for a report that lists the 16 largest and counts
the rest. Here, once HEAD_ROWS rows of one shape (same number of commas, no `|`, one line
after another, each holding an evidence word and no grammar word) have been handed on, the
rows that follow in the same shape are cut out of the chunk together and handed on as one
`Marked` whose text holds them joined by `\\n` (a line's text never holds one). The parse
stage (`parse/stream.py`) reads such a block by one compiled pattern, or row by row when
the pattern does not fit every row: what it finds is what the rows would have given.
"""

from __future__ import annotations

from collections.abc import Iterable

HEAD_ROWS = 64  # rows of a run handed on one by one before the rest goes as blocks
MAX_ROW = 2000  # a longer line is not a table row (and never one read.MAX_LINE_CHARS cuts)


class RowRun:
    """The run of table rows the scanner has handed on last, and where its rows end in a chunk."""

    def __init__(self, word_kinds: Iterable[tuple[bool, bool]]) -> None:
        # word index -> may extend a block (an evidence word that is no grammar word)
        self._row_word = [evidence and not grammar for grammar, evidence in word_kinds]
        self.commas = -1
        self.count = 0
        self.next_no = 0

    def see(self, text: str, no: int, grammar: bool, evidence: bool) -> None:
        """A line handed on by itself: it goes on (or starts) a run of rows, or ends one."""
        commas = text.count(",") if evidence and not grammar and len(text) <= MAX_ROW and "|" not in text else 0
        if not commas:
            self.count = 0
            return
        if commas == self.commas and no == self.next_no:
            self.count += 1
        else:
            self.commas, self.count = commas, 1
        self.next_no = no + 1

    def block_end(self, chunk: bytes, pos: int, last: int, spots: list[tuple[int, int]], k: int, no: int) -> int:
        """The end (just past its newline) of the rows from chunk[pos] on, up to chunk[last],
        that continue the run; `pos` when none does or the run is still short. `spots` are the
        chunk's (offset, word) hits by offset, spots[k] the first at or after `pos`; `no` is the
        number the line at `pos` will get."""
        if self.count < HEAD_ROWS or no != self.next_no:
            return pos
        row_word, commas, n = self._row_word, self.commas, len(spots)
        find, count = chunk.find, chunk.count
        p = pos
        while p < last:
            nl = find(b"\n", p, last + 1)
            if nl < 0 or nl - p > MAX_ROW or k >= n or spots[k][0] >= nl:
                break  # the row at p holds no word (or is no complete row)
            if count(b",", p, nl) != commas:
                break
            j = k
            while j < n and spots[j][0] < nl:
                if spots[j][1] < 0 or not row_word[spots[j][1]]:
                    return _clean_end(chunk, pos, p)
                j += 1
            k, p = j, nl + 1
        return _clean_end(chunk, pos, p)

    def took(self, rows: int) -> None:
        """`rows` rows were handed on as a block: the run goes on past them."""
        self.count += rows
        self.next_no += rows


def _clean_end(chunk: bytes, pos: int, end: int) -> int:
    """`end`, or the start of the first row of chunk[pos:end] holding a `|` or a `\r` (searched
    once over the block, not row by row)."""
    for mark in (b"|", b"\r"):
        at = chunk.find(mark, pos, end)
        if at >= 0:
            end = chunk.rfind(b"\n", pos, at) + 1 or pos
    return end
