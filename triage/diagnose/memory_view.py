"""The memory model as rule packs see it: `memory.<answer>` in expressions, and the check of every remedy.

`MemoryView` answers the solver questions by name (`memory.fit_len`, `memory.startup_util`,
...) and cites the log lines of the figures it used, as `facts.<name>` does. `check_remedies`
runs every remedy whose flags the model knows through `verify`: a remedy under which the
failing check still fails (or another check starts failing) is dropped; the others carry
what they were checked against and the worst-case margin.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from triage.model.report import Remedy, RemedyCheck
from triage.rule_engine.expr import FactView, Trace

if TYPE_CHECKING:
    from triage.memory import MemoryInputs

# The memory model is imported when a rule first asks it something or a remedy sets a flag it
# checks: a log that fails for another reason (a driver, a missing file) never loads it.


def _pair(fn: Callable[[MemoryInputs], Any], i: int) -> Callable[[MemoryInputs], Any]:
    def pick(inp: MemoryInputs) -> Any:
        got = fn(inp)
        return got[i] if got else None

    return pick


def _gib(fn: Callable[[MemoryInputs], Any]) -> Callable[[MemoryInputs], Any]:
    def value(inp: MemoryInputs) -> Any:
        q = fn(inp)
        return q.value if q is not None else None

    return value


@lru_cache(maxsize=1)
def answers() -> dict[str, Callable[[MemoryInputs], Any]]:
    """`memory.<name>` -> the solver function that answers it."""
    from triage.memory import solve

    return {
        "startup_util": solve.startup_util,
        "kv_util": solve.kv_util,
        "fit_len": solve.fit_len,
        "fp8_fits": solve.fp8_alone,
        "fp8_len": solve.fp8_len,
        "outside_util": solve.outside_util,
        "outside_util_cut": _pair(solve.outside_util_with_len, 0),
        "outside_len": _pair(solve.outside_util_with_len, 1),
        "batch_tokens": solve.batch_tokens,
        "profile_len": solve.profile_len,
        "eager_fits": solve.eager_fits,
        "kv_memory": solve.kv_memory,
        "offload_gb": solve.offload_gb,
        "warmup_seqs": solve.warmup_seqs,
        "load_tp": solve.load_tp,
        "budget_tp": solve.budget_tp,
        "pool_util": solve.pool_util,
        "swap_space": solve.swap_space,
        "weights_exceed": _gib(solve.weights_exceed),
        "profile_follows_len": lambda inp: inp.batch_follows_len,
        "advice_holds": solve.advice_holds,
        "mamba_seqs": solve.mamba_seqs,
        "mamba_util": solve.mamba_util,
        "graph_excess": _gib(_graph_excess),
        "batch_default": _advice("words"),
        "batch_default_old": _advice("old"),
        "batch_default_helps": _advice("helps"),
        "batch_default_short": _advice("short"),
        "batch_default_frees": _advice("frees"),
        "failure": lambda inp: inp.failure,
        "engine": lambda inp: inp.engine or "v1",
    }


def _advice(part: str) -> Callable[[MemoryInputs], Any]:
    """One part of the version-aware advice (memory/advice.py): a raised default behind the failure."""

    def pick(inp: MemoryInputs) -> Any:
        from triage.memory.advice import batch_default

        got = batch_default(inp)
        if got is None:
            return None
        return got.change.old if part == "old" else getattr(got, part)

    return pick


def _graph_excess(inp: MemoryInputs) -> Any:
    """What the graphs took beyond vLLM's estimate (0.21+), where both were printed and differ beyond rounding."""
    if inp.cuda_graph is None or inp.graph_estimate is None:
        return None
    d = inp.cuda_graph - inp.graph_estimate
    return d if d.lo > 0 or d.hi < 0 else None


class MemoryView(FactView):
    """`memory.<name>`: the model's answer for this log; reading one cites the figures' lines."""

    def __init__(self, build: Callable[[], MemoryInputs], facts: Mapping[str, Any]) -> None:
        super().__init__(facts)
        self._build = build
        self._inputs: MemoryInputs | None = None
        self._cache: dict[str, Any] = {}

    @property
    def inputs(self) -> MemoryInputs:
        """The model's inputs, read off the facts on first use."""
        if self._inputs is None:
            self._inputs = self._build()
        return self._inputs

    def get(self, name: str, trace: Trace) -> Any:
        table = answers()
        if name not in table:
            return None
        if name not in self._cache:
            try:
                self._cache[name] = table[name](self.inputs)
            except (ArithmeticError, ValueError, TypeError):  # absurd figures: no answer, like missing ones
                self._cache[name] = None
        if self._cache[name] is not None:
            for q in (self.inputs.free, self.inputs.pool, self.inputs.kv_needed, self.inputs.oom_requested):
                if q is not None:
                    trace.saw(q.line)
        return self._cache[name]


def build_view(facts: Mapping[str, Any], failure: Any, oom: Any, seen: list[str]) -> MemoryView:
    """The model's inputs for one attempt, from its facts, failure and OOM (built when first read)."""
    return MemoryView(lambda: _inputs(facts, failure, oom, seen), facts)


def _inputs(facts: Mapping[str, Any], failure: Any, oom: Any, seen: list[str]) -> MemoryInputs:
    from triage.memory import from_facts

    startup_error = (failure is not None and "startup_free_memory" in (failure.kinds or [])) or (
        "startup_free_memory" in seen
        and "startup_free_bytes" in facts
        and failure is not None
        and failure.phase in (None, "starting")
    )
    kind = from_facts.classify(
        getattr(failure, "phase", None),
        getattr(failure, "phase_frames", []),
        getattr(failure, "kinds", []),
        seen,
        startup_error=startup_error,
        oom=oom is not None,
    )
    return from_facts.build(facts, kind, oom)


def check_remedies(remedies: list[Remedy], view: MemoryView | None) -> list[Remedy]:
    """Every numeric remedy through the model: keep what fits (annotated), drop what fails."""
    if view is None:
        return remedies
    from triage.vllm_flags import numeric

    kept: list[Remedy] = []
    for r in remedies:
        if not r.flags or not numeric(r.flags):
            kept.append(r)
            continue
        from triage.memory import FAILS, FITS, solve

        try:
            v = solve.verify(view.inputs, r.flags)
        except (ArithmeticError, ValueError, TypeError):
            continue  # figures too absurd to check a flag against: not offered
        if v.target is None and not v.checks:
            kept.append(r)  # nothing the log gives bears on it
            continue
        if (v.target is not None and v.target.verdict == FAILS) or any(solve.against(c) for c in v.checks):
            continue
        if v.target is not None and v.target.verdict != FITS and not v.target.missing:
            continue  # at the edge: the rounding of the printed figures decides, so it is no remedy
        target = v.target or v.checks[0]
        margin = target.margin
        kept.append(
            r.model_copy(
                update={
                    "check": RemedyCheck(
                        against=target.name,
                        verdict="fits" if target.verdict == FITS else "cannot tell",
                        margin=round(margin, 2) if margin is not None else None,
                        unit=target.unit,
                        provenance=target.source,
                        text=_said(target),
                    )
                }
            )
        )
    return kept


def _said(check: Any) -> str:
    """'checked: KV pool holds one max_model_len 5,088 request: fits with 0.00 GiB to spare'."""
    return f"checked: {check.describe()}"
