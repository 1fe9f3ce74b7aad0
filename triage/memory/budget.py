"""vLLM's GPU memory budget: the startup free-memory check and the KV pool it leaves.

V1 (v1/worker/gpu_worker.py, 0.10.1): at init_device, requested = total x utilization and
startup fails when free < requested. After the profile run, the KV pool is
requested - non_kv, where non_kv = weights + torch peak increase (activations) +
non-torch increase (NCCL, cuBLAS workspaces). vLLM fails with "No available memory for the
cache blocks" when the pool is <= 0. V0 (worker/worker.py, 0.6.x) has no startup check; its
pool is total x utilization - peak, where peak = the memory in use at the profile's peak.
CUDA graphs are captured after the KV cache is allocated, outside the budget, so their
memory must fit in total - requested (minus whatever others hold).
"""

from __future__ import annotations

import math

from triage.memory.quantities import DERIVED, GIVEN, Quantity

STEP = 0.01  # utilizations are offered in hundredths
FINE_STEP = 0.001  # and in thousandths below 0.10


def requested(total: Quantity, util: float) -> Quantity:
    """total x gpu_memory_utilization: what vLLM may use on each device."""
    return total.scale(util)


def pool(total: Quantity, util: float, non_kv: Quantity) -> Quantity:
    """The KV pool: requested - (weights + activation peak + non-torch)."""
    return requested(total, util) - non_kv


def outside_budget(total: Quantity, util: float, foreign: Quantity | None = None) -> Quantity:
    """Memory vLLM leaves outside its budget (graphs, warm-up and sampler passes run there)."""
    out = total - requested(total, util)
    return out - foreign if foreign is not None else out


def max_util_for_free(free: Quantity, total: Quantity, step: float = STEP) -> float:
    """The largest utilization (a multiple of step) that passes the startup check in the worst case.

    Below 0.10 it is given in thousandths: a hundredth of a large GPU is more than 10% of a
    small budget.
    """
    if free.lo / total.hi < 0.1:
        step = FINE_STEP
    u = math.floor(free.lo / total.hi / step + 1e-9) * step
    while u > 0 and total.hi * u > free.lo:  # float fuzz
        u -= step
    return round(max(u, 0.0), 4)


def min_util_for_pool(total: Quantity, non_kv: Quantity, pool_needed: Quantity, step: float = STEP) -> float:
    """The smallest utilization (a multiple of step) whose pool holds pool_needed in the worst case."""
    u = math.ceil((pool_needed.hi + non_kv.hi) / total.lo / step - 1e-9) * step
    while total.lo * u - non_kv.hi < pool_needed.hi:
        u += step
    return round(u, 4)


def min_util_to_grow(total: Quantity, util: float, pool: Quantity, pool_needed: Quantity, step: float = STEP) -> float:
    """The smallest utilization (a multiple of step) that grows a printed pool to pool_needed:
    pool + total x (u - util), worst case (the non-KV memory is the same at any utilization)."""
    short = pool_needed.hi - pool.lo
    if short <= 0:
        return util
    u = math.ceil((util + short / total.lo) / step - 1e-9) * step
    while total.lo * (u - util) < short:
        u += step
    return round(u, 4)


def util_leaving(total: Quantity, util: float, extra_outside: Quantity, step: float = STEP) -> float:
    """The largest utilization that leaves `extra_outside` more outside the budget than `util` does."""
    u = math.floor((util - extra_outside.hi / total.lo) / step + 1e-9) * step
    while u > 0 and total.lo * (util - u) < extra_outside.hi:
        u -= step
    return round(max(u, 0.0), 4)


def given(x: float) -> Quantity:
    return Quantity.exact(x, GIVEN)


def pool_at_lower_util(
    pool: Quantity, util: float, new_util: float, non_kv_lo: float, non_kv_hi: float | None
) -> Quantity:
    """The pool a lower utilization leaves when the GPU's total is not in the log.

    pool = total x U - non_kv, so under u < U it is pool x k - non_kv x (1 - k) with k = u / U
    (the total drops out): at most pool.hi x k - non_kv.lo x (1 - k), however large the GPU,
    since non_kv >= 0. Its lower end needs non_kv's upper end; without one it is unbounded
    (-inf), so a check that misses even at the upper end still fails and any other cannot tell.
    """
    k = new_util / util
    if not 0 < k < 1:
        raise ValueError("only a lower utilization is bounded without the GPU's total")
    hi = pool.hi * k - max(non_kv_lo, 0.0) * (1 - k)
    lo = pool.lo * k - non_kv_hi * (1 - k) if non_kv_hi is not None else -math.inf
    value = pool.value * k - max(non_kv_lo, 0.0) * (1 - k)
    return Quantity(value, lo, hi, DERIVED)
