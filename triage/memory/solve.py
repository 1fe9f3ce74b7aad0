"""The flag values that make the failing check pass, checked by the model before they are offered.

Each solver answers one limit in closed form (vLLM's arithmetic inverted, worst case), then
`verify` re-runs every check under the proposed flags: a value is returned only when the
failing check then fits and no other check fails. None means no value of that flag alone
does; `combine` tries the smallest pairs (fp8 KV and max_model_len; utilization and
max_model_len).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from msgspec import Struct

from triage.memory import budget, kv
from triage.memory.checks import FAILS, FITS, Check, overall
from triage.memory.inputs import (
    GRAPHS,
    KERNEL_WARMUP,
    KV_ALLOC,
    NO_POOL,
    OUTSIDE,
    SAMPLER_WARMUP,
    SERVING,
    Config,
    MemoryInputs,
)
from triage.memory.model import CONTEXT_OUTSIDE, capacity_tokens, estimate_bound, evaluate, reserve, resolve
from triage.memory.quantities import Quantity
from triage.vllm_flags import apply

MAX_UTIL = 0.98  # a budget above this leaves nothing for the driver and graphs
TOKEN_STEP = 256  # profile batches offered in multiples of this
FP8 = "fp8"

_TARGET = {GRAPHS: OUTSIDE, KERNEL_WARMUP: OUTSIDE, SAMPLER_WARMUP: OUTSIDE, SERVING: OUTSIDE, KV_ALLOC: OUTSIDE}


class Verification(Struct, frozen=True):
    """What the model says about one set of flags."""

    ok: bool
    target: Check | None  # the check that failed in the log, under the new flags
    checks: tuple[Check, ...]

    @property
    def verdict(self) -> str:
        return self.target.verdict if self.target else overall(list(self.checks))


def against(c: Check) -> bool:
    """A check that speaks against a configuration: it fails, or sits within the rounding."""
    return c.verdict == FAILS or (c.verdict != FITS and not c.missing and c.margin is not None)


def target_name(inp: MemoryInputs) -> str | None:
    return _TARGET.get(inp.failure or "", inp.failure)


def verify(inp: MemoryInputs, flags: Mapping[str, str], base: Config | None = None) -> Verification:
    """Do these flags make the failing check fit, with no other check failing?"""
    try:
        cfg = apply(base or inp.current(), flags)
    except ValueError:
        return Verification(False, None, ())
    checks = tuple(evaluate(inp, cfg))
    name = target_name(inp)
    target = next((c for c in checks if c.name == name), None)
    ok = target is not None and target.verdict == FITS and not any(against(c) for c in checks)
    return Verification(ok, target, checks)


def _ok(inp: MemoryInputs, flags: dict[str, str]) -> dict[str, str] | None:
    return flags if verify(inp, flags).ok else None


def num(u: float) -> str:
    return f"{u:.3f}".rstrip("0").rstrip(".") if u < 1 else "1.0"


def startup_util(inp: MemoryInputs) -> float | None:
    """The largest utilization the free memory passes, if the budget it leaves still works."""
    if inp.free is None or inp.total is None:
        return None
    u = budget.max_util_for_free(inp.free - reserve(inp), inp.total)
    return u if u > 0 and _ok(inp, {"--gpu-memory-utilization": num(u)}) else None


def kv_util(inp: MemoryInputs, cfg: Config | None = None) -> float | None:
    """The smallest utilization whose pool holds one max_model_len request."""
    cfg = cfg or inp.current()
    r = resolve(inp, cfg)
    if inp.total is None or r.non_kv is None or r.block_bytes is None or not r.max_model_len:
        return None
    need = kv.needed_bytes(r.max_model_len, r.block_bytes, inp.block_size)
    u = budget.min_util_for_pool(inp.total, r.non_kv, need)
    if inp.pool is not None and r.pool is inp.pool:  # the same total on both sides: grow the printed pool
        u = min(u, budget.min_util_to_grow(inp.total, inp.util.value, inp.pool, need))
    if u > MAX_UTIL:
        return None
    return u if verify(inp, {"--gpu-memory-utilization": num(u)}, cfg).ok else None


def fit_len(inp: MemoryInputs, cfg: Config | None = None) -> int | None:
    """The longest max_model_len the pool holds in the worst case (whole blocks)."""
    cfg = cfg or inp.current()
    r = resolve(inp, cfg)
    bs = inp.block_size
    cap = capacity_tokens(inp)
    if cap is not None and r.pool is inp.pool and r.tp_ratio == 1:
        n = int(cap // bs / r.kv_ratio) * bs
    elif r.pool is not None and r.block_bytes is not None:
        n = kv.longest_context(r.pool, r.block_bytes, bs)
    elif inp.gpu_blocks is not None and r.util == inp.util.value:
        n = int(inp.gpu_blocks / r.kv_ratio) * bs
    else:
        return None
    est = estimate_bound(inp, r)
    if est is not None:
        # vLLM's own search on the exact pool bounds it both ways at this dtype; with fewer bytes
        # per token the need per token only falls as the length grows (sliding-window and Mamba
        # layers stop growing), so est / kv_ratio is safe where a per-token figure is not
        n = est if r.kv_ratio == 1 else min(n, est)
    if r.max_model_len:
        n = min(n, r.max_model_len)
    if n < bs:
        return None
    return n if verify(inp, {"--max-model-len": str(n)}, cfg).ok else None


def fp8_alone(inp: MemoryInputs) -> bool:
    return (inp.kv_cache_dtype or "auto") == "auto" and verify(inp, {"--kv-cache-dtype": FP8}).ok


def fp8_len(inp: MemoryInputs) -> int | None:
    """With an fp8 KV cache, the longest max_model_len that fits (when fp8 alone does not)."""
    if (inp.kv_cache_dtype or "auto") != "auto":
        return None
    cfg = inp.current().changed(kv_cache_dtype=FP8)
    return fit_len(inp, cfg)


def outside_util(inp: MemoryInputs) -> float | None:
    """The largest utilization that leaves the failed allocation's shortfall outside the budget."""
    if inp.oom_requested is None or inp.oom_free is None or inp.total is None:
        return None
    short = _shortfall(inp)
    if short.hi <= 0:
        return None
    u = budget.util_leaving(inp.total, inp.util.value, short)
    if u <= 0:
        return None
    return u if _ok(inp, {"--gpu-memory-utilization": num(u)}) else None


