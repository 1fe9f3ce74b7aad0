"""What a configuration makes of the log's figures, before any check: bytes per token and block,
the memory outside the KV pool, the pool itself, under a changed TP, batch or KV dtype.

Split from model.py (the checks): the checks read a `Resolved`, made here once per configuration.
"""

from msgspec import Struct
from msgspec.structs import replace

from triage.memory import budget, kv
from triage.memory.inputs import (
    PROFILE,
    Config,
    MemoryInputs,
)
from triage.memory.quantities import ESTIMATED, GIVEN, Quantity

V0_MIN_BATCH = 2048  # V0 config: max_num_batched_tokens = max(max_model_len, 2048) without chunked prefill


_DTYPE_BYTES = {"float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2, "auto": 2}


def dtype_bytes(kv_dtype: str | None, model_dtype: str | None) -> float:
    """Bytes per KV element: fp8 variants 1; 'auto' follows the model dtype (2 unless float32)."""
    d = (kv_dtype or "auto").lower()
    if d.startswith("fp8") or d.startswith("int8"):
        return 1
    if d == "auto":
        return _DTYPE_BYTES.get((model_dtype or "auto").lower().replace("torch.", ""), 2)
    return _DTYPE_BYTES.get(d, 2)


class Resolved(Struct, frozen=True):
    """The figures of one configuration, derived from the failed start's."""

    util: float
    tp_ratio: float  # old TP / new TP: per-device share of weights and KV heads
    kv_ratio: float  # new KV bytes per element / old
    token_ratio: float  # new profile batch / old
    seq_ratio: float
    max_model_len: int | None
    block_bytes: Quantity | None
    non_kv: Quantity | None
    pool: Quantity | None


def block_bytes(inp: MemoryInputs) -> Quantity | None:
    """Bytes per KV block (all layers, one device) from what the failed start printed."""
    bs = inp.block_size
    if inp.pool is not None and inp.kv_tokens:
        return kv.block_bytes_from_pool(inp.pool, inp.kv_tokens, bs)
    if inp.kv_needed is not None and inp.max_model_len:
        return kv.block_bytes_from_needed(inp.kv_needed, inp.max_model_len, bs)
    return None


def non_kv(inp: MemoryInputs) -> Quantity | None:
    """weights + activation peak + non-torch: printed, summed, or budget - pool."""
    if inp.non_kv is not None:
        return inp.non_kv
    parts = (inp.weights, inp.activation_peak, inp.non_torch)
    if all(p is not None for p in parts):
        return parts[0] + parts[1] + parts[2]  # type: ignore[operator]
    if inp.pool is not None and inp.total is not None and inp.kv_cache_memory is None:
        # with the utilization not printed, vLLM's default (0.9 in every version) sized the pool
        return budget.requested(inp.total, inp.util.value) - inp.pool
    return None


def replace_offload(cfg: Config) -> Config:
    return cfg.changed(cpu_offload_gb=None)


def offloaded(inp: MemoryInputs, cfg: Config) -> MemoryInputs:
    """--cpu-offload-gb X keeps X GiB of each GPU's weights in CPU RAM: the same start, lighter weights."""
    if not cfg.cpu_offload_gb or inp.weights is None:
        return inp
    x = cfg.cpu_offload_gb * (1 << 30)
    w = inp.weights
    lighter = Quantity(max(w.value - x, 0), max(w.lo - x, 0), max(w.hi - x, 0), w.source, w.line)
    nk = inp.non_kv - Quantity.exact(x) if inp.non_kv is not None else None
    pool = inp.pool + Quantity.exact(x) if inp.pool is not None else None
    free = inp.oom_free + Quantity.exact(x) if inp.oom_free is not None and inp.failure == PROFILE else inp.oom_free
    return replace(
        inp, weights=lighter, non_kv=nk, pool=pool, kv_tokens=None, gpu_blocks=None, kv_estimate=None, oom_free=free
    )


def resolve(inp: MemoryInputs, cfg: Config) -> Resolved:
    util = cfg.gpu_memory_utilization if cfg.gpu_memory_utilization is not None else inp.util.value
    tp = cfg.tensor_parallel_size or inp.tp
    tp_ratio = inp.tp / tp
    kv_ratio = dtype_bytes(cfg.kv_cache_dtype, inp.dtype) / dtype_bytes(inp.kv_cache_dtype, inp.dtype)
    token_ratio = _ratio(cfg.max_num_batched_tokens, inp.max_num_batched_tokens)
    if (
        inp.batch_follows_len
        and cfg.max_num_batched_tokens in (None, inp.max_num_batched_tokens)
        and cfg.max_model_len
        and inp.max_model_len
    ):
        token_ratio = max(cfg.max_model_len, V0_MIN_BATCH) / max(inp.max_model_len, V0_MIN_BATCH)
    seq_ratio = _ratio(cfg.max_num_seqs, inp.max_num_seqs)
    length = cfg.max_model_len or inp.max_model_len
    bb = block_bytes(inp)
    if bb is not None and (kv_ratio != 1 or tp_ratio != 1):
        bb = bb.scale(kv_ratio * tp_ratio)
        if tp_ratio != 1:
            bb = bb.with_source(ESTIMATED)
    nk = _non_kv_under(inp, tp_ratio, token_ratio)
    pool = _pool_under(inp, cfg, util, nk, tp_ratio, token_ratio)
    if cfg.enforce_eager and inp.graph_estimate is not None and cfg.kv_cache_memory is None:
        # 0.21+: with no graphs to capture the estimate is not taken out of the budget
        nk = nk - inp.graph_estimate if nk is not None else None
        pool = pool + inp.graph_estimate if pool is not None else None
    return Resolved(util, tp_ratio, kv_ratio, token_ratio, seq_ratio, length, bb, nk, pool)


def _ratio(new: int | None, old: int | None) -> float:
    return new / old if new and old else 1.0


def _non_kv_under(inp: MemoryInputs, tp_ratio: float, token_ratio: float) -> Quantity | None:
    nk = non_kv(inp)
    if nk is None or (tp_ratio == 1 and token_ratio == 1):
        return nk
    if tp_ratio != 1:
        if inp.weights is None:
            return None
        nk = (nk - inp.weights + inp.weights.scale(tp_ratio)).with_source(ESTIMATED)
    if token_ratio < 1 and inp.activation_peak is not None:
        # the peak shrinks with the batch, at most proportionally: [scaled, unchanged]
        a = inp.activation_peak
        shrink = Quantity(a.value * (1 - token_ratio), 0, a.hi * (1 - token_ratio), ESTIMATED)
        nk = nk - shrink
    elif token_ratio > 1:
        if inp.activation_peak is None:
            return None
        nk = nk + inp.activation_peak.scale(token_ratio - 1).with_source(ESTIMATED)
    return nk


def _pool_under(
    inp: MemoryInputs, cfg: Config, util: float, nk: Quantity | None, tp_ratio: float, token_ratio: float
) -> Quantity | None:
    if cfg.kv_cache_memory is not None:  # pinned: the utilization does not size the pool
        if inp.kv_cache_memory is not None and cfg.kv_cache_memory == int(inp.kv_cache_memory.value):
            if tp_ratio != 1:
                return None
            return inp.pool if inp.pool is not None else inp.kv_cache_memory  # the same pool vLLM printed
        return Quantity.exact(cfg.kv_cache_memory, GIVEN)
    unchanged = util == inp.util.value and tp_ratio == 1 and token_ratio <= 1
    if unchanged and inp.pool is not None and inp.kv_cache_memory is None:
        return inp.pool  # a smaller profile batch only grows the pool: the printed one is the worst case
    lower_util_only = tp_ratio == 1 and token_ratio == 1 and util < inp.util.value
    if inp.total is None and inp.pool is not None and inp.kv_cache_memory is None and lower_util_only:
        # the pool can only shrink: bounded above, whatever the GPU's total
        floor = nk.lo if nk is not None else inp.weights.lo if inp.weights is not None else 0.0
        return budget.pool_at_lower_util(inp.pool, inp.util.value, util, floor, nk.hi if nk is not None else None)
    if inp.total is None or nk is None:
        return None
    if (
        tp_ratio == 1
        and token_ratio <= 1
        and inp.pool is not None
        and inp.non_kv is None
        and inp.kv_cache_memory is None
        and (inp.weights is None or inp.activation_peak is None or inp.non_torch is None)
    ):
        # pool = total x u - non_kv with the same total on both sides: pool + total x (u - U), not
        # total x u - (total x U - pool) with the total's interval counted twice
        d = util - inp.util.value
        step = inp.total.scale(abs(d))
        return inp.pool + step if d >= 0 else inp.pool - step
    return budget.pool(inp.total, util, nk)
