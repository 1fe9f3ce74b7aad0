"""GitHub Actions workflow commands: a few aggregated annotations, never one per line of evidence.

A failed report gives one `::error` (the top cause, with its remedy flags) and at most one
`::warning` naming the other causes; a healthy report one `::notice`; an incomplete log one
`::warning`. GitHub shows at most 10 annotations of each kind per step and drops the rest, so
several logs (`render_many`) give at most 10 in all: one per failing log up to 9 (the other
causes folded into it), then one that counts the rest. The Markdown job summary
(GITHUB_STEP_SUMMARY) is written by the CLI: a renderer only returns text.
"""

from __future__ import annotations

from triage.model.report import Diagnosis, Report
from triage.render.common import best_remedy, command_line, headline

MESSAGE_CHARS = 1500  # an annotation is a glance; the job summary holds the full report
NO_FILE_NAMES = ("<stdin>", "-", "")
MAX_ANNOTATIONS = 10


def escape_data(text: str) -> str:
    """A message, per GitHub's rules (actions/toolkit `escapeData`)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A property value (title, file): `:` and `,` would end it early (toolkit `escapeProperty`)."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def command(kind: str, message: str, **properties: object) -> str:
    """`::kind k=v,k=v::message`, properties in the given order, empty ones left out."""
    props = ",".join(f"{k}={escape_property(str(v))}" for k, v in properties.items() if v not in (None, ""))
    return f"::{kind}{' ' + props if props else ''}::{escape_data(message)}\n"


def render(report: Report, **_: object) -> str:
    if report.outcome == "recovered":  # the server came up: a warning, not an error
        causes = "; ".join(f"{d.id}: {d.title}" for d in report.diagnoses)
        return command(
            "warning",
            f"{headline(report)}. The failed attempt: {causes}",
            **_location(report),
            title="vllm-triage: recovered",
        )
    if report.diagnoses:
        return _diagnosed(report)
    if report.outcome == "failed":
        return _undiagnosed(report)
    kind = "notice" if report.outcome == "healthy" else "warning"
    return command(kind, headline(report), title=f"vllm-triage: {report.outcome}")


def render_many(reports: list[Report]) -> str:
    """Several logs in at most MAX_ANNOTATIONS annotations: all of them if they fit, else one per log."""
    full = [render(r) for r in reports]
    if sum(chunk.count("\n") for chunk in full) <= MAX_ANNOTATIONS:
        return "".join(full)
    failing = [r for r in reports if r.diagnoses or r.outcome == "failed"]
    shown = failing if len(failing) <= MAX_ANNOTATIONS - 1 else failing[: MAX_ANNOTATIONS - 1]
    out = "".join(_diagnosed(r, fold_others=True) if r.diagnoses else _undiagnosed(r) for r in shown)
    rest = [r for r in reports if r not in shown]
    if len(shown) == len(reports) - 1 == len(failing):
        return out + render(rest[0])  # the one passing log fits in the tenth annotation
    return out + (_rest(rest) if rest else "")


def _rest(reports: list[Report]) -> str:
    """One annotation that counts the logs not annotated on their own, by outcome and top cause."""
    from collections import Counter

    failed = [r for r in reports if r.diagnoses or r.outcome == "failed"]
    causes = Counter(r.diagnoses[0].id if r.diagnoses else "no known cause" for r in failed)
    outcomes = Counter("failed" if r in failed else r.outcome for r in reports)
    counted = ", ".join(f"{n} {o}" for o, n in sorted(outcomes.items()))
    listed = "; ".join(f"{c} x{n}" for c, n in causes.most_common())
    names = ", ".join(r.input.name for r in failed[:20]) + (f" and {len(failed) - 20} more" if len(failed) > 20 else "")
    message = f"{len(reports)} more logs: {counted}" + (f". Causes: {listed}. Failed: {names}" if failed else "")
    kind = "error" if failed else "notice"
    return command(
        kind,
        _clip(message + ". The job summary has every report."),
        title=f"vllm-triage: {len(reports)} more logs (annotations are capped at {MAX_ANNOTATIONS})",
    )


def _location(report: Report) -> dict[str, object]:
    file = report.input.name if report.input.name not in NO_FILE_NAMES else None
    line = report.failure.line if report.failure and file else None
    return {"file": file, "line": line}


def _diagnosed(report: Report, fold_others: bool = False) -> str:
    top, others = report.diagnoses[0], report.diagnoses[1:]
    summary = _summary(report, top)
    if others and fold_others:
        summary = _clip(summary + " Also possible: " + ", ".join(d.id for d in others) + ".")
    out = command("error", summary, **_location(report), title=top.title)
    if others and not fold_others:
        listed = "; ".join(f"{d.id}: {d.title} (confidence {d.confidence:.2f})" for d in others)
        noun = "cause" if len(others) == 1 else "causes"
        out += command(
            "warning",
            f"{report.input.name}: also possible: {listed}",
            title=f"vllm-triage: {len(others)} other possible {noun}",
        )
    return out


def _undiagnosed(report: Report) -> str:
    failure = report.failure
    phase = f" during {failure.phase.replace('_', ' ')}" if failure and failure.phase else ""
    message = _clip(f"{headline(report)}. No known cause matched: {failure.message}" if failure else headline(report))
    return command("error", message, **_location(report), title=f"vLLM failed to start{phase} (unknown cause)")


def _summary(report: Report, diagnosis: Diagnosis) -> str:
    """One line: where it failed, why, then the top remedy's flags and the alternatives' flags.

    Only the explanation is shortened to fit, so the flags always survive."""
    head = _clip(f"{headline(report)}. [{diagnosis.id}, confidence {diagnosis.confidence:.2f}]", MESSAGE_CHARS // 4)
    best = best_remedy(diagnosis)
    others = [command_line(r) for r in diagnosis.remedies if command_line(r) and r is not best]
    fixes = []
    if best is not None:
        fixes.append(f"Fix: {command_line(best)}" + (f" — {best.text}." if best.text else "."))
    if others:
        fixes.append(("Alternatives: " if best is not None else "Options: ") + "; ".join(others))
    tail = _clip(" ".join(fixes), MESSAGE_CHARS // 2)
    budget = MESSAGE_CHARS - len(head) - len(tail) - 2
    why = _clip(diagnosis.explanation, budget) if diagnosis.explanation and budget > 20 else ""
    return " ".join(x for x in (head, why, tail) if x)


def _clip(text: str, n: int = MESSAGE_CHARS) -> str:
    text = " ".join(text.split())  # an annotation reads as one line
    return text if len(text) <= n else text[: n - 1] + "…"
