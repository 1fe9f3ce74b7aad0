"""A launch's memory checks, asked of the one memory model (triage.memory); no arithmetic of its own.

The plan's figures become a `MemoryInputs` for a start that has not happened: the GPU's
total and (from nvidia-smi, or an idle GPU assumed) free memory, the weights per GPU, the
estimated activation peak and non-torch memory (as intervals: they are estimates), the KV
bytes per block, the flags. The model's own checks then answer: the startup free-memory
check, the weights while loading, the KV pool, one max_model_len request in the pool, and
CUDA graphs outside the budget. The first that fails is the reason.
"""

from __future__ import annotations

from msgspec import Struct
from msgspec.structs import replace

from triage.memory import (
    DEFAULT,
    DERIVED,
    ESTIMATED,
    FAILS,
    FITS,
    GIVEN,
    GRAPHS,
    LOAD,
    Check,
    Config,
    MemoryInputs,
    Quantity,
    evaluate,
    resolve,
)
from triage.memory import budget as mbudget
from triage.memory import kv as mkv
from triage.plan import estimates
from triage.plan import kv_layout as kv
from triage.plan.launch import Launch
from triage.vllm_flags import apply

# The order vLLM meets its checks in; the first failing one is the reason the launch fails.
ORDER = (
    "startup_free_memory",
    "gpu_count",
    "weights_load",
    "kv_pool_positive",
    "kv_fits_max_model_len",
    "outside_budget",
)
CAUSE = {
    "startup_free_memory": "gpu_memory_utilization_too_high",
    "gpu_count": "parallelism_mismatch",
    "weights_load": "weights_exceed_memory",
    "kv_pool_positive": "kv_cache_insufficient",
    "kv_fits_max_model_len": "kv_cache_insufficient",
    "outside_budget": "cuda_graph_capture_oom",
}


class Answer(Struct):
    inputs: MemoryInputs
    checks: list[Check]
    activation: estimates.Estimate
    non_torch: estimates.Estimate
    graphs: estimates.Estimate
    budget: Quantity
    pool: Quantity | None
    block_bytes: Quantity | None
    kv_tokens: int | None
    longest: int | None
    concurrency: float | None
    linear: bool  # the KV need grows exactly with the length (one kind of layer)
    assumptions: list[str]


def _spread(value: int, low: float, high: float) -> Quantity:
    """An estimate as an interval: the checks then fit only when the estimate's error cannot matter."""
    return Quantity(float(value), value * low, value * high, ESTIMATED)


def memory_inputs(launch: Launch) -> tuple[MemoryInputs, list[str], tuple]:
    """The launch as the memory model's inputs (per GPU), with the assumptions made on the way."""
    gpu, flags, notes = launch.gpu, launch.flags, []
    total = Quantity.exact(float(gpu.total_bytes), GIVEN if not gpu.source.startswith("card") else ESTIMATED)
    ctx = estimates.cuda_context()
    if gpu.free_bytes is not None:
        free = _spread(max(gpu.free_bytes - ctx.bytes, 0), 0.98, 1.0)
        notes.append(f"free at startup: nvidia-smi's free memory less the worker's CUDA context ({ctx.assumption})")
    else:
        free = _spread(max(gpu.total_bytes - ctx.bytes, 0), 0.99, 1.0)
        notes.append("free at startup: an idle GPU assumed (give --nvidia-smi to check against what is free)")
    w = launch.weights
    weights = (
        Quantity.exact(float(w.per_gpu_bytes), DERIVED)
        if not w.estimated and launch.world == 1
        else _spread(w.per_gpu_bytes, *w.spread)
    )
    peak = estimates.activation_peak_v0 if launch.v0 else estimates.activation_peak
    act = peak(
        launch.cfg, launch.max_num_batched_tokens, launch.max_num_seqs, flags.tp, 2 if launch.dtype != "float32" else 4
    )
    nt = estimates.non_torch(flags.tp, flags.pp, launch.version)
    needed = needed_at(launch, launch.max_model_len)
    util_source = GIVEN if flags.gpu_memory_utilization is not None else DEFAULT
    pinned = None
    if flags.kv_cache_memory:  # vLLM >= 0.11 pins the pool; the memory model reads the flag its own way
        pinned = Quantity.exact(
            float(apply(Config(), {"--kv-cache-memory": flags.kv_cache_memory}).kv_cache_memory),  # type: ignore[arg-type]
            GIVEN,
        )
        notes.append(f"--kv-cache-memory {flags.kv_cache_memory}: the KV pool is pinned (vLLM 0.11 and later)")
    inp = MemoryInputs(
        engine="v0" if launch.v0 else "v1",
        vllm_version=(launch.version or "0.7.3") if launch.v0 else "0.10.1",
        total=total,
        free=free,
        util=Quantity.exact(launch.util, util_source),
        weights=weights,
        activation_peak=_spread(act.bytes, 0.5, 1.6),
        non_torch=_spread(nt.bytes, *nt.spread),
        kv_needed=needed,
        block_size=launch.block_size,
        max_model_len=launch.max_model_len,
        max_num_seqs=launch.max_num_seqs,
        max_num_batched_tokens=launch.max_num_batched_tokens,
        tp=flags.tp,
        pp=flags.pp,
        gpu_count=gpu.count if gpu.source.startswith("nvidia-smi") else None,
        dtype=launch.dtype,
        kv_cache_dtype=flags.kv_cache_dtype or "auto",
        multimodal=launch.cfg.multimodal,
        kv_cache_memory=pinned,
    )
    return inp, notes, (act, nt)


