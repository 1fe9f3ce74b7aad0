"""The KV cache in tokens: bytes per token, whole blocks, and the longest context that fits.

vLLM (v1/core/kv_cache_utils.py) sizes the pool in whole blocks of `block_size` tokens:
blocks = pool // bytes_per_block (all layers), tokens = blocks x block_size; one request of
max_model_len needs cdiv(max_model_len, block_size) x bytes_per_block; its estimate of the
longest context is the largest length whose blocks fit (a binary search capped at the
configured max_model_len). V0 (worker/worker.py) checks max_model_len <= blocks x block_size.
"""

from __future__ import annotations

import math

from triage.memory.quantities import DERIVED, Quantity, weakest


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def block_bytes_from_pool(pool: Quantity, tokens: int, block_size: int) -> Quantity | None:
    """Bytes per block from a pool and the token count vLLM printed for it.

    tokens = floor(pool / bpb) x block_size, so bpb lies in (pool / (blocks + 1), pool / blocks].
    """
    blocks = tokens // block_size
    if blocks <= 0 or pool.hi <= 0:
        return None
    lo = max(pool.lo, 0) / (blocks + 1)
    hi = pool.hi / blocks
    return Quantity(pool.value / blocks, lo, hi, weakest(pool.source, DERIVED))


def block_bytes_from_needed(needed: Quantity, max_model_len: int, block_size: int) -> Quantity | None:
    """Bytes per block from vLLM's 'X GiB KV cache is needed' for one max_model_len request."""
    blocks = cdiv(max_model_len, block_size)
    if blocks <= 0:
        return None
    return Quantity(needed.value / blocks, needed.lo / blocks, needed.hi / blocks, weakest(needed.source, DERIVED))


def needed_bytes(max_model_len: int, block_bytes: Quantity, block_size: int) -> Quantity:
    """KV memory one request of max_model_len needs (full attention): whole blocks."""
    return block_bytes.scale(cdiv(max_model_len, block_size))


def pool_tokens(pool: Quantity, block_bytes: Quantity, block_size: int) -> tuple[int, int]:
    """(worst, best) token capacity of a pool: floor(pool / bpb) x block_size."""
    worst = math.floor(max(pool.lo, 0) / block_bytes.hi) * block_size if block_bytes.hi > 0 else 0
    best = math.floor(max(pool.hi, 0) / block_bytes.lo) * block_size if block_bytes.lo > 0 else worst
    return worst, best


def longest_context(
    pool: Quantity, block_bytes: Quantity, block_size: int, cap: int | None = None, engine: str = "v1"
) -> int:
    """The longest max_model_len that fits the pool in the worst case (a multiple of block_size).

    With `cap` it is at most the configured max_model_len, as vLLM's own estimate is.
    """
    worst, _ = pool_tokens(pool, block_bytes, block_size)
    return min(worst, cap) if cap else worst


def vllm_estimate(pool_bytes: float, block_bytes: float, block_size: int, cap: int) -> int:
    """vLLM's own estimate_max_model_len on exact figures (what it printed, for tests)."""
    if block_bytes <= 0:
        return 0
    fit = math.floor(pool_bytes / block_bytes) * block_size
    return min(fit, cap) if fit >= 1 else 0


def tokens_per_gib(block_bytes: Quantity, block_size: int) -> Quantity:
    """KV tokens one GiB holds: block_size / bpb x 2**30, as an interval."""
    g = float(1 << 30)
    return Quantity(
        g * block_size / block_bytes.value,
        g * block_size / block_bytes.hi,
        g * block_size / block_bytes.lo if block_bytes.lo > 0 else math.inf,
        block_bytes.source,
    )


def request_blocks(
    max_model_len: int, block_size: int, sliding_window: int | None = None, max_num_batched_tokens: int | None = None
) -> int:
    """Blocks one max_model_len request takes in one layer (v1/kv_cache_interface.py, 0.10+):
    full attention cdiv(len, block); a sliding window keeps window - 1 + the batch's new tokens, and
    one more block because the window need not start at a block's edge."""
    if sliding_window is None:
        return cdiv(max_model_len, block_size)
    tokens = min(sliding_window - 1 + (max_num_batched_tokens or 0), max_model_len)
    return cdiv(tokens, block_size) + 1


def max_concurrency(num_blocks: int, per_request_blocks: int) -> float:
    """vLLM's `Maximum concurrency for N tokens per request: X` (get_max_concurrency_for_kv_cache_config)."""
    return num_blocks / per_request_blocks if per_request_blocks > 0 else 0.0
