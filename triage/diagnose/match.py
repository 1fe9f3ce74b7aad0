"""Match rules against each failed attempt, compute their figures, rank, attach evidence.

Ranking: each rule states its rank (an expression, so a tie-break such as "a foreign
holder larger than the shortfall leads" lives in the rule pack); a rule whose bound
event is part of the fatal error gets a small bonus, so the fatal event's cause leads
among equals. One diagnosis per cause; a fallback rule (unknown_failure) only speaks
when no other rule explained the attempt. The last attempt leads; causes seen only in
earlier attempts follow it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, MutableMapping
from typing import Any

from msgspec import Struct, field

from triage.diagnose.catalogue_sign import TailLines, catalogue_sign
from triage.diagnose.memory_view import build_view, check_remedies
from triage.errors import ExpressionError, RuleBudgetError
from triage.model import events as ev
from triage.model.report import Diagnosis, Evidence, Remedy
from triage.parse.packages import companions
from triage.rule_engine.expr import FactView, PackFigure, Trace
from triage.rule_engine.load import Rule
from triage.rule_engine.op_budget import ATTEMPT_OPS, RULE_OPS, Budget, BudgetExceeded
from triage.timeline.facts import Facts, find_oom, merge
from triage.timeline.root_exception import exception_fields
from triage.timeline.signals import Signal
from triage.timeline.timeline import Attempt

FATAL_BONUS = 5
# Operations (expression nodes, items walked) one rule may spend on one startup attempt, and
# all rules together (budget.py): the built-in packs spend a small share of these.
MAX_EVIDENCE = 8
EXPORTED_FACT_TYPES = (int, float, str, bool, list)


class FailureView(Struct, frozen=True):
    """What rules may read about the failure; a record (its fields only) so reading it cites its line."""

    line: int
    origin: str = ""
    phase: str | None = None
    type: str | None = None
    message: str = ""
    frames: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    after_ready: bool = False
    exit_code: int | None = None
    repeats: int = 1
    where: str | None = None  # the innermost frame: "file.py:123 in func"
    phase_line: int | None = None  # another line that placed the failure in its phase (a sibling rank's frame)
    phase_frames: list[str] = field(
        default_factory=list
    )  # the frame functions that placed it in its phase: its own, else a sibling rank's
    root: str | None = None  # "Type: message" of the chain's first exception (what a wrapper re-raised)
    package: str | None = None  # the installed package whose code raised it (the innermost frame's)
    companions: list[str] = field(
        default_factory=list
    )  # packages vLLM loads but does not ship, among the frames (packages.py)
    # The root exception classified (timeline/root_exception.py): what fallback rules read when no sign matches.
    exception_class: str | None = None  # "FileNotFoundError", "ValidationError" (a RayTaskError's inner one)
    exception_module: str | None = None  # "huggingface_hub.errors", "pydantic_core._pydantic_core"
    errno: int | None = None
    module: str | None = None  # the dotted module of the frame that raised it: "huggingface_hub.file_download"
    path: str | None = None  # the path of an "[Errno N] ...: 'path'" message
    errno_name: str | None = None  # "ENOSPC", "EADDRNOTAVAIL" (timeline/errno_table.py, by text or number)
    about: str | None = None  # what the error concerns: shm, cache, file, hub, distributed, api_server
    missing: str | None = None  # what the message says is not installed: a module, a program, nvcc
    missing_kind: str | None = None  # "module", "program", "toolkit"; "submodule": a part of an installed package
    timeout_kind: str | None = None  # a startup deadline ran out: engine_ready, handshake, rpc, placement_group
    deadline_s: float | None = None  # a deadline the message states ("within 5 minutes"), in seconds
    install: str | None = None  # the install line the message asks for, or one made from the module name


def failure_view(signal: Signal | None) -> FailureView | None:
    if signal is None:
        return None
    exc = signal.exception
    chain_frames = signal.chain.frames if signal.chain else []
    deaths = [e for e in signal.events if isinstance(e, ev.ProcessDied)]
    died = next((e for e in deaths if e.exit_code is not None), deaths[0] if deaths else None)
    return FailureView(
        line=signal.line,
        origin=signal.origin,
        phase=signal.phase,
        type=exc.type if exc else None,
        message=(exc.message if exc else _describe(signal))[:2000],
        frames=[f.func for f in chain_frames],
        files=[f.file for f in chain_frames],
        kinds=sorted({e.kind for e in signal.events}),
        after_ready=signal.after_ready,
        exit_code=died.exit_code if died else None,
        repeats=signal.repeats,
        phase_line=signal.phase_line,
        phase_frames=[f.func for f in chain_frames] or signal.sibling_frames,
        where=_where(chain_frames),
        root=_root(signal),
        package=_package(signal),
        companions=companions([f.file for f in chain_frames]),
        **exception_fields(signal),
    )


def _root(signal: Signal) -> str | None:
    """The first exception of the fatal chain: the cause, not the wrapper that re-raised it."""
    chain = signal.chain
    first = next((tb.exception for tb in chain.tracebacks if tb.exception), None) if chain else None
    first = first or signal.exception
    return f"{first.type}: {first.message}".strip(": ")[:2000] if first else None


def _package(signal: Signal) -> str | None:
    """The package of the innermost frame of the root traceback that lives in an installed
    package (site-packages/dist-packages): who to blame when no rule knows the error."""
    chain = signal.chain
    if chain is None:
        return None
    root = next((tb for tb in chain.tracebacks if tb.exception), chain.tracebacks[0] if chain.tracebacks else None)
    for frame in reversed(root.frames if root else []):
        m = _PACKAGE.search(frame.file)
        if m:
            return m.group(1)
    return None


_PACKAGE = re.compile(r"(?:site|dist)-packages[/\\]([A-Za-z_][\w]*)")


def _where(frames: list[ev.Frame]) -> str | None:
    if not frames:
        return None
    inner = frames[-1]
    return f"{inner.file.rsplit('/', 1)[-1]}:{inner.lineno} in {inner.func}"


def _describe(signal: Signal) -> str:
    """The failure's message when no exception gives one: what its first describable event says."""
    said = next((d for e in signal.events if (d := e.describe()) is not None), None)
    if said is not None:
        return said
    return signal.events[0].kind if signal.events else ""