def needed_at(launch: Launch, length: int) -> Quantity | None:
    """vLLM's KV need for one request of `length` (its max_memory_usage_bytes), exact from the layout."""
    need = kv.max_memory_usage(launch.layout, length, launch.block_size, launch.max_num_batched_tokens)
    return Quantity.exact(float(need), DERIVED) if need > 0 else None


def longest_fit(inp: MemoryInputs, launch: Launch, cap: int) -> int:
    """The longest max_model_len (whole blocks) whose KV need the memory model says fits, worst case.

    vLLM's own estimate_max_model_len is a binary search over the same need; the pool does not
    depend on the length, so the memory model's check is the oracle at each probe.
    """
    bs = launch.block_size

    def fits(blocks: int) -> bool:
        probe = replace(inp, kv_needed=needed_at(launch, blocks * bs), max_model_len=blocks * bs)
        return any(c.name == "kv_fits_max_model_len" and c.verdict == FITS for c in evaluate(probe))

    lo, hi = 0, max(1, cap // bs)
    if fits(hi):
        return hi * bs
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo * bs


def _graph_check(inp: MemoryInputs, graphs: estimates.Estimate, enforce_eager: bool) -> list[Check]:
    """CUDA graphs are captured after the KV cache: they must fit in what the budget leaves outside."""
    if enforce_eager or not graphs.bytes or inp.total is None or inp.free is None:
        return []
    foreign = inp.total - inp.free  # what others and the worker's context hold before the budget
    room = mbudget.outside_budget(inp.total, inp.util.value, foreign)
    probe = replace(inp, failure=GRAPHS, oom_requested=_spread(graphs.bytes, 0.5, 2.0), oom_free=room)
    return [c for c in evaluate(probe) if c.name == "outside_budget"]


def answer(launch: Launch) -> Answer:
    inp, notes, (act, nt) = memory_inputs(launch)
    graphs = estimates.cuda_graphs(launch.flags.enforce_eager, launch.weights.parameters / launch.world)
    checks = [c for c in evaluate(inp) if c.name in ORDER]
    checks += [c for c in evaluate(replace(inp, failure=LOAD)) if c.name == "weights_load"]
    checks += _graph_check(inp, graphs, launch.flags.enforce_eager)
    checks.sort(key=lambda c: ORDER.index(c.name))
    budget = mbudget.requested(inp.total, inp.util.value)  # type: ignore[arg-type]
    r = resolve(inp, inp.current())
    tokens = longest = concurrency = None
    if r.pool is not None and inp.kv_needed is not None:
        # vLLM's printed count: the pool over its per-token accounting (layer slots), whole blocks
        block = Quantity.exact(float(launch.layout.bytes_per_token * launch.block_size))
        tokens = mkv.pool_tokens(Quantity.exact(max(r.pool.value, 0)), block, launch.block_size)[0]
        cap = launch.derived_len or max(launch.max_model_len, 1 << 20)
        longest = longest_fit(inp, launch, cap) if r.pool.lo > 0 else 0
        concurrency = round(max(r.pool.value, 0) / inp.kv_needed.value, 2)
    return Answer(
        inp,
        checks,
        act,
        nt,
        graphs,
        budget,
        r.pool,
        r.block_bytes,
        tokens,
        longest,
        concurrency,
        kv.uniform(launch.layout),
        notes,
    )


def first_failure(checks: list[Check]) -> Check | None:
    return next((c for c in checks if c.verdict == FAILS), None)


def all_fit(checks: list[Check]) -> bool:
    return bool(checks) and all(c.verdict == FITS for c in checks)
