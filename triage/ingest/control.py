"""What the scan and the stages after it share: the lines it hands on (`Marked`), and the one
object (`ScanControl`) by which they tell the scan something and count what was left out.

The pipeline makes one `ScanControl` per log and hands it to the scan (`scan.iter_marked`),
the chain cut (`chains.CutChains`) and the parse stage (`parse.stream.line_events`), so no
stage looks up attributes on the iterable it was handed.
"""

from __future__ import annotations

from collections.abc import Callable

# A line the scan hands on: (number, text, holds a grammar anchor word, holds an evidence word).
Marked = tuple[int, str, bool, bool]


class ScanControl:
    """Told by the parse stage that a line was whole; counts the chain links left out."""

    __slots__ = ("_complete", "current", "links_skipped")

    def __init__(self) -> None:
        self._complete: Callable[[], None] | None = None  # the scanner's: its hard-wrap window ends
        # Whether the line the parse stage reads now came on as the scan handed it: a line a stage
        # held back and let go later (`CutChains`) is past its moment, so it ends no window.
        self.current = True
        self.links_skipped = 0  # links of deep chains left out (by the scan and by `CutChains`)

    def attach(self, complete: Callable[[], None]) -> None:
        """The scanner's hook, called by `line_complete`."""
        self._complete = complete

    def line_complete(self) -> None:
        """The anchor line just read holds its whole message: the lines after it are not its
        continuation, so the scan hands on only those with words of their own (on a serving
        log, most anchor lines are metrics lines followed by access lines)."""
        if self.current and self._complete is not None:
            self._complete()
