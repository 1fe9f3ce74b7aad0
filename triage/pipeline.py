"""One function from a log to a report; the CLI, the server and `run --` all call it."""

from __future__ import annotations

import re

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from triage.model import events as ev
from triage.parse.sysinfo import BundleReader
from triage.diagnose.match import AttemptResult, diagnose_attempt, exported_facts
from triage.ingest.lines import Line, peel, starts_record, strip_ansi
from triage.parse.parse import parse_line_detail
from triage.ingest.read import InputStats, iter_chunks
from triage.diagnose.redact import LineRedactor, redact_text
from triage.ingest.reshape import Unfolded
from triage.ingest.scan import Marked, iter_marked
from triage.parse.vocabulary import matcher
from triage.model.report import AttemptSummary, Echo, Failure, InputInfo, Report, VllmInfo
from triage.rule_engine.load import Rule, builtin_pack_paths, expand_pack_paths, load_packs, load_taxonomy
from triage.timeline.timeline import Timeline

MAX_EVIDENCE_LINES = 20000  # texts of evidence lines held before unused ones are dropped
RECENT_TEXTS = 2000
MAX_JOINS = 3
MAX_DOWNSTREAM = 8
WRAP_MIN_CHARS = 60  # a line shorter than any terminal is wide was not cut by a wrap
EVIDENCE_CHARS = 600


@dataclass
class Options:
    redact: bool = True
    extra_rules: list[str] = field(default_factory=list)
    max_bytes: int | None = None
    # Called after each line that states something has been fed to the timeline, with
    # (timeline, line, events): live callers (`run --`, `--follow`) watch for the fatal event.
    on_event: Callable[[Timeline, Line, list[ev.Event]], None] | None = None
    # Bytes read ahead to tell a hard-wrapped paste (unwrap.py); 0 for a live stream, which
    # a terminal has not wrapped and which must not wait for a sample.
    wrap_sample: int = 256 << 10


_RULES_CACHE: dict[tuple, list[Rule]] = {}


def load_rules(extra: Iterable[str] = ()) -> list[Rule]:
    key = tuple(extra)
    if key not in _RULES_CACHE:
        _RULES_CACHE[key] = _load_rules_cached([*builtin_pack_paths(), *expand_pack_paths(extra)])
    return _RULES_CACHE[key]


def _load_rules_cached(paths: list[Path]) -> list[Rule]:
    """Compiled rules from the on-disk cache when their packs are unchanged (YAML and
    expression compiling cost more than a whole small log)."""
    from triage import cache

    sources = [*paths, *{p.parent / "taxonomy.yaml" for p in paths[:1]}]
    key = cache.stamp(sources, "rules")
    name = f"rules-{key}.pickle" if key else None
    rules = cache.load(name) if name else None
    if isinstance(rules, list) and all(isinstance(r, Rule) for r in rules):
        return rules
    rules = load_packs(paths, set(load_taxonomy()))
    if name:
        cache.save(name, rules)
    return rules


def run(stream: BinaryIO, name: str, options: Options | None = None, rules: list[Rule] | None = None) -> Report:
    """Read a log stream and say why it failed (or that it did not)."""
    options = options or Options()
    rules = rules if rules is not None else load_rules(options.extra_rules)
    stats = InputStats(name=redact_text(name) if options.redact else name)
    timeline = Timeline()
    texts: dict[int, tuple[str, str]] = {}
    prune_at = MAX_EVIDENCE_LINES
    order = _Order()
    marked = iter_marked(iter_chunks(stream, stats, options.max_bytes), stats, matcher(), MAX_JOINS,
                         wrap_sample=options.wrap_sample)
    for line, events in _events(Unfolded(marked, matcher().classify), LineRedactor() if options.redact else None):
        texts[line.no] = (line.origin, _evidence_text(line))
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
    report = build_report(timeline, rules, texts, stats)
    if order.reversed():
        report.notes.append("the log lists its newest lines first; it was read bottom-up")
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