class AttemptResult(Struct):
    """One attempt's verdict: its fatal signal, merged facts and ranked diagnoses (internal)."""

    attempt: Attempt
    fatal: Signal | None
    facts: Facts
    diagnoses: list[Diagnosis]


def diagnose_attempt(
    attempt: Attempt,
    rules: list[Rule],
    texts: MutableMapping[int, tuple[str, str]],
    attempt_count: int,
    tail: TailLines | None = None,
) -> AttemptResult:
    fatal = attempt.fatal
    facts = merge(attempt, fatal)
    if fatal is None:
        return AttemptResult(attempt=attempt, fatal=None, facts=facts, diagnoses=[])
    base = {
        "failure": failure_view(fatal),
        "oom": find_oom(attempt, fatal),
        "facts": FactView(facts),
        "attempt": {
            "index": attempt.index,
            "count": attempt_count,
            "ready": attempt.ready is not None,
            "repeats": attempt.repeats,
        },
        "seen": sorted(attempt.kinds()),
        "event": None,
        "other_causes": [],
    }
    base["memory"] = build_view(facts, base["failure"], base["oom"], base["seen"])  # type: ignore[arg-type]
    fatal_lines = _fatal_lines(fatal)
    by_kind: dict[str, list[ev.Event]] = {}  # a rule bound to a kind reads its events, not the whole attempt's
    for e in attempt.events:
        by_kind.setdefault(e.kind, []).append(e)
    found: dict[str, list[tuple[float, Diagnosis]]] = {}
    fallbacks: list[tuple[float, Diagnosis]] = []
    attempt_budget = Budget(ATTEMPT_OPS)
    base["catalogue"] = None
    _run_rules(
        [r for r in rules if not r.fallback], by_kind, base, texts, fatal_lines, attempt_budget, found, fallbacks
    )
    if not found:  # only now is the catalogue asked (fallback rules read it): its load is not paid otherwise
        base["catalogue"] = catalogue_sign(attempt, fatal, texts, tail)
        _run_rules(
            [r for r in rules if r.fallback], by_kind, base, texts, fatal_lines, attempt_budget, found, fallbacks
        )
    for _, d in [*fallbacks, *(h for hits in found.values() for h in hits)]:
        d.attempt = attempt.index
    # Equal rank and confidence: the cause id decides, and among fallbacks the rule id, so the
    # order never hangs on which pack file loaded first (one pack per cause, sorted by name).
    ranked = sorted((_merge(hits) for hits in found.values()), key=lambda rd: (-rd[0], -rd[1].confidence, rd[1].id))
    if not ranked and fallbacks:
        ranked = sorted(fallbacks, key=lambda rd: (-rd[0], rd[1].rule))[:1]
    return AttemptResult(attempt=attempt, fatal=fatal, facts=facts, diagnoses=[d for _, d in ranked])


