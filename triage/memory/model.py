"""vLLM's memory checks for one start under a configuration: the one copy of the arithmetic.

`evaluate(inputs, config)` answers every check the log's figures allow (fits / fails /
cannot tell, with the margin). Figures vLLM printed are used as printed (with their
rounding interval); what a changed flag does to them is derived here: the pool from the
budget, bytes per block from the KV dtype and TP, the profile batch from
max_num_batched_tokens. Derived changes that rest on proportional scaling (TP splitting
weights and KV heads, an activation peak shrinking with the batch) are marked estimated.
"""

from __future__ import annotations

from triage.memory import budget, kv
from triage.memory.checks import FITS, Check, compare, fmt, unknown
from triage.memory.inputs import (
    GRAPHS,
    HOST_RAM,
    HOST_SWAP,
    KERNEL_WARMUP,
    KV_ALLOC,
    KV_FIT,
    LOAD,
    MAMBA,
    NO_POOL,
    OUTSIDE,
    PROFILE,
    SAMPLER_WARMUP,
    SERVING,
    STARTUP,
    Config,
    MemoryInputs,
)
from triage.memory.quantities import DERIVED, ESTIMATED, GIVEN, PRINTED, Quantity
from triage.memory.resolved import (  # noqa: F401 - re-exported: callers name them as model.<name>
    Resolved,
    block_bytes,
    dtype_bytes,
    non_kv,
    offloaded,
    replace_offload,
    resolve,
)

SWAP_LIMIT = 0.7  # V0 raises "Too large swap space" above 70% of host RAM


def evaluate(inp: MemoryInputs, cfg: Config | None = None) -> list[Check]:
    """Every check the figures allow, under `cfg` (None: the failed start's own flags)."""
    cfg = cfg or inp.current()
    if cfg.cpu_offload_gb:
        inp = offloaded(inp, cfg)
        cfg = replace_offload(cfg)
    r = resolve(inp, cfg)
    out: list[Check] = []
    for step in (
        _scheduler,
        _startup,
        _room_outside,
        _gpu_count,
        _load,
        _pool_positive,
        _kv_fit,
        _mamba,
        _profile,
        _kv_alloc,
        _outside,
        _swap,
    ):
        c = step(inp, cfg, r)
        if c is not None:
            out.append(c)
    return out


def _scheduler(inp: MemoryInputs, cfg: Config, r: Resolved) -> Check | None:
    """SchedulerConfig._verify_args: without chunked prefill max_num_batched_tokens >= max_model_len;
    always max_num_batched_tokens >= max_num_seqs. Only for flags a remedy changes."""
    batch = cfg.max_num_batched_tokens
    if batch is None or (batch == inp.max_num_batched_tokens and cfg.max_model_len == inp.max_model_len):
        return None  # unchanged (V0's default batch follows max_model_len: nothing to violate)
    seqs = cfg.max_num_seqs or inp.max_num_seqs
    if inp.batch_follows_len and r.max_model_len and batch < r.max_model_len:
        return compare(
            "scheduler_config",
            "max_num_batched_tokens >= max_model_len (no chunked prefill)",
            Quantity.exact(r.max_model_len, GIVEN),
            Quantity.exact(batch, GIVEN),
            unit="tokens",
        )
    if seqs and batch < seqs:
        return compare(
            "scheduler_config",
            "max_num_batched_tokens >= max_num_seqs",
            Quantity.exact(seqs, GIVEN),
            Quantity.exact(batch, GIVEN),
            unit="tokens",
        )
    return None


def _startup(inp: MemoryInputs, cfg: Config, r: Resolved) -> Check | None:
    if not inp.v1 or inp.free is None or inp.total is None or cfg.kv_cache_memory is not None:
        return None
    note = "assumes the added GPUs are as free" if r.tp_ratio < 1 else ""
    return compare(
        STARTUP, f"startup check: free >= total x {r.util:g}", budget.requested(inp.total, r.util), inp.free, note=note
    )


def reserve(inp: MemoryInputs) -> Quantity:
    """Free memory to leave outside a budget cut to what was free: CUDA graphs and the context
    live there. The graph memory vLLM printed, else 0.5 GiB or 5% of what was free if less."""
    if inp.cuda_graph is not None:
        return inp.cuda_graph
    free = inp.free.value if inp.free is not None else 0.0
    return Quantity.exact(min(0.5 * (1 << 30), 0.05 * free), ESTIMATED)


