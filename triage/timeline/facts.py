"""The figures of one attempt, merged across lines and processes, each with its source line.

Rules reason over these names, never over raw events: `gpu_total_bytes`,
`weights_bytes`, `kv_cache_bytes`, `max_model_len`, ... Which event gives which figure is
declared on its class (`Event.facts`, `Event.add_facts`). A figure printed by the process
that failed wins over the same figure printed by another; otherwise the first one seen.
The attribution of OOM memory to other processes lives here too, because it needs the
failing process's own figures to tell "another process" from "this process, seen by NVML
under its host PID".
"""

from __future__ import annotations

import math
import re
from typing import Any

from msgspec import Struct

from triage.model import events as ev
from triage.timeline.signals import Signal
from triage.timeline.timeline import Attempt


class Fact(Struct, frozen=True):
    value: Any
    line: int
    origin: str = ""


class Facts(dict):
    """name -> Fact. `put` keeps the first value unless the new one comes from the failing origin."""

    def __init__(self, failing_origin: str | None) -> None:
        super().__init__()
        self.failing_origin = failing_origin

    def put(self, name: str, value: Any, event: ev.Event | None, line: int | None = None) -> None:
        if value is None:
            return
        origin = event.origin if event is not None else ""
        at = line if line is not None else (event.line if event is not None else 0)
        old = self.get(name)
        if old is None or (origin == self.failing_origin and old.origin != origin):
            self[name] = Fact(value, at, origin)

    def set(self, name: str, value: Any, event: ev.Event) -> None:
        """Replace whatever is known (a count that only grows, the tightest of several GPUs)."""
        self[name] = Fact(value, event.line, event.origin)

    def value(self, name: str) -> Any:
        fact = self.get(name)
        return fact.value if fact else None


def merge(attempt: Attempt, fatal: Signal | None) -> Facts:
    facts = Facts(fatal.origin if fatal else None)
    for event in attempt.events:
        absorb(facts, event)
    oom = find_oom(attempt, fatal)
    if oom is not None:
        _absorb_oom(facts, oom, fatal)
    _derive(facts, attempt)
    return facts


def find_oom(attempt: Attempt, fatal: Signal | None) -> ev.TorchOom | None:
    """The OOM behind the failure: on the fatal line, in its chain, else the first of the attempt."""
    if fatal is not None:
        for e in fatal.events:
            if isinstance(e, ev.TorchOom):
                return e
        if fatal.chain is not None:
            for tb in fatal.chain.tracebacks:
                if tb.exception is not None:
                    for s in attempt.signals:
                        if s.line == tb.exception.line:
                            hit = s.first(ev.TorchOom)
                            if hit is not None:
                                return hit
    for s in attempt.signals:
        hit = s.first(ev.TorchOom)
        if hit is not None and not s.after_ready:
            return hit
    return None


def absorb(facts: Facts, event: ev.Event) -> None:
    """The figures one event gives: the fields its class names (`Event.facts`), then its hook."""
    for name, field in event.facts.items():
        facts.put(name, getattr(event, field), event)
    event.add_facts(facts)


def _absorb_oom(facts: Facts, oom: ev.TorchOom, fatal: Signal | None) -> None:
    facts.put("gpu_total_bytes", oom.total, oom)
    foreign = [p for label, p in attribute_processes(oom, fatal.pid if fatal else oom.pid) if label == "foreign"]
    if foreign:
        facts["foreign_bytes"] = Fact(sum(p.bytes for p in foreign), oom.line, oom.origin)
        facts["foreign_processes"] = Fact([{"pid": p.pid, "bytes": p.bytes} for p in foreign], oom.line, oom.origin)


def attribute_processes(oom: ev.TorchOom, failing_pid: int | None) -> list[tuple[str, ev.OomProcess]]:
    """Label each `Process P has X` clause "self" or "foreign".

    NVML lists the failing process as `Process <host pid>` when the container has its own
    PID namespace; then no `this process has` clause exists, and the clause whose figure
    covers what PyTorch holds in this process is this process, not another one.
    """
    labelled: list[tuple[str, ev.OomProcess]] = []
    torch_held = (oom.allocated or 0) + (oom.reserved_unallocated or 0)
    self_pid = None
    if oom.this_process is None and oom.processes and torch_held > 0:
        covering = [p for p in oom.processes if p.bytes >= torch_held * 0.95]
        if covering:
            self_pid = min(covering, key=lambda p: p.bytes - torch_held).pid
    for p in oom.processes:
        mine = p.pid == failing_pid or p.pid == self_pid
        labelled.append(("self" if mine else "foreign", p))
    return labelled


