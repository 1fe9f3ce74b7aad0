"""Diagnosed attempts to the Report: outcome, failure, downstream echoes, attempts and notes."""

from __future__ import annotations

from triage.diagnose.catalogue_sign import TailLines
from triage.diagnose.excerpt import excerpt_note
from triage.diagnose.match import AttemptResult, diagnose_attempt, exported_facts
from triage.ingest.lines import Line, readable
from triage.ingest.read import InputStats
from triage.model.report import AttemptSummary, Echo, Failure, InputInfo, Outcome, Report, VllmInfo
from triage.rule_engine.load import Rule
from triage.timeline.timeline import Timeline

MAX_DOWNSTREAM = 8
EVIDENCE_CHARS = 600


def evidence_text(line: Line) -> str:
    text = readable(line.raw).strip()
    return text if len(text) <= EVIDENCE_CHARS else text[: EVIDENCE_CHARS - 1] + "…"


def build_report(
    timeline: Timeline,
    rules: list[Rule],
    texts: dict[int, tuple[str, str]],
    stats: InputStats,
    tail: TailLines | None = None,
) -> Report:
    """`tail`: the input's last lines, read only when the error catalogue is asked (match.py)."""
    attempts = timeline.attempts
    results = [diagnose_attempt(a, rules, texts, len(attempts), tail) for a in attempts]
    last = results[-1]
    outcome = _outcome(last)
    lead = _recovered_from(results) if outcome == "healthy" else None
    if lead is not None:
        outcome = "recovered"
    lead = lead or last
    diagnoses = list(lead.diagnoses) if lead.fatal is not None else []
    if lead.fatal is not None:
        for earlier in reversed(results[: results.index(lead)]):
            for d in earlier.diagnoses:
                if all(d.id != x.id for x in diagnoses):
                    diagnoses.append(d.model_copy(update={"confidence": round(d.confidence * 0.8, 2)}))
    summaries = [_summary(r) for r in results]
    repeats = _trailing_repeats(summaries)
    summaries[-1].repeats = repeats
    notes = _notes(results, stats, timeline.dropped_attempts)
    if outcome == "recovered":
        notes.insert(
            0,
            f"startup attempt {lead.attempt.index} failed (line {lead.fatal.line}); the relaunch from line "  # type: ignore[union-attr]
            f"{last.attempt.first_line} reached ready (line {last.attempt.ready.line}): the causes "  # type: ignore[union-attr]
            "below are the failed attempt's",
        )
    if repeats > 1:
        notes.insert(
            0, f"the last {repeats} startup attempts failed the same way ({summaries[-1].causes[0]}): a restart loop"
        )
    excerpt = excerpt_note(timeline, lead.facts, lead.fatal.phase if lead.fatal else None, [d.id for d in diagnoses])
    if excerpt:
        notes.append(excerpt)
    restarts = last.facts.value("restart_count") or max((r.facts.value("restart_count") or 0) for r in results)
    if restarts:
        notes.insert(0, f"a supervisor (systemd) has restarted the server {restarts} times: the failure below repeats")
    return Report(
        input=InputInfo(
            name=stats.name,
            lines=stats.lines,
            bytes=stats.bytes,
            truncated_lines=stats.truncated_lines,
            compressed=stats.compressed,
        ),
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


def _outcome(result: AttemptResult) -> Outcome:
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
    return Failure(
        phase=fatal.phase,
        line=fatal.line,
        origin=fatal.origin,
        message=message[:1000],
        exception=exc.type if exc else None,
        downstream=_downstream(result, texts),
    )


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
    if any(
        o.startswith(("EngineCore", "VllmWorker", "Worker_", "Worker")) and o != "VllmWorkerProcess" for o in origins
    ):
        return "v1"
    if "VllmWorkerProcess" in origins:
        return "v0"
    return None


def _summary(result: AttemptResult) -> AttemptSummary:
    a = result.attempt
    return AttemptSummary(
        index=a.index,
        first_line=a.first_line,
        last_line=a.last_line,
        outcome=_outcome(result),
        causes=[d.id for d in result.diagnoses],
        repeats=a.repeats,
    )


def _notes(results: list[AttemptResult], stats: InputStats, dropped_attempts: int = 0) -> list[str]:
    notes = []
    if len(results) > 1:
        failed = sum(1 for r in results if r.fatal is not None)
        lead = "the failed one leads" if results[-1].fatal is None and failed else "the last one leads"
        notes.append(f"the log holds {len(results)} startup attempts ({failed} failed); {lead}")
    if dropped_attempts:
        notes.append(f"{dropped_attempts} startup attempts in the middle of the log were left out (a restart loop)")
    if stats.indent:
        notes.append(
            f"every line of the log was indented ({len(stats.indent)} "
            f"{'tab' if stats.indent.startswith(chr(9)) else 'space'}(s), a pasted code block): "
            "the indent was cut"
        )
    if stats.wrap_width:
        notes.append(
            f"the log was hard-wrapped at {stats.wrap_width} columns (a terminal copy?): "
            "wrapped lines were joined back, and cited by their first line"
        )
    if stats.truncated_lines:
        notes.append(f"{stats.truncated_lines} over-long line(s) were cut at 64 KiB")
    if stats.lines == 0:
        notes.append("the input is empty")
    return notes