def _room_outside(inp: MemoryInputs, cfg: Config, r: Resolved) -> Check | None:
    """After a startup failure: a budget cut to the free memory must leave room outside it."""
    if inp.failure != STARTUP or inp.free is None or inp.total is None or not inp.v1:
        return None
    have = inp.free - budget.requested(inp.total, r.util)
    return compare("room_outside_budget", "free memory left outside the budget (graphs, context)", reserve(inp), have)


def _gpu_count(inp: MemoryInputs, cfg: Config, r: Resolved) -> Check | None:
    tp = cfg.tensor_parallel_size or inp.tp
    if tp == inp.tp or inp.gpu_count is None:
        return None
    need, have = Quantity.exact(tp * inp.pp, GIVEN), Quantity.exact(inp.gpu_count, DERIVED)
    return compare("gpu_count", f"GPUs for TP {tp} x PP {inp.pp}", need, have, unit="GPUs")


def _load(inp: MemoryInputs, cfg: Config, r: Resolved) -> Check | None:
    if inp.failure != LOAD:
        return None
    if inp.weights is None or inp.total is None:
        return unknown(LOAD, "weights fit the free memory while loading", "the weights' size")
    have = inp.free if inp.free is not None else inp.total - (inp.foreign or 0)
    need = inp.weights.scale(r.tp_ratio)
    return compare(
        LOAD, "weights fit the free memory while loading (not bounded by utilization)", need, have, note="per GPU"
    )


def _pool_positive(inp: MemoryInputs, cfg: Config, r: Resolved) -> Check | None:
    what = "KV pool left after weights, activations and non-torch memory"
    if cfg.kv_cache_memory is not None and inp.free is not None and r.non_kv is not None:
        need = r.non_kv + Quantity.exact(cfg.kv_cache_memory, GIVEN)
        return compare(NO_POOL, "pinned KV cache and the rest fit the free memory", need, inp.free)
    if inp.total is None:  # a pool bounded without the total (a lower utilization) still answers
        return compare(NO_POOL, what, Quantity.exact(1, GIVEN), r.pool) if r.pool not in (None, inp.pool) else None
    req = budget.requested(inp.total, r.util)
    if r.pool is not None:
        return compare(NO_POOL, what, Quantity.exact(1, GIVEN), r.pool)
    if inp.weights is None or (capacity_tokens(inp) and r.util == inp.util.value and r.tp_ratio == 1):
        return None  # vLLM sized a pool of tokens under this very budget: it was positive
    w = inp.weights.scale(r.tp_ratio)
    if r.tp_ratio != 1:
        w = w.with_source(ESTIMATED)
    # the activations and the KV cache need some of the budget too: at least a tenth (estimated)
    need = w + req.scale(ROOM_FOR_THE_REST).with_source(ESTIMATED)
    c = compare(NO_POOL, f"budget of total x {r.util:g} holds the weights and a tenth more", need, req)
    if c.verdict == FITS:  # the weights fit; the activations and non-torch memory are not in the log
        return Check(
            NO_POOL,
            "cannot tell",
            what,
            need=w,
            have=req,
            source=c.source,
            missing=("the activation peak and non-torch memory",),
        )
    return c


