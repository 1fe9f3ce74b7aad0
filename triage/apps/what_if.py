"""`vllm-triage what-if LOG [flags]`: would this start pass vLLM's memory checks with these flags?

It reads the failed log's figures (the same facts the report uses), applies the flags to the
memory model (triage.memory: the one copy of the arithmetic) and answers per check: fits /
fails / cannot tell, with the figures and the worst-case margin. Exit 0 when every check
fits, 1 when one fails, 2 when the log gives too little to tell (or on a usage error).
"""

from __future__ import annotations

import argparse
import json
import math
from typing import IO, Any

from triage.apps.exit_codes import ArgParser
from triage.errors import UsageError
from triage.memory import FAILS, FITS, Check, MemoryInputs, evaluate, overall
from triage.memory.checks import fmt
from triage.vllm_flags import apply

EXIT_FITS, EXIT_FAILS, EXIT_CANNOT_TELL = 0, 1, 2

_FLAGS = (
    ("--gpu-memory-utilization", float),
    ("--max-model-len", int),
    ("--max-num-seqs", int),
    ("--max-num-batched-tokens", int),
    ("--kv-cache-dtype", str),
    ("--tensor-parallel-size", int),
    ("--kv-cache-memory", str),
    ("--swap-space", float),
)


def _parser() -> argparse.ArgumentParser:
    p = ArgParser(
        prog="vllm-triage what-if",
        description="Apply flags to a failed log's memory figures and run vLLM's memory checks.",
    )
    p.add_argument("log", metavar="LOG", help="the failed start's log ('-' for stdin)")
    for flag, kind in _FLAGS:
        p.add_argument(flag, type=kind, default=None)
    p.add_argument("--enforce-eager", action="store_true")
    p.add_argument("--format", choices=("terminal", "json"), default="terminal")
    return p


def inputs_for(path: str, divisible: list | None = None) -> MemoryInputs:
    """The memory model's inputs for the last startup attempt in the log; the log's
    "must be divisible by tensor parallel size" events are added to `divisible`."""
    from triage.diagnose.match import failure_view
    from triage.diagnose.memory_view import build_view
    from triage.model import events as ev
    from triage.pipeline import Options, run_path
    from triage.timeline.facts import find_oom, merge

    seen: dict[str, Any] = {}

    def keep(timeline, line, events) -> None:
        seen["timeline"] = timeline
        if divisible is not None:
            divisible.extend(e for e in events if isinstance(e, ev.NotDivisible) and e.parallel == "tensor")

    run_path(path, Options(on_event=keep))
    timeline = seen.get("timeline")
    if timeline is None or not timeline.attempts:
        return MemoryInputs()
    attempt = timeline.attempts[-1]
    fatal = attempt.fatal
    facts = merge(attempt, fatal)
    return build_view(facts, failure_view(fatal), find_oom(attempt, fatal), sorted(attempt.kinds())).inputs


def what_if_command(argv: list[str], stdin, stdout: IO[str], stderr: IO[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    flags = {
        flag: str(getattr(args, flag[2:].replace("-", "_")))
        for flag, _ in _FLAGS
        if getattr(args, flag[2:].replace("-", "_")) is not None
    }
    if args.enforce_eager:
        flags["--enforce-eager"] = ""
    divisible: list = []
    inputs = inputs_for(args.log, divisible)
    try:
        config = apply(inputs.current(), flags)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    try:
        checks = evaluate(inputs, config)
    except (ArithmeticError, ValueError):
        raise UsageError("the log's memory figures are out of any device's range; nothing to check") from None
    checks = [*_divisibility(divisible, args.tensor_parallel_size), *checks]
    verdict = overall(checks) if checks else "cannot tell"
    from triage.render.sanitise import clean, clean_data  # the log's figures and names are input

    if args.format == "json":
        stdout.write(json.dumps(clean_data(_json(args.log, inputs, flags, checks, verdict)), indent=2) + "\n")
    else:
        stdout.write(clean(_terminal(args.log, inputs, flags, checks, verdict)))
    return EXIT_FITS if verdict == FITS else EXIT_FAILS if verdict == FAILS else EXIT_CANNOT_TELL


def _divisibility(events: list, tp: int | None) -> list[Check]:
    """vLLM's own check before any memory one: the units (attention heads) the log says it splits
    must divide by the tensor-parallel size; a TP that does not divide them cannot start."""
    if not events:
        return []
    event = events[-1]
    size = tp if tp is not None else event.size
    what = f"{event.total} {event.what} split over --tensor-parallel-size {size}"
    if size < 1:
        raise UsageError("--tensor-parallel-size must be at least 1")
    verdict = FITS if event.total % size == 0 else FAILS
    note = f"{event.total} is not a multiple of {size}" if verdict == FAILS else f"{event.total // size} each"
    return [Check("tensor_parallel_divides", verdict, what, unit="units", note=note, lines=(event.line,))]


def _figure(q, unit: str) -> dict[str, Any] | None:
    if q is None:
        return None
    return {"value": q.value, "lo": _finite(q.lo), "hi": _finite(q.hi), "unit": unit, "provenance": q.source}


def _finite(x: float | None) -> float | None:
    """JSON has no infinity: a side the log's figures leave unbounded is null."""
    return x if x is not None and math.isfinite(x) else None


def _json(log: str, inputs: MemoryInputs, flags: dict[str, str], checks: list[Check], verdict: str) -> dict:
    return {
        "log": log,
        "changes": flags,
        "engine": inputs.engine,
        "vllm_version": inputs.vllm_version,
        "failed_check": inputs.failure,
        "verdict": verdict,
        "checks": [
            {
                "name": c.name,
                "what": c.what,
                "verdict": c.verdict,
                "margin": _finite(c.margin),
                "unit": c.unit,
                "provenance": c.source,
                "note": c.note,
                "missing": list(c.missing),
                "need": _figure(c.need, c.unit),
                "have": _figure(c.have, c.unit),
                "text": c.describe(),
            }
            for c in checks
        ],
    }


def _terminal(log: str, inputs: MemoryInputs, flags: dict[str, str], checks: list[Check], verdict: str) -> str:
    changes = " ".join(f"{k} {v}".strip() for k, v in flags.items()) or "(no changes)"
    engine = (inputs.engine or "v1?").upper()
    out = [
        f"what-if {log}: {changes}",
        f"vLLM {inputs.vllm_version or '?'} ({engine}); the failed check: {inputs.failure or 'none found'}",
    ]
    for c in checks:
        figures = ""
        if c.need is not None and c.have is not None and c.verdict == FAILS:  # even the best case misses
            figures = f"  [need at least {fmt(c.need.lo, c.unit)}, have at most {fmt(c.have.hi, c.unit)}]"
        elif c.need is not None and c.have is not None and math.isfinite(c.have.lo):
            figures = f"  [need {fmt(c.need.hi, c.unit)}, have {fmt(c.have.lo, c.unit)} worst case]"
        out.append(f"  {c.verdict:11s} {c.name:24s} {c.describe()}{figures}")
    if not checks:
        out.append("  cannot tell: the log gives none of the figures the memory checks need")
    out.append(f"verdict: {verdict}")
    return "\n".join(out) + "\n"