def _shortfall(inp: MemoryInputs) -> Quantity:
    """What the budget must give up: the failed allocation's shortfall, or for the KV pool's own
    allocation, how far the budget (and the context outside it) exceeds what the process can hold."""
    if inp.failure == KV_ALLOC and inp.total is not None and inp.oom_free is not None:
        have = inp.oom_held + inp.oom_free if inp.oom_held is not None else inp.total - (inp.foreign or 0)
        return budget.requested(inp.total, inp.util.value) + CONTEXT_OUTSIDE - have
    return inp.oom_requested - inp.oom_free  # type: ignore[operator]


def outside_util_with_len(inp: MemoryInputs) -> tuple[float, int] | None:
    """When the smaller budget no longer holds max_model_len: the utilization and the length it holds."""
    if inp.oom_requested is None or inp.oom_free is None or inp.total is None:
        return None
    u = budget.util_leaving(inp.total, inp.util.value, _shortfall(inp))
    if u <= 0:
        return None
    n = fit_len(inp, inp.current().changed(gpu_memory_utilization=u))
    if n is None:
        return None
    return (u, n) if _ok(inp, {"--gpu-memory-utilization": num(u), "--max-model-len": str(n)}) else None


def batch_tokens(inp: MemoryInputs) -> int | None:
    """The largest max_num_batched_tokens whose (proportionally smaller) allocation fits what was free."""
    b0 = inp.max_num_batched_tokens
    if not b0 or inp.oom_requested is None or inp.oom_free is None or inp.oom_requested.hi <= 0:
        return None
    b = math.floor(b0 * max(inp.oom_free.lo, 0) / inp.oom_requested.hi / TOKEN_STEP) * TOKEN_STEP
    if b < TOKEN_STEP or b >= b0:
        return None
    return b if _ok(inp, {"--max-num-batched-tokens": str(b)}) else None


def kv_memory(inp: MemoryInputs) -> int | None:
    """With the pool pinned (--kv-cache-memory-bytes), the bytes that hold one max_model_len
    request in the worst case, rounded up to a MiB."""
    if inp.kv_cache_memory is None or not inp.max_model_len:
        return None
    r = resolve(inp, inp.current())
    if r.block_bytes is None:
        return None
    need = kv.needed_bytes(inp.max_model_len, r.block_bytes, inp.block_size)
    n = math.ceil(need.hi / (1 << 20)) * (1 << 20)
    return n if _ok(inp, {"--kv-cache-memory-bytes": str(n)}) else None


def offload_gb(inp: MemoryInputs) -> int | None:
    """The fewest whole GiB of weights per GPU to keep in CPU RAM so no check is against the start."""
    if inp.weights is None or inp.total is None:
        return None
    for x in range(1, int(inp.weights.hi / (1 << 30)) + 1):
        if verify(inp, {"--cpu-offload-gb": str(x)}).ok:
            return x
    return None


def eager_fits(inp: MemoryInputs) -> bool:
    """Does --enforce-eager alone make room: the graph memory the log printed (after capture), or
    the estimate 0.21+ took out of the budget before the KV cache?"""
    if inp.failure == GRAPHS:
        return False  # the capture rule offers it on its own terms
    if inp.cuda_graph is None and inp.graph_estimate is None:
        return False
    return verify(inp, {"--enforce-eager": ""}).ok


def advice_holds(inp: MemoryInputs) -> bool | None:
    """vLLM's suggested utilization (keep the KV pool it had before 0.21) under the failing check:
    True/False, None where it printed none or the check cannot tell."""
    if inp.graph_advice is None:
        return None
    v = verify(inp, {"--gpu-memory-utilization": num(inp.graph_advice)})
    if v.ok:
        return True
    return False if v.target is not None and v.target.verdict == FAILS else None


