"""A memory check in a plan's words: what it compares, and its margin or the range estimates leave open.

The memory model's own wording speaks of a failed log ("the printed figures"); a plan has
estimates instead, so its checks are worded here (presentation only, no arithmetic).
"""

from __future__ import annotations

from triage.memory import FAILS, FITS, Check
from triage.units import GiB

_LABELS = {
    "startup_free_memory": "startup check: free memory >= total x gpu_memory_utilization",
    "weights_load": "the weights fit the GPU while loading",
    "kv_pool_positive": "a KV pool is left after weights, activation peak and non-torch memory",
    "outside_budget": "CUDA graphs fit in the memory outside the budget",
}


def describe(c: Check) -> str:
    """A check in a plan's words: its margin, or the range the estimates leave open."""
    what = _LABELS.get(c.name, c.what)
    if c.missing:
        return f"{what}: cannot tell without {', '.join(c.missing)}"
    if c.need is None or c.have is None:
        return f"{what}: {c.verdict}" + (f" ({c.note})" if c.note else "")
    worst, best = c.have.lo - c.need.hi, c.have.hi - c.need.lo
    fmt = (lambda x: f"{x / GiB:.2f} GiB") if c.unit == "bytes" else (lambda x: f"{x:,.0f} {c.unit}")
    est = " (estimated)" if c.source in ("estimated", "default") else ""
    if c.verdict == FITS:
        return f"{what}: fits with {fmt(worst)} to spare{est}"
    if c.verdict == FAILS:
        return f"{what}: does not fit, short by {fmt(-best)} even at best{est}"
    return f"{what}: depends on the estimates, from {fmt(-worst)} short to {fmt(best)} to spare"
