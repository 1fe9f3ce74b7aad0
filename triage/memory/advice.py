"""Version-aware advice: a memory failure on a release whose default moved the budget (defaults.py).

vLLM's profile run, kernel warm-up and the activation peak it takes out of the budget before
the KV cache all scale with max_num_batched_tokens. When the log's release raised `vllm serve`'s
default for its GPU, the log leaves the setting to the default (an argument dump without it,
or the printed value equal to the new default) and the start failed on memory, the old value is
the flag that restores the old budget. Whether it is enough is vLLM's arithmetic on the log's
figures: a failed allocation scales with the batch (checked by `solve.verify`); the KV pool
grows by at most the activation peak's share of the tokens dropped (the peak shrinks with the
batch, at most proportionally), so a shortfall larger than that is not closed by it.
"""

from __future__ import annotations

from msgspec import Struct
from msgspec.structs import replace

from triage.memory import defaults
from triage.memory.checks import FAILS
from triage.memory.inputs import KV_FIT, NO_POOL, MemoryInputs

SETTING = "max_num_batched_tokens"


class BatchAdvice(Struct, frozen=True):
    """The change, in words; whether the old value closes the shortfall (None: the log cannot tell)."""

    change: defaults.Change
    words: str
    helps: bool | None
    short: float | None = None  # bytes still missing at best, when it does not help
    frees: float | None = None  # at most this much activation memory back in the pool (bytes)


def batch_default(inp: MemoryInputs) -> BatchAdvice | None:
    """The raised default behind this memory failure, with what going back to the old one does."""
    if inp.engine != "v1" or inp.batch_given or inp.failure is None:
        return None
    kinds = gpu_kinds(inp)
    ch = defaults.change(SETTING, inp.vllm_version, kinds)
    if ch is None or ch.new <= ch.old:
        return None
    if inp.max_num_batched_tokens != ch.new and not (inp.batch_given is False and inp.max_num_batched_tokens is None):
        return None  # the log runs another value (set, or derived from other settings): not this default
    words = ch.describe(defaults.device_words(kinds))
    run = replace(inp, max_num_batched_tokens=ch.new)
    if inp.failure in (KV_FIT, NO_POOL):
        return _pool_advice(run, ch, words)
    from triage.memory.solve import verify

    v = verify(run, {"--max-num-batched-tokens": str(ch.old)})
    if v.ok:
        return BatchAdvice(ch, words, True)
    if v.target is not None and v.target.verdict == FAILS and v.target.margin is not None:
        return BatchAdvice(ch, words, False, short=-v.target.margin)
    return BatchAdvice(ch, words, None)


def gpu_kinds(inp: MemoryInputs) -> tuple[str, ...]:
    """The table's GPU kinds this log's GPU may be: by name, else by total memory (both ends of its rounding)."""
    if inp.total is None:
        return defaults.devices(inp.gpu_name, None)
    lo, hi = defaults.devices(inp.gpu_name, inp.total.lo), defaults.devices(inp.gpu_name, inp.total.hi)
    return lo if lo == hi else tuple(dict.fromkeys(lo + hi))


def _peak_at_most(inp: MemoryInputs) -> float | None:
    """The activation peak, or its upper bound where it is not printed: vLLM's pool is the budget less the
    weights, the peak, non-torch memory and (0.21+) the graphs' estimate, so the peak is at most
    budget - weights - pool - graphs."""
    if inp.activation_peak is not None:
        return inp.activation_peak.hi
    if inp.total is None or inp.weights is None or inp.pool is None:
        return None
    graphs = inp.graph_estimate.lo if inp.graph_estimate is not None else 0.0
    return max(inp.total.hi * inp.util.hi - inp.weights.lo - inp.pool.lo - graphs, 0.0)


def _pool_advice(inp: MemoryInputs, ch: defaults.Change, words: str) -> BatchAdvice:
    """KV pool failures: the pool grows by at most peak x (1 - old/new); vLLM re-profiles, so no fit is certain."""
    peak = _peak_at_most(inp)
    if peak is None or inp.pool is None:
        return BatchAdvice(ch, words, None)
    frees = peak * (1 - ch.old / ch.new)
    need = inp.kv_needed.lo if inp.failure == KV_FIT and inp.kv_needed is not None else None
    if inp.failure == NO_POOL:
        need = 0.0
    if need is None:
        return BatchAdvice(ch, words, None, frees=frees)
    best = inp.pool.hi + frees
    if best < need or (inp.failure == NO_POOL and best <= 0):
        return BatchAdvice(ch, words, False, short=need - best, frees=frees)
    return BatchAdvice(ch, words, None, frees=frees)