def mamba_seqs(inp: MemoryInputs) -> int | None:
    """Hybrid models: as many sequences as the pool has state blocks (vLLM's own bound)."""
    if not inp.mamba_blocks or (inp.max_num_seqs and inp.mamba_blocks >= inp.max_num_seqs):
        return None
    return _ok_int(inp, "--max-num-seqs", inp.mamba_blocks)


def mamba_util(inp: MemoryInputs) -> float | None:
    """Hybrid models: the least utilization whose pool holds max_num_seqs state blocks (worst case)."""
    if not inp.mamba_blocks or not inp.max_num_seqs or inp.pool is None or inp.total is None:
        return None
    nk = resolve(inp, inp.current()).non_kv
    if nk is None:
        return None
    need = Quantity.exact(inp.max_num_seqs * inp.pool.hi / inp.mamba_blocks)
    u = budget.min_util_for_pool(inp.total, nk, need)
    while u <= MAX_UTIL and not verify(inp, {"--gpu-memory-utilization": num(u)}).ok:
        u = round(u + budget.STEP, 4)
    return u if u <= MAX_UTIL else None


def _ok_int(inp: MemoryInputs, flag: str, n: int) -> int | None:
    return n if n >= 1 and _ok(inp, {flag: str(n)}) else None


def profile_len(inp: MemoryInputs) -> int | None:
    """V0 without chunked prefill profiles max(max_model_len, 2048) tokens: the longest context
    whose (proportionally smaller) profile allocation fits what was free."""
    if not inp.batch_follows_len or not inp.max_model_len or inp.oom_requested is None or inp.oom_free is None:
        return None
    n = math.floor(inp.max_model_len * max(inp.oom_free.lo, 0) / inp.oom_requested.hi / TOKEN_STEP) * TOKEN_STEP
    if n < 2048 or n >= inp.max_model_len:
        return None
    return n if _ok(inp, {"--max-model-len": str(n)}) else None


def warmup_seqs(inp: MemoryInputs) -> int | None:
    """The largest max_num_seqs whose sampler warm-up allocation fits what was free."""
    s0 = inp.max_num_seqs
    if not s0 or inp.oom_requested is None or inp.oom_free is None or inp.oom_requested.hi <= 0:
        return None
    s = math.floor(s0 * max(inp.oom_free.lo, 0) / inp.oom_requested.hi)
    if s < 1 or s >= s0:
        return None
    return s if _ok(inp, {"--max-num-seqs": str(s)}) else None


def load_tp(inp: MemoryInputs) -> int | None:
    """The smallest TP (a power-of-two multiple of the current) whose weight shard fits while loading."""
    for k in (2, 4, 8):
        tp = inp.tp * k
        if inp.gpu_count is not None and tp * inp.pp > inp.gpu_count:
            return None
        if _ok(inp, {"--tensor-parallel-size": str(tp)}):
            return tp
    return None


def swap_space(inp: MemoryInputs) -> int | None:
    """The largest whole --swap-space (GiB per GPU) within vLLM's 70% of host RAM."""
    if inp.swap_total is None or inp.cpu_total is None:
        return None
    per_gpu = math.floor(inp.cpu_total.lo * 0.7 / inp.tp / (1 << 30))
    current = inp.swap_total.value / inp.tp / (1 << 30)
    if per_gpu < 0 or per_gpu >= current:
        return None
    return per_gpu if _ok(inp, {"--swap-space": str(per_gpu)}) else None


def weights_exceed(inp: MemoryInputs) -> Quantity | None:
    """The weights when no utilization can hold them in what is free (the 'no flag fits' case)."""
    if inp.weights is None or inp.total is None:
        return None
    room = inp.free if inp.free is not None else inp.total
    return inp.weights if inp.weights.lo > room.hi * MAX_UTIL else None


def pool_util(inp: MemoryInputs, min_pool: float = 1 << 30) -> float | None:
    """The smallest utilization leaving a KV pool of min_pool (1 GiB) after the non-KV memory."""
    if inp.total is None:
        return None
    nk = resolve(inp, inp.current()).non_kv
    if nk is None:
        return None
    u = budget.min_util_for_pool(inp.total, nk, Quantity.exact(min_pool))
    if u > MAX_UTIL:
        return None
    v = verify(inp, {"--gpu-memory-utilization": num(u)})
    return u if not any(c.verdict == FAILS for c in v.checks) else None


def budget_tp(inp: MemoryInputs) -> int | None:
    """The smallest TP (x2, x4, x8) whose weight shard leaves room in the budget, no check against it."""
    for k in (2, 4, 8):
        tp = inp.tp * k
        if inp.gpu_count is not None and tp * inp.pp > inp.gpu_count:
            return None
        checks = evaluate(inp, inp.current().changed(tensor_parallel_size=tp))
        pool = next((c for c in checks if c.name == NO_POOL), None)
        if pool is not None and (pool.verdict == FITS or pool.missing) and not any(against(c) for c in checks):
            return tp
    return None