# vLLM's request logger (`--enable-log-requests`, on by default before 0.10.2) prints each
# prompt and each output (entrypoints/logger.py): text from users that may quote anything,
# an error message or nvidia-smi output included. Such a line is never evidence.
REQUEST_LOG_PREFIXES = ("Received request ", "Generated response ")


def _events(marked: Iterable[Marked], clean: Callable[[str], str] | None = None) -> Iterator[tuple[Line, list[ev.Event]]]:
    """(line, events) for every line that states something, re-joining hard-wrapped lines.

    `clean` (the redactor) sees each line whole, before it is parsed, joined or cut: every
    text of the report (evidence, messages, facts) comes from what it returns.

    A message that runs into the end of its line followed by a line with no prefix of its
    own was wrapped by a terminal, an editor or a chat box: the two are parsed as one.
    `marked` holds only the lines near anchors (see `scan.iter_marked`); a gap in the line
    numbers stands for lines that hold nothing, and ends any wrap.
    """
    held: tuple[str, Line, list[ev.Event], bool] | None = None  # raw, line, events, ran out
    joins = last = 0
    evidence = BundleReader()
    complete = getattr(marked, "line_complete", None)
    bars_seen: set[str] = set()
    for no, raw, anchored, bundled in marked:
        if held is not None and no == last + 1 and held[3] and joins < MAX_JOINS and _continues(raw):
            joined = peel(redact_text(held[0] + raw) if clean else held[0] + raw, held[1].no)
            events, ran_out = parse_line_detail(joined)
            if len(events) >= len(held[2]) and events != held[2]:
                held, joins, last = (held[0] + raw, joined, events, ran_out), joins + 1, no
                continue
        last = no
        if held is not None and held[2]:
            yield held[1], held[2]
        held, joins = None, 0
        if not (anchored or bundled):
            continue
        progress = _progress_key(raw) if anchored else None
        if progress is not None and progress in bars_seen:  # the same bar again: it states nothing new
            if complete is not None:
                complete()
            continue
        line = peel(clean(raw) if clean else raw, no)
        if line.text.startswith(REQUEST_LOG_PREFIXES):  # user content: words in it state nothing
            if complete is not None:
                complete()
            continue
        if anchored:
            events, ran_out = parse_line_detail(line)
            events = events or _error_line(line)
            # A long line whose anchor word states nothing may be a phrase a wrap cut in two.
            ran_out = ran_out or (not events and len(line.text) >= WRAP_MIN_CHARS)
            if not ran_out and complete is not None:
                complete()
            if progress is None:
                if events:
                    bars_seen.clear()  # a bar after other news (a new attempt, a new phase) is read again
            elif len(bars_seen) < MAX_BARS:
                bars_seen.add(progress)
            if events or ran_out:
                held = (raw, line, events, ran_out)
                continue
        if bundled:
            found = evidence.read(line)
            if found:
                yield line, found
    if held is not None and held[2]:
        yield held[1], held[2]


# A progress bar's update line (tqdm: "Loading safetensors checkpoint shards:  53% Completed |
# 16/30 [...]", "Capturing CUDA graphs: 45%|████▌ | 30/67 [...]"): its events do not depend on
# the figures, so once a bar's line has been read, its updates are skipped unread.
_PROGRESS = re.compile(r"\d{1,3}%(?: Completed \||\|)")
MAX_BARS = 64


def _progress_key(raw: str) -> str | None:
    """The part of a progress bar's line before its percentage (origin and title), else None."""
    if "%" not in raw:
        return None
    m = _PROGRESS.search(raw, 0, 400)
    return raw[: m.start()].rstrip() if m else None


def _error_line(line: Line) -> list[ev.Event]:
    """A line logged at ERROR/CRITICAL by a logger (its header says so) whose words no rule of
    the grammar knows: kept as an `error_line`, so a failure is seen without known text.
    Pieces of a logged traceback (frames, source, carets, chain notes) are not such lines."""
    text = line.text
    if not line.headed or line.level not in ("ERROR", "CRITICAL") or len(text) < 8 or text[:1] in " \t^~":
        return []
    if text.startswith(("Traceback", "During handling", "The above exception", "Exception in ")):
        return []
    return [ev.ErrorLine(line=line.no, origin=line.origin, pid=line.pid, message=text[:300])]


