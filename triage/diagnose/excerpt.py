"""Whether the report was made from an excerpt, and which figures that excerpt lacks.

A user often pastes one line, a few lines or the end of a traceback. The diagnosis then rests
on what was pasted, and the report must say so: which figures the whole startup log would
have given (the version, the GPU's memory, the budget, the phase), so the reader knows what
the remedies could not use. An excerpt shows itself by what it lacks: vLLM prints its engine
configuration (or its version banner) at every start, so a failed log without one starts
after the start.
"""

from __future__ import annotations

from triage.timeline.facts import Facts
from triage.timeline.timeline import Timeline

# The causes whose remedies are computed from the memory figures.
MEMORY_CAUSES = frozenset(
    {
        "gpu_out_of_memory",
        "weights_exceed_memory",
        "kv_cache_insufficient",
        "cuda_graph_capture_oom",
        "warmup_oom",
        "memory_fragmentation",
        "foreign_gpu_processes",
        "gpu_memory_utilization_too_high",
    }
)
# (fact, words) in the order a note names them.
MEMORY_FIGURES = (
    ("gpu_total_bytes", "the GPU's total memory"),
    ("gpu_memory_utilization", "gpu_memory_utilization"),
    ("weights_bytes", "the weights' size"),
    ("max_model_len", "max_model_len"),
)


def is_excerpt(timeline: Timeline) -> bool:
    """No attempt printed vLLM's engine configuration or version: the log starts after the start."""
    return not any("engine_config" in a.kinds() for a in timeline.attempts)


def excerpt_note(timeline: Timeline, facts: Facts, phase: str | None, causes: list[str]) -> str | None:
    """The note an excerpt's report carries (None for a whole log, or when nothing failed)."""
    if not causes or not is_excerpt(timeline):
        return None
    lacking = [] if facts.value("vllm_version") else ["the vLLM version"]
    if causes[0] in MEMORY_CAUSES:
        lacking += [words for name, words in MEMORY_FIGURES if facts.value(name) is None]
        if phase is None:
            lacking.append("the phase it failed in")
    said = "read as an excerpt (no engine configuration or version line: the log starts after vLLM's start)"
    if not lacking:
        return said
    return (
        f"{said}; it lacks {_join(lacking)}: the diagnosis and remedies use only the figures given "
        "(the whole startup log gives the rest)"
    )


def _join(words: list[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"