def _run_rules(
    rules: list[Rule],
    by_kind: Mapping[str, list[ev.Event]],
    base: dict[str, Any],
    texts: Mapping[int, tuple[str, str]],
    fatal_lines: set[int],
    attempt_budget: Budget,
    found: dict[str, list[tuple[float, Diagnosis]]],
    fallbacks: list[tuple[float, Diagnosis]],
) -> None:
    for rule in rules:
        budget = Budget(RULE_OPS, attempt_budget)
        try:
            hit = _apply(rule, by_kind, base, texts, fatal_lines, budget)
        except BudgetExceeded as exc:
            raise RuleBudgetError(_over_budget(rule, exc.budget is budget)) from None
        if hit is None:
            continue
        if rule.fallback:
            fallbacks.append(hit)
        else:
            found.setdefault(hit[1].id, []).append(hit)


def _merge(hits: list[tuple[float, Diagnosis]]) -> tuple[float, Diagnosis]:
    """Several rules for one cause: the highest-ranked leads; the others add what it lacks."""
    hits = sorted(hits, key=lambda rd: -rd[0])
    rank, lead = hits[0]
    for _, other in hits[1:]:
        lead.supporting_rules.append(other.rule)
        if other.explanation and other.explanation not in lead.explanation:
            lead.explanation = f"{lead.explanation} {other.explanation}".strip()
        seen = {(r.text, tuple(r.flags.items()), tuple(r.env.items())) for r in lead.remedies}
        flags_seen = {tuple(r.flags.items()) for r in lead.remedies if r.flags}
        for r in other.remedies:
            key = (r.text, tuple(r.flags.items()), tuple(r.env.items()))
            if key not in seen and (not r.flags or tuple(r.flags.items()) not in flags_seen):
                lead.remedies.append(r)
                seen.add(key)
        lines = {e.line for e in lead.evidence}
        lead.evidence = sorted(
            lead.evidence + [e for e in other.evidence if e.line not in lines], key=lambda e: e.line
        )[:MAX_EVIDENCE]
        lead.confidence = max(lead.confidence, other.confidence)
        for k, v in other.figures.items():
            lead.figures.setdefault(k, v)
    return rank, lead


def _fatal_lines(fatal: Signal) -> set[int]:
    lines = {fatal.line}
    if fatal.chain:
        lines |= {tb.exception.line for tb in fatal.chain.tracebacks if tb.exception}
    return lines


def _over_budget(rule: Rule, alone: bool) -> str:
    """One line that names the rule (and its pack and line) that ran out of operations."""
    if alone:
        return (
            f"rule {rule.id!r} ({rule.source}) exceeded its evaluation budget of {RULE_OPS:,} operations "
            "on one startup attempt: simplify its expressions, or bind it to a rarer event"
        )
    return (
        f"the rules together exceeded the evaluation budget of {ATTEMPT_OPS:,} operations on one startup "
        f"attempt, at rule {rule.id!r} ({rule.source}): a rule pack is too costly for this log"
    )


def _apply(
    rule: Rule,
    by_kind: Mapping[str, list[ev.Event]],
    base: dict[str, Any],
    texts: Mapping[int, tuple[str, str]],
    fatal_lines: set[int],
    budget: Budget | None = None,
) -> tuple[float, Diagnosis] | None:
    failure: FailureView = base["failure"]
    if rule.phases is not None and failure.phase not in rule.phases:
        return None
    bindings: list[ev.Event | None] = [None]
    if rule.event:
        bindings = list(by_kind.get(rule.event, ()))
    figures = _pack_figures(rule, base) if rule.pack_figures else None
    for event in bindings:
        ctx = dict(base, event=event)
        if figures:
            ctx.update(figures)
        trace = Trace(budget=budget)
        if budget is not None:
            budget.spend()
        if rule.phases is not None:
            trace.saw(failure.line)
            trace.saw(failure.phase_line)
        if event is not None:
            trace.saw(event.line)
        try:
            made = _evaluate(rule, ctx, trace)
        except ExpressionError:
            continue  # a rule that cannot read this log does not apply to it
        if made is None:
            continue
        rank, diagnosis = made
        if event is not None and event.line in fatal_lines:
            rank += FATAL_BONUS
        diagnosis.evidence = _evidence(trace, texts)
        return rank, diagnosis
    return None