def _continues(raw: str) -> bool:
    """A physical line that cannot start a message of its own: no prefix, no header, no indent
    (an indented line is a traceback's frame or source, never the rest of a message)."""
    if raw[:1] == " " and raw[1:2] not in ("", " ", "\t"):  # a wrap that fell just before a space
        return not starts_record(raw[1:])
    return bool(raw) and raw[0] not in " \t(" and not starts_record(raw)


def run_path(path: str | Path, options: Options | None = None) -> Report:
    from triage.ingest.read import open_source

    stream, name = open_source(str(path))
    with stream:
        return run(stream, name, options)


def _evidence_text(line: Line) -> str:
    text = strip_ansi(line.raw).strip()
    return text if len(text) <= EVIDENCE_CHARS else text[: EVIDENCE_CHARS - 1] + "…"


def build_report(timeline: Timeline, rules: list[Rule], texts: dict[int, tuple[str, str]],
                 stats: InputStats) -> Report:
    attempts = timeline.attempts
    results = [diagnose_attempt(a, rules, texts, len(attempts)) for a in attempts]
    last = results[-1]
    outcome = _outcome(last)
    lead = _recovered_from(results) if outcome == "healthy" else None
    if lead is not None:
        outcome = "recovered"
    lead = lead or last
    diagnoses = list(lead.diagnoses) if lead.fatal is not None else []
    if lead.fatal is not None:
        for earlier in reversed(results[:results.index(lead)]):
            for d in earlier.diagnoses:
                if all(d.id != x.id for x in diagnoses):
                    diagnoses.append(d.model_copy(update={"confidence": round(d.confidence * 0.8, 2)}))
    summaries = [_summary(r) for r in results]
    repeats = _trailing_repeats(summaries)
    summaries[-1].repeats = repeats
    notes = _notes(results, stats, timeline.dropped_attempts)
    if outcome == "recovered":
        notes.insert(0, f"startup attempt {lead.attempt.index} failed (line {lead.fatal.line}); the relaunch from line "
                        f"{last.attempt.first_line} reached ready (line {last.attempt.ready.line}): the causes "
                        "below are the failed attempt's")
    if repeats > 1:
        notes.insert(0, f"the last {repeats} startup attempts failed the same way ({summaries[-1].causes[0]}): "
                        "a restart loop")
    restarts = last.facts.value("restart_count") or max((r.facts.value("restart_count") or 0) for r in results)
    if restarts:
        notes.insert(0, f"a supervisor (systemd) has restarted the server {restarts} times: the failure below repeats")
    return Report(
        input=InputInfo(name=stats.name, lines=stats.lines, bytes=stats.bytes,
                        truncated_lines=stats.truncated_lines, compressed=stats.compressed),
        outcome=outcome,
        vllm=_vllm_info(last, timeline),
        failure=_failure(lead, texts),
        facts=exported_facts(lead.facts),
        diagnoses=diagnoses,
        attempts=summaries,
        notes=notes,
    )


def _recovered_from(results: list[AttemptResult]) -> AttemptResult | None:
    """The latest earlier attempt that failed, when the last one reached ready: a relaunch
    that worked does not make the failure before it unworthy of a word."""
    for earlier in reversed(results[:-1]):
        if earlier.fatal is not None and not earlier.fatal.cut and earlier.diagnoses:
            return earlier
    return None


def _trailing_repeats(summaries: list[AttemptSummary]) -> int:
    """How many attempts at the end failed with the same leading cause (a restart loop)."""
    last = summaries[-1]
    if last.outcome != "failed" or not last.causes:
        return 1
    count = 0
    for s in reversed(summaries):
        if s.outcome != "failed" or s.causes[:1] != last.causes[:1]:
            break
        count += 1
    return count