def _product(total: Any, util: Any) -> int | None:
    """total x utilization in bytes; none for figures no device has (`nan`, `inf`, `'x'`)."""
    try:
        value = float(total) * float(util)
    except (TypeError, ValueError, OverflowError):
        return None
    return int(value) if math.isfinite(value) else None


def _derive(facts: Facts, attempt: Attempt) -> None:
    """Figures computed from others, kept as facts so rules read one vocabulary."""
    total, util = facts.get("gpu_total_bytes"), facts.get("gpu_memory_utilization")
    if "budget_bytes" not in facts and total and util:
        budget = _product(total.value, util.value)
        if budget is not None:
            facts["budget_bytes"] = Fact(budget, util.line, util.origin)
    free = facts.get("startup_free_bytes")
    if free and total:
        facts["held_at_startup_bytes"] = Fact(max(0, total.value - free.value), free.line, free.origin)
    if "block_size" not in facts:
        facts["block_size"] = Fact(16, 0)  # vLLM's default on CUDA in every version
    if "foreign_bytes" not in facts and _saw_oom(attempt):
        facts["foreign_bytes"] = Fact(0, 0)
    _derive_weights_estimate(facts)
    _derive_gpu_processes(facts, attempt)


MAX_LISTED_PROCESSES = 16


def _derive_gpu_processes(facts: Facts, attempt: Attempt) -> None:
    """Processes nvidia-smi/fuser list that are not this vLLM's own (by the PIDs its lines carry)."""
    listed = [e for e in attempt.events if isinstance(e, ev.GpuProcess)]
    if not listed:
        return
    own = {e.pid for e in attempt.events if e.pid is not None and not isinstance(e, ev.GpuProcess)}
    others: dict[int, ev.GpuProcess] = {}
    for p in listed:
        if p.pid in own:
            continue
        if p.pid not in others or (p.bytes or 0) > (others[p.pid].bytes or 0):
            others[p.pid] = p
    if not others:
        return
    first = min(others.values(), key=lambda p: p.line)
    rows = [{"pid": p.pid, "name": p.name or "?", "bytes": p.bytes or 0} for p in others.values()]
    # Rows of a long table that were counted, not read (ingest/rows.py): each another process.
    counted = [e for e in attempt.events if isinstance(e, ev.GpuProcessesCounted)]
    held = sum(r["bytes"] for r in rows) + sum(c.bytes for c in counted)  # type: ignore[misc]
    listed = len(rows) + sum(c.count for c in counted)  # type: ignore[assignment]
    if listed > MAX_LISTED_PROCESSES:  # type: ignore[operator]  # a report lists the largest; the rest are counted
        facts["gpu_processes_unlisted"] = Fact(listed - MAX_LISTED_PROCESSES, first.line, first.origin)  # type: ignore[operator]
        rows = sorted(rows, key=lambda r: -r["bytes"])[:MAX_LISTED_PROCESSES]  # type: ignore[operator]
    facts["gpu_processes"] = Fact(rows, first.line, first.origin)
    if held:
        facts["listed_foreign_bytes"] = Fact(held, first.line, first.origin)


_PARAMS = re.compile(r"(?i)(?:^|[-_/.])(?:(\d+)x)?(\d+(?:\.\d+)?)b(?=$|[-_.])")
_FOUR_BIT = ("awq", "gptq", "bitsandbytes", "bnb", "int4", "w4a16", "4bit", "marlin", "gguf", "nf4")
_EIGHT_BIT = ("fp8", "int8", "w8a8", "w8a16", "8bit", "experts_int8")


def _derive_weights_estimate(facts: Facts) -> None:
    """Weights from the model name (e.g. `...-14B-...`) x bytes per parameter of its dtype.

    Only an estimate, for a failure during loading where vLLM never printed the size;
    the report says where it came from.
    """
    model = facts.get("model")
    if model is None or not isinstance(model.value, str):
        return
    name = model.value.rsplit("/", 1)[-1]
    m = _PARAMS.search(name)
    if not m:
        return
    params = float(m.group(2)) * (int(m.group(1)) if m.group(1) else 1)
    if not 0.01 <= params <= 5000:
        return
    hint = f"{name} {facts.value('quantization') or ''} {facts.value('dtype') or ''}".lower()
    per_param = 0.5 if any(k in hint for k in _FOUR_BIT) else 1.0 if any(k in hint for k in _EIGHT_BIT) else 2.0
    if "float32" in hint and per_param == 2.0:
        per_param = 4.0
    facts["model_params"] = Fact(params, model.line, model.origin)
    facts["bytes_per_param"] = Fact(per_param, model.line, model.origin)
    facts["weights_estimate_bytes"] = Fact(int(params * 1e9 * per_param), model.line, model.origin)


def _saw_oom(attempt: Attempt) -> bool:
    return any(s.first(ev.TorchOom) is not None for s in attempt.signals)