def _pack_figures(rule: Rule, base: dict[str, Any]) -> dict[str, PackFigure]:
    """The figures of the rule's pack for this attempt, made once and shared by the pack's rules
    (each is evaluated on its first read). They read the attempt's names, not a rule's `event`."""
    made = base.setdefault("_pack_figures", {})
    pack = rule.source.rsplit(":", 1)[0]
    figures = made.get(pack)
    if figures is None:
        ctx = {k: v for k, v in base.items() if not k.startswith("_")}
        figures = made[pack] = {name: PackFigure(expr, ctx) for name, expr in rule.pack_figures.items()}
        ctx.update(figures)
    return figures


def _evaluate(rule: Rule, ctx: dict[str, Any], trace: Trace) -> tuple[float, Diagnosis] | None:
    if not all(_truthy(e.evaluate(ctx, trace)) for e in rule.all):
        return None
    if rule.any and not any(_truthy(e.evaluate(ctx, trace)) for e in rule.any):
        return None
    figures: dict[str, Any] = {}
    for name, expr in rule.figures.items():
        value = expr.evaluate(ctx, trace)
        ctx[name] = value
        if value is not None:
            figures[name] = value
    sentences = [s for alternatives in rule.explanation if (s := _first_sentence(alternatives, ctx, trace))]
    remedies = check_remedies(
        [r for spec in rule.remedies if (r := _remedy(spec, ctx, trace)) is not None], ctx.get("memory")
    )
    rank = _number(rule.rank.evaluate(ctx, trace), 0.0)
    confidence = max(0.0, min(1.0, _number(rule.confidence.evaluate(ctx, trace), 0.5)))
    diagnosis = Diagnosis(
        id=rule.cause,
        title=rule.title,
        confidence=round(confidence, 2),
        explanation=" ".join(sentences),
        remedies=remedies,
        rule=rule.id,
        figures={k: v for k, v in figures.items() if isinstance(v, (int, float, str, bool))},
    )
    return rank, diagnosis


def _first_sentence(alternatives, ctx: dict[str, Any], trace: Trace) -> str | None:
    """The first alternative whose condition holds and whose figures are all in the log."""
    for template, when in alternatives:
        if when is not None and not _truthy(when.evaluate(ctx, trace)):
            continue
        text = template.render(ctx, trace)
        if text:
            return text
    return None


def _remedy(spec, ctx: dict[str, Any], trace: Trace) -> Remedy | None:
    if spec.when is not None and not _truthy(spec.when.evaluate(ctx, trace)):
        return None
    text = spec.text.render(ctx, trace)
    flags = {k: t.render(ctx, trace) for k, t in spec.flags.items()}
    env = {k: t.render(ctx, trace) for k, t in spec.env.items()}
    if text is None or any(v is None for v in flags.values()) or any(v is None for v in env.values()):
        return None  # a remedy whose figure is not in the log is not offered
    return Remedy(text=text, flags=flags, env=env)  # type: ignore[arg-type]


def _evidence(trace: Trace, texts: Mapping[int, tuple[str, str]]) -> list[Evidence]:
    lines = sorted(n for n in trace.lines if n in texts)
    if len(lines) > MAX_EVIDENCE:
        lines = lines[: MAX_EVIDENCE // 2] + lines[-MAX_EVIDENCE // 2 :]
    return [Evidence(line=n, text=texts[n][1], origin=texts[n][0]) for n in lines]


def _truthy(v: Any) -> bool:
    return bool(v) if v is not None else False


def _number(v: Any, default: float) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else default


def exported_facts(facts: Facts) -> dict[str, Any]:
    """The facts a report shows: real figures from the log, not internal markers or defaults."""
    out: dict[str, Any] = {}
    for name in sorted(facts):
        fact = facts[name]
        if fact.line == 0 and name == "block_size":
            continue
        if isinstance(fact.value, EXPORTED_FACT_TYPES):
            out[name] = fact.value
    return out