def _outcome(result: AttemptResult) -> str:
    if result.fatal is not None:
        return "incomplete" if result.fatal.cut else "failed"
    return "healthy" if result.attempt.ready is not None else "incomplete"


def _failure(result: AttemptResult, texts: dict[int, tuple[str, str]]) -> Failure | None:
    fatal = result.fatal
    if fatal is None:
        return None
    exc = fatal.exception
    message = f"{exc.type}: {exc.message}".strip(": ") if exc else texts.get(fatal.line, ("", ""))[1]
    if fatal.cut:
        message = f"(the log ends inside this traceback) {message}"
    return Failure(phase=fatal.phase, line=fatal.line, origin=fatal.origin, message=message[:1000],
                   exception=exc.type if exc else None, downstream=_downstream(result, texts))


def _downstream(result: AttemptResult, texts: dict[int, tuple[str, str]]) -> list[Echo]:
    """What other processes printed after the fatal error: they died because it did.

    One line per origin (its first error after the fatal one), so a multi-rank log says
    which rank failed first and which only followed.
    """
    fatal = result.fatal
    seen: set[str] = {fatal.origin} if fatal else set()
    out: list[Echo] = []
    for s in result.attempt.signals:
        if fatal is None or s.line <= fatal.line or s.origin in seen or s.shutdown:
            continue
        seen.add(s.origin)
        exc = s.exception
        text = f"{exc.type}: {exc.message}" if exc else texts.get(s.line, ("", ""))[1]
        if s.cut:
            text = "a traceback (the log ends inside it)"
        out.append(Echo(line=s.line, origin=s.origin, message=text[:300]))
        if len(out) >= MAX_DOWNSTREAM:
            break
    return out


def _vllm_info(result: AttemptResult, timeline: Timeline) -> VllmInfo:
    version = result.facts.value("vllm_version")
    engine = result.facts.value("engine")
    if engine is None:
        engine = _engine_from_origins(timeline)
    return VllmInfo(version=version, engine=engine if engine in ("v0", "v1") else None)


def _engine_from_origins(timeline: Timeline) -> str | None:
    origins = {e.origin.split(" ")[0] for a in timeline.attempts for e in a.events if e.origin}
    if any(o.startswith(("EngineCore", "VllmWorker", "Worker_", "Worker")) and o != "VllmWorkerProcess" for o in origins):
        return "v1"
    if "VllmWorkerProcess" in origins:
        return "v0"
    return None


def _summary(result: AttemptResult) -> AttemptSummary:
    a = result.attempt
    return AttemptSummary(index=a.index, first_line=a.first_line, last_line=a.last_line,
                          outcome=_outcome(result), causes=[d.id for d in result.diagnoses], repeats=a.repeats)


def _notes(results: list[AttemptResult], stats: InputStats, dropped_attempts: int = 0) -> list[str]:
    notes = []
    if len(results) > 1:
        failed = sum(1 for r in results if r.fatal is not None)
        lead = "the failed one leads" if results[-1].fatal is None and failed else "the last one leads"
        notes.append(f"the log holds {len(results)} startup attempts ({failed} failed); {lead}")
    if dropped_attempts:
        notes.append(f"{dropped_attempts} startup attempts in the middle of the log were left out (a restart loop)")
    if stats.indent:
        notes.append(f"every line of the log was indented ({len(stats.indent)} "
                     f"{'tab' if stats.indent.startswith(chr(9)) else 'space'}(s), a pasted code block): "
                     "the indent was cut")
    if stats.wrap_width:
        notes.append(f"the log was hard-wrapped at {stats.wrap_width} columns (a terminal copy?): "
                     "wrapped lines were joined back, and cited by their first line")
    if stats.truncated_lines:
        notes.append(f"{stats.truncated_lines} over-long line(s) were cut at 64 KiB")
    if stats.lines == 0:
        notes.append("the input is empty")
    return notes
