"""One function from a log to a report; the CLI, the server and `run --` all call it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, BinaryIO

from msgspec import Struct, field

from triage.diagnose.redaction import policy
from triage.diagnose.report_builder import build_report, evidence_text
from triage.ingest.chains import CutChains
from triage.ingest.control import ScanControl
from triage.ingest.last_bytes import LastBytes
from triage.ingest.lines import Line
from triage.ingest.read import InputStats, iter_chunks
from triage.ingest.repair import Repair
from triage.ingest.reshape import Unfolded
from triage.ingest.scan import iter_marked
from triage.model import events as ev
from triage.model.report import Report
from triage.parse.stream import MAX_JOINS, line_events
from triage.parse.vocabulary import matcher
from triage.rule_engine.load import Rule, load_rules
from triage.timeline.pasted import read_pasted
from triage.timeline.timeline import Timeline

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["Options", "Report", "load_rules", "run", "run_path"]

MAX_EVIDENCE_LINES = 20000  # texts of evidence lines held before unused ones are dropped
RECENT_TEXTS = 2000


class Options(Struct):
    redact: bool = True
    extra_rules: list[str] = field(default_factory=list)
    max_bytes: int | None = None
    # Called after each line that states something has been fed to the timeline, with
    # (timeline, line, events): live callers (`run --`, `--follow`) watch for the fatal event.
    on_event: Callable[[Timeline, Line, list[ev.Event]], None] | None = None
    # Bytes read ahead to tell a hard-wrapped paste (ingest/repair.py); 0 for a live stream, which
    # a terminal has not wrapped and which must not wait for a sample.
    wrap_sample: int = 256 << 10


def run(stream: BinaryIO, name: str, options: Options | None = None, rules: list[Rule] | None = None) -> Report:
    """Read a log stream and say why it failed (or that it did not)."""
    options = options or Options()
    rules = rules if rules is not None else load_rules(options.extra_rules)
    redaction = policy(options.redact)  # the one policy (diagnose/redaction.py): texts masked as they enter
    stats = InputStats(name=redaction.text(name))
    timeline = Timeline()
    texts: dict[int, tuple[str, str]] = {}
    prune_at = MAX_EVIDENCE_LINES
    order = _Order()
    tail = LastBytes()
    control = ScanControl()  # what the parse stage tells the scan; the chain links left out
    marked = iter_marked(
        tail.watch(iter_chunks(stream, stats, options.max_bytes)),
        stats,
        matcher(),
        MAX_JOINS,
        wrap_sample=options.wrap_sample,
        control=control,
    )
    chains = CutChains(Unfolded(marked, matcher().classify), control)
    for line, events in line_events(chains, redaction.lines(), control):
        texts[line.no] = (line.origin, evidence_text(line))
        timeline.feed(line, events)
        order.see(line, events)
        if len(texts) > prune_at:  # a long log: keep the texts of lines that kept events point at
            _prune_texts(texts, timeline)
            prune_at = max(MAX_EVIDENCE_LINES, 2 * len(texts))
        if options.on_event is not None:
            options.on_event(timeline, line, events)
    timeline.finish()
    if order.reversed():  # an export that lists the newest line first: read it bottom-up
        timeline = Timeline()
        for line, events in reversed(order.kept):
            timeline.feed(line, events)
        timeline.finish()
    clean = redaction.text if redaction.on else None
    repair = Repair(indent=stats.indent, width=stats.wrap_width)  # a reshaped paste, as the scanner read it
    timeline, pasted = read_pasted(timeline, order.kept, stats.lines, lambda: tail.lines(stats.lines, clean, repair))
    if pasted is not None:  # one of vLLM's messages pasted alone (timeline/pasted.py): its line is evidence
        texts[pasted[0]] = ("", pasted[1])
    report = build_report(timeline, rules, texts, stats, tail=lambda: tail.lines(stats.lines, clean, repair))
    if order.reversed():
        report.notes.append("the log lists its newest lines first; it was read bottom-up")
    dropped = control.links_skipped
    if dropped:
        report.notes.append(
            f"{dropped} links of a chained traceback repeated earlier ones and were "
            "skipped (the first and the last are read)"
        )
    return report


class _Order:
    """Tells a newest-first export from a log: vLLM's timestamps mostly go backwards.

    Keeps the (line, events) pairs of a small log so it can be read again bottom-up;
    a long log is assumed to be in order (exports that reverse it are pasted excerpts).
    """

    MAX_KEPT = 20000

    def __init__(self) -> None:
        self.kept: list[tuple[Line, list[ev.Event]]] = []
        self.back = self.forward = 0
        self._last: str | None = None

    def see(self, line: Line, events: list[ev.Event]) -> None:
        if len(self.kept) < self.MAX_KEPT:
            self.kept.append((line, events))
        if line.time:
            if self._last is not None and line.time != self._last:
                if line.time < self._last:
                    self.back += 1
                else:
                    self.forward += 1
            self._last = line.time

    def reversed(self) -> bool:
        return len(self.kept) < self.MAX_KEPT and self.back >= 3 and self.back > 3 * self.forward


def _prune_texts(texts: dict[int, tuple[str, str]], timeline: Timeline) -> None:
    keep = timeline.lines_in_use()
    keep.update(list(texts)[-RECENT_TEXTS:])
    for no in [n for n in texts if n not in keep]:
        del texts[no]


def run_path(path: str | Path, options: Options | None = None) -> Report:
    from triage.ingest.read import open_source

    stream, name = open_source(str(path))
    with stream:
        return run(stream, name, options)
