"""Small wording helpers shared by the human-readable renderers (no computation)."""

from __future__ import annotations

from triage.model.report import Diagnosis, Remedy, Report
from triage.units import gib

FACT_LABELS = (
    ("gpu_total_bytes", "GPU memory", gib),
    ("gpu_memory_utilization", "gpu_memory_utilization", str),
    ("budget_bytes", "vLLM budget", gib),
    ("startup_free_bytes", "free at startup", gib),
    ("weights_bytes", "weights", gib),
    ("activation_peak_bytes", "activation peak", gib),
    ("kv_cache_bytes", "KV cache", gib),
    ("kv_cache_tokens", "KV cache tokens", lambda v: f"{v:,}"),
    ("max_model_len", "max_model_len", lambda v: f"{v:,}"),
    ("foreign_bytes", "held by other processes", gib),
    ("tensor_parallel_size", "tensor_parallel_size", str),
    ("model", "model", str),
)


def headline(report: Report) -> str:
    version = report.vllm.version and f"vLLM {report.vllm.version}"
    engine = report.vllm.engine and report.vllm.engine.upper()
    who = " ".join(x for x in (version, f"({engine})" if engine and version else engine) if x)
    if report.outcome == "failed" and report.failure:
        where = f" during {report.failure.phase.replace('_', ' ')}" if report.failure.phase else ""
        state = (
            f"FAILED{where} (line {report.failure.line}{', ' + report.failure.origin if report.failure.origin else ''})"
        )
    elif report.outcome == "recovered":
        where = f" during {report.failure.phase.replace('_', ' ')}" if report.failure and report.failure.phase else ""
        at = f" (line {report.failure.line})" if report.failure else ""
        state = f"recovered: an earlier attempt failed{where}{at}; the relaunch reached ready"
    elif report.outcome == "healthy":
        state = "healthy: the server reached ready, nothing fatal found"
    elif report.failure:
        where = f" during {report.failure.phase.replace('_', ' ')}" if report.failure.phase else ""
        state = f"INCOMPLETE: the log ends inside a traceback{where} (line {report.failure.line})"
    else:
        state = "incomplete: the log stops before the server was ready or failed"
    return " · ".join(x for x in (report.input.name, who, state) if x)


def command_line(remedy: Remedy) -> str:
    """`--flag value --flag2` and `VAR=value` as a user would type them."""
    env = " ".join(f"{k}={v}" for k, v in remedy.env.items())
    flags = " ".join(f"{k} {v}".rstrip() for k, v in remedy.flags.items())
    return " ".join(x for x in (env, flags) if x)


def best_remedy(diagnosis: Diagnosis) -> Remedy | None:
    """The remedy a one-line answer may name ("Fix:", `-q`, Slack's text), or None.

    The first whose flags the memory model checked and found to fit; else, when no remedy
    was checked, the first whose command is complete (no `<placeholder>` left for the user
    to fill, which would be a guess for this GPU). A remedy checked as "cannot tell" is never
    offered as the fix: the full report lists it with its caveat.
    """
    commands = [r for r in diagnosis.remedies if command_line(r)]
    fitting = [r for r in commands if r.check is not None and r.check.verdict == "fits"]
    if fitting:
        return fitting[0]
    if any(r.check is not None for r in commands):
        return next((r for r in commands if r.check is None and not r.flags and _complete(r)), None)
    return next((r for r in commands if _complete(r)), None)


def _complete(remedy: Remedy) -> bool:
    return "<" not in command_line(remedy) and "..." not in command_line(remedy)


def facts_line(report: Report) -> list[tuple[str, str]]:
    out = []
    for key, label, fmt in FACT_LABELS:
        if key in report.facts and report.facts[key] is not None:
            try:
                out.append((label, fmt(report.facts[key])))
            except (TypeError, ValueError):
                continue
    return out


def one_line(report: Report) -> str:
    """`--quiet`: the log, its outcome, the top cause and its first command, on one line."""
    name = report.input.name
    if report.diagnoses:
        top = report.diagnoses[0]
        best = best_remedy(top)
        cmd = command_line(best) if best else ""
        more = f" (+{len(report.diagnoses) - 1} more)" if len(report.diagnoses) > 1 else ""
        line = report.failure.line if report.failure else None
        at = f" at line {line}" if line else ""
        state = (
            f"recovered (an earlier attempt failed{at})" if report.outcome == "recovered" else f"{report.outcome}{at}"
        )
        text = f"{name}: {state}: {top.id} ({top.confidence:.2f}){more}: {top.title}"
        return " ".join((text + (f"; try: {cmd}" if cmd else "")).split())
    if report.outcome == "failed":
        at = f" at line {report.failure.line}" if report.failure else ""
        return f"{name}: failed{at}: no known cause matched"
    return f"{name}: {report.outcome}"