def _kv_fit(inp: MemoryInputs, cfg: Config, r: Resolved) -> Check | None:
    length = r.max_model_len
    if length is None:
        return None
    what = f"KV pool holds one max_model_len {length:,} request"
    bound = estimate_bound(inp, r)
    exact_need = inp.kv_needed is not None and length == inp.max_model_len  # the printed need, scaled by dtype
    if bound is not None and (r.kv_ratio == 1 or (length <= bound and not exact_need)):
        # vLLM searched the longest length on the exact pool: at or under it the same pool fits,
        # above it (same dtype) it does not, whatever a per-token figure would say
        note = (
            "vLLM's own estimate for this pool"
            if r.kv_ratio == 1
            else f"vLLM's estimate for this pool, {inp.kv_estimate:,}, x {1 / r.kv_ratio:g} "
            f"for {r.kv_ratio:g}x the bytes per token"
        )
        return compare(
            KV_FIT,
            what,
            Quantity.exact(length, GIVEN),
            Quantity.exact(bound, PRINTED),
            unit="tokens",
            note=("at or under " if length <= bound else "above ") + note,
        )
    cap = capacity_tokens(inp)
    if cap is not None and r.pool is inp.pool and r.tp_ratio == 1:  # the pool as printed: its exact capacity
        blocks = int(cap // inp.block_size / r.kv_ratio)
        have = Quantity.exact(blocks * inp.block_size, DERIVED if r.kv_ratio != 1 else PRINTED)
        return compare(
            KV_FIT,
            what,
            Quantity.exact(length, GIVEN),
            have,
            unit="tokens",
            note=f"{blocks:,} blocks x {inp.block_size} tokens",
        )
    if r.block_bytes is not None and r.pool is not None:
        need = kv.needed_bytes(length, r.block_bytes, inp.block_size)
        return compare(KV_FIT, what, need, r.pool)
    if inp.gpu_blocks is not None:  # V0 prints blocks, not bytes: only flags that keep the pool answer
        if r.util != inp.util.value or r.tp_ratio != 1 or r.token_ratio != 1:
            return unknown(KV_FIT, what, "the KV bytes per block")
        blocks = int(inp.gpu_blocks / r.kv_ratio)
        have = Quantity.exact(blocks * inp.block_size, DERIVED if r.kv_ratio != 1 else PRINTED)
        return compare(
            KV_FIT,
            what,
            Quantity.exact(length, GIVEN),
            have,
            unit="tokens",
            note=f"{blocks:,} blocks x {inp.block_size} tokens",
        )
    if inp.failure == KV_FIT:
        return unknown(KV_FIT, what, *_kv_fit_missing(inp, r))
    return None


def estimate_bound(inp: MemoryInputs, r: Resolved) -> int | None:
    """The longest length vLLM's printed estimate guarantees under a config that keeps the pool.

    The KV need per token never rises with the length (full attention is linear; sliding-window,
    chunked-local and Mamba layers stop growing), so need(L) <= need(est) x L / est: a dtype
    with kv_ratio times the bytes holds est / kv_ratio tokens, in whole blocks.
    """
    if not inp.kv_estimate or r.pool is not inp.pool or r.tp_ratio != 1 or r.kv_ratio > 1:
        return None
    if r.kv_ratio == 1:
        return inp.kv_estimate
    return int(inp.kv_estimate / r.kv_ratio) // inp.block_size * inp.block_size


def _mamba(inp: MemoryInputs, cfg: Config, r: Resolved) -> Check | None:
    """Hybrid models keep one state block per running sequence (config/compilation.py, 0.2x+): the
    pool's blocks scale with it, [pool / (M + 1), pool / M] bytes each, whole blocks."""
    if inp.failure != MAMBA or not inp.mamba_blocks:
        return None
    seqs = cfg.max_num_seqs or inp.max_num_seqs
    what = f"Mamba cache blocks hold max_num_seqs {seqs:,}" if seqs else "Mamba cache blocks hold max_num_seqs"
    if not seqs:
        return unknown(MAMBA, what, "max_num_seqs")
    if r.pool is inp.pool:
        blocks = inp.mamba_blocks
    elif r.pool is not None and inp.pool is not None:
        blocks = int(max(r.pool.lo, 0) // (inp.pool.hi / inp.mamba_blocks))
    else:
        return unknown(MAMBA, what, "the KV pool these flags leave")
    return compare(
        MAMBA,
        what,
        Quantity.exact(seqs, GIVEN),
        Quantity.exact(blocks, DERIVED if r.pool is not inp.pool else PRINTED),
        unit="blocks",
        note="one state block per running sequence",
    )


def _kv_fit_missing(inp: MemoryInputs, r: Resolved) -> list[str]:
    """The figures whose absence leaves the KV fit open, named as the user would look for them."""
    missing = []
    if r.pool is None:
        missing.append(
            "the KV pool these flags leave (the GPU's total memory is not in the log)"
            if inp.total is None
            else "the KV pool these flags leave"
        )
    if r.block_bytes is None:
        missing.append("the KV bytes per token")
    return missing or ["the KV pool or its bytes per token"]


def capacity_tokens(inp: MemoryInputs) -> int | None:
    """The pool's exact capacity when vLLM printed it: blocks x block_size (V0) or KV tokens (V1)."""
    if inp.gpu_blocks is not None:
        return inp.gpu_blocks * inp.block_size
    return inp.kv_tokens


def _profile(inp: MemoryInputs, cfg: Config, r: Resolved) -> Check | None:
    if inp.failure != PROFILE:
        return None
    if inp.oom_requested is None or inp.oom_free is None:
        return unknown(PROFILE, "profile run's allocation fits", "the failed allocation's size")
    need = inp.oom_requested
    note = "V1 profiles max_num_batched_tokens tokens" if inp.v1 else "V0 profiles max_num_batched_tokens tokens"
    if r.token_ratio != 1:
        need = need.scale(r.token_ratio).with_source(ESTIMATED)
    if r.seq_ratio != 1 and not inp.v1 and not inp.mm_single_seq:
        note += "; fewer sequences shorten each dummy sequence, not the batch"
    if r.seq_ratio != 1 and inp.mm_single_seq:
        note += "; the multimodal profile already ran one sequence, so max_num_seqs changes nothing"
    return compare(
        PROFILE,
        "profile run's failed allocation fits what was free",
        need,
        inp.oom_free + _weights_freed(inp, r),
        note=note,
    )


def _weights_freed(inp: MemoryInputs, r: Resolved) -> Quantity | float:
    """Per-device memory a larger TP frees by splitting the weights (estimated)."""
    if r.tp_ratio >= 1 or inp.weights is None:
        return 0.0
    return inp.weights.scale(1 - r.tp_ratio).with_source(ESTIMATED)


ROOM_FOR_THE_REST = 0.1  # of the budget, kept for activations and KV when the log does not print them
CONTEXT_OUTSIDE = Quantity(0.5 * (1 << 30), 0.5 * (1 << 30), 0.5 * (1 << 30), ESTIMATED)  # CUDA context etc.


def _kv_alloc(inp: MemoryInputs, cfg: Config, r: Resolved) -> Check | None:
    """An OOM allocating the pool: the whole budget (plus the context outside it) must fit what
    this process can hold (what it held at the OOM + what was free), not only the failed tensor."""
    if inp.failure != KV_ALLOC:
        return None
    what = "the whole budget fits what this process can hold"
    if inp.total is None or inp.oom_free is None:
        return unknown(OUTSIDE, what, "the GPU's total and free memory at the OOM")
    if inp.oom_held is not None:
        have = inp.oom_held + inp.oom_free
    else:
        have = inp.total - (inp.foreign or 0)
    need = budget.requested(inp.total, r.util) + CONTEXT_OUTSIDE
    return compare(
        OUTSIDE,
        what,
        need,
        have + _weights_freed(inp, r),
        note="the budget plus ~0.5 GiB of CUDA context outside it (estimated)",
    )


def _outside(inp: MemoryInputs, cfg: Config, r: Resolved) -> Check | None:
    if inp.failure not in (OUTSIDE, GRAPHS, KERNEL_WARMUP, SAMPLER_WARMUP, SERVING):
        return None
    what = "the failed allocation fits outside the budget"
    if inp.failure == GRAPHS and cfg.enforce_eager:
        return Check(OUTSIDE, FITS, what, note="--enforce-eager captures no CUDA graphs", source=DERIVED)
    if inp.oom_requested is None or inp.oom_free is None or inp.total is None:
        return unknown(OUTSIDE, what, "the failed allocation and the GPU's total")
    need = inp.oom_requested
    if inp.failure in (KERNEL_WARMUP, SERVING) and r.token_ratio != 1:
        need = need.scale(r.token_ratio).with_source(ESTIMATED)
    if inp.failure in (SAMPLER_WARMUP, GRAPHS) and r.seq_ratio != 1:
        need = need.scale(r.seq_ratio).with_source(ESTIMATED)
    freed = inp.total.scale(max(inp.util.value - r.util, 0)) - inp.total.scale(max(r.util - inp.util.value, 0))
    if cfg.enforce_eager and inp.cuda_graph is not None:  # graphs captured before the failure hold this
        freed = freed + inp.cuda_graph
    return compare(
        OUTSIDE,
        what,
        need,
        inp.oom_free + freed + _weights_freed(inp, r),
        note="what was free plus what a smaller budget leaves; later allocations may need more",
    )


def _swap(inp: MemoryInputs, cfg: Config, r: Resolved) -> Check | None:
    if inp.swap_total is None or inp.cpu_total is None:
        return None
    tp = cfg.tensor_parallel_size or inp.tp
    need = inp.swap_total.scale(tp / inp.tp)
    if cfg.swap_space is not None:
        need = Quantity.exact(cfg.swap_space * (1 << 30) * tp, GIVEN)
    if inp.failure == HOST_RAM:  # a smaller swap frees host RAM only if it is smaller
        per_gpu = inp.swap_total.scale(1 / inp.tp)
        return compare(
            HOST_RAM,
            f"swap space x {tp} GPUs below the {fmt(inp.swap_total.value, 'bytes')} "
            f"({fmt(per_gpu.value, 'bytes')} x {inp.tp}) that was pinned",
            need,
            inp.swap_total - Quantity.exact(tp * (1 << 30)),
        )
    return compare(
        HOST_SWAP, f"swap space x {tp} GPUs within {SWAP_LIMIT:.0%} of host RAM", need, inp.cpu_total.scale(SWAP_LIMIT)
    )
