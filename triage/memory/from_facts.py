"""MemoryInputs from the figures the tool merged out of one log (triage.timeline.facts names).

Only reading: which figure is which, its rounding (from the unit it was printed in) and its
provenance (printed, the default, estimated from the model name), and which of vLLM's
checks the failure is. Takes duck-typed inputs (a mapping of name -> object with
.value/.line; an OOM with .requested/.free/.total/.line) so it needs nothing from the
rule engine.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, TypeGuard

from triage.memory.inputs import (
    DEFAULT_UTIL,
    GRAPHS,
    HOST_RAM,
    HOST_SWAP,
    KERNEL_WARMUP,
    KV_ALLOC,
    KV_FIT,
    LOAD,
    MAMBA,
    NO_POOL,
    PROFILE,
    SAMPLER_WARMUP,
    SERVING,
    STARTUP,
    MemoryInputs,
)
from triage.memory.quantities import DEFAULT, ESTIMATED, PRINTED, Quantity

_WARMUP_FRAMES = ("kernel_warmup", "warmup_kernels", "flashinfer_autotune")
_SAMPLER_FRAMES = ("_dummy_sampler_run", "_warmup_sampler")
_PHASE_FAILURE = {
    "loading_weights": LOAD,
    "profiling": PROFILE,
    "cuda_graph_capture": GRAPHS,
    "kv_cache_allocation": KV_ALLOC,
    "ready": SERVING,
}


def classify(
    phase: str | None,
    frames: Iterable[str],
    kinds: Iterable[str],
    seen: Iterable[str],
    startup_error: bool = False,
    oom: bool = False,
) -> str | None:
    """Which of vLLM's checks the failure is, from its phase, frames and the events seen."""
    kinds, seen, frames = set(kinds), set(seen), set(frames)
    if startup_error:
        return STARTUP
    if "kv_needed" in seen or "kv_too_small" in seen:
        return KV_FIT
    if "no_cache_memory" in seen:
        return NO_POOL
    if "mamba_blocks_short" in seen:
        return MAMBA
    if "sampler_warmup_oom" in seen:
        return SAMPLER_WARMUP
    if "load_model_oom" in seen:
        return LOAD
    if "swap_space" in kinds:
        return HOST_SWAP
    if not (oom or "cuda_error_oom" in kinds):
        return HOST_RAM if "host_memory_problem" in kinds or "host_memory_problem" in seen else None
    if phase == "profiling" and frames & set(_WARMUP_FRAMES):
        return KERNEL_WARMUP
    if phase == "profiling" and frames & set(_SAMPLER_FRAMES):
        return SAMPLER_WARMUP
    return _PHASE_FAILURE.get(phase or "")


MAX_FIGURE = float(1 << 60)  # an exabyte or an exa-token: beyond any device; larger figures are nonsense


def _finite(v: Any) -> TypeGuard[int | float]:
    # the bound first: a 5000-digit int compares exactly with a float but overflows isfinite()
    return isinstance(v, (int, float)) and not isinstance(v, bool) and abs(v) <= MAX_FIGURE and math.isfinite(v)


def _q(facts: Mapping[str, Any], name: str) -> Quantity | None:
    f = facts.get(name)
    if f is None or not _finite(f.value):
        return None
    return Quantity.printed_bytes(float(f.value), getattr(f, "line", 0))


def _int(facts: Mapping[str, Any], name: str) -> int | None:
    f = facts.get(name)
    v = getattr(f, "value", None)
    return int(v) if _finite(v) and v > 0 else None


def _float(facts: Mapping[str, Any], name: str) -> float | None:
    v = getattr(facts.get(name), "value", None)
    return float(v) if _finite(v) and 0 < v <= 1 else None


def _advice_total(facts: Mapping[str, Any], util: float) -> Quantity | None:
    """The GPU's total from vLLM's graph advice, where nothing prints it (0.21+ at INFO): it suggests
    round(U + E / total, 4) for an estimate E printed to 0.01 GiB, so total = E / (S - U), an interval."""
    est, suggested = _q(facts, "cuda_graph_estimate_bytes"), _float(facts, "cuda_graph_suggested_util")
    if est is None or suggested is None or suggested >= 1.0:  # capped at 1.0: the figure is lost
        return None
    lo_d, hi_d = suggested - util - 0.00005, suggested - util + 0.00005
    if lo_d <= 0 or est.lo <= 0:
        return None
    return Quantity(est.value / (suggested - util), est.lo / hi_d, est.hi / lo_d, ESTIMATED, est.line)


def _graph_estimate(facts: Mapping[str, Any]) -> Quantity | None:
    """The graphs' estimate, where vLLM took it out of the budget (profiling on: the default from 0.21)."""
    if getattr(facts.get("cuda_graph_profiling"), "value", None) is False:
        return None
    return _q(facts, "cuda_graph_estimate_bytes")


def _str(facts: Mapping[str, Any], name: str) -> str | None:
    v = getattr(facts.get(name), "value", None)
    return v if isinstance(v, str) else None


def _given(facts: Mapping[str, Any], name: str) -> bool | None:
    """Whether the log's argument dump sets `name` (None: no dump, so the log cannot tell)."""
    dumped = getattr(facts.get("args_given"), "value", None)
    return name in dumped if isinstance(dumped, tuple) else None


def _serve_default(facts: Mapping[str, Any], total: Quantity | None) -> int | None:
    """`vllm serve`'s default batch for this release and GPU (memory/vllm_defaults.txt), where the GPU's
    kind tells it (both ends of the total's rounding must agree)."""
    from triage.memory import defaults

    name = _str(facts, "gpu_name")
    ends = {defaults.devices(name, q) for q in ((total.lo, total.hi) if total is not None else (None,))}
    kinds = tuple(dict.fromkeys(k for e in ends for k in e))
    return defaults.value("max_num_batched_tokens", _str(facts, "vllm_version"), kinds)


def _engine(facts: Mapping[str, Any]) -> str | None:
    e = _str(facts, "engine")
    if e in ("v0", "v1"):
        return e
    if "startup_free_bytes" in facts or "kv_needed_bytes" in facts:
        return "v1"  # messages only V1 prints
    if "gpu_blocks" in facts:
        return "v0"
    version = _str(facts, "vllm_version") or ""
    try:
        major_minor = tuple(int(x) for x in version.split(".")[:2])
    except ValueError:
        return None
    if major_minor and major_minor >= (0, 11):
        return "v1"  # V0 was removed
    if major_minor and major_minor < (0, 8):
        return "v0"
    return None


def _oom(oom: Any, name: str) -> Quantity | None:
    v = getattr(oom, name, None) if oom is not None else None
    return Quantity.printed_bytes(float(v), getattr(oom, "line", 0)) if _finite(v) else None


def _weights(facts: Mapping[str, Any], tp: int, loaded: float | None = None) -> Quantity | None:
    """Printed weights (per device), else the estimate from the model name split over TP.

    Names round the parameter count (7B for 7.6B), seldom up by more than 5%: [-5%, +10%].
    `loaded` (what PyTorch held plus asked for when loading failed) bounds the weights from
    below: an estimate under it counted too few bytes per parameter (online quantization loads
    16-bit weights first), so it is taken at 16 bits, or not at all if that is under it too.
    """
    w = _q(facts, "weights_bytes")
    if w is not None:
        return w
    est = getattr(facts.get("weights_estimate_bytes"), "value", None)
    if not _finite(est) or est <= 0:
        return None
    per = est / tp
    if loaded is not None and per * 1.1 < loaded:
        params = getattr(facts.get("model_params"), "value", None)
        per = params * 1e9 * 2 / tp if _finite(params) else 0.0
        if per * 1.1 < loaded:
            return None
    return Quantity(per, max(per * 0.95, loaded or 0.0), per * 1.1, ESTIMATED, getattr(facts.get("model"), "line", 0))


def _loaded(oom: Any, failure: str | None) -> float | None:
    """Weights already on the device when loading failed: allocated + the failed request."""
    alloc, req = getattr(oom, "allocated", None), getattr(oom, "requested", None)
    if failure != LOAD or not _finite(alloc) or not _finite(req):
        return None
    return float(alloc) + float(req)


def build(
    facts: Mapping[str, Any], failure: str | None = None, oom: Any = None, multimodal_single_seq: bool = False
) -> MemoryInputs:
    """Everything the model needs, from the merged facts and the failing allocation."""
    util_f = facts.get("gpu_memory_utilization")
    util = (
        Quantity.exact(float(util_f.value), PRINTED, util_f.line)
        if util_f is not None and _finite(util_f.value) and 0 < util_f.value <= 1
        else Quantity.exact(DEFAULT_UTIL, DEFAULT)
    )
    tp = _int(facts, "tensor_parallel_size") or 1
    total = _q(facts, "gpu_total_bytes") or _oom(oom, "total") or _advice_total(facts, util.value)
    engine = _engine(facts)
    batch = _int(facts, "max_num_batched_tokens")
    length = _int(facts, "max_model_len")
    follows = (
        engine == "v0"
        and batch is None
        and length is not None
        and getattr(facts.get("enable_chunked_prefill"), "value", None) is not True
    )
    if follows:
        batch = max(length or 0, 2048)  # V0's default without chunked prefill (config.py)
    given = _given(facts, "max_num_batched_tokens")
    if batch is None and engine == "v1" and given is False:
        batch = _serve_default(facts, total)
    block = facts.get("block_size")
    bs = _int(facts, "block_size") or 16
    blocks = _int(facts, "gpu_blocks")
    if blocks is None and failure == KV_FIT and "kv_needed_bytes" not in facts and _int(facts, "kv_cache_tokens"):
        blocks = (_int(facts, "kv_cache_tokens") or 0) // bs  # V0 prints the pool as blocks x block_size tokens
    sources = {"block_size": DEFAULT if block is None or getattr(block, "line", 0) == 0 else PRINTED}
    return MemoryInputs(
        engine=engine,
        vllm_version=_str(facts, "vllm_version"),
        failure=failure,
        total=total,
        free=_q(facts, "startup_free_bytes") or _q(facts, "initial_free_bytes"),
        util=util,
        weights=_weights(facts, tp, _loaded(oom, failure)),
        activation_peak=_q(facts, "activation_peak_bytes"),
        non_torch=_q(facts, "non_torch_bytes"),
        non_kv=_q(facts, "non_kv_bytes"),
        pool=_q(facts, "kv_cache_bytes"),
        kv_tokens=_int(facts, "kv_cache_tokens"),
        kv_needed=_q(facts, "kv_needed_bytes"),
        gpu_blocks=blocks,
        kv_estimate=_int(facts, "kv_estimated_max_len"),
        block_size=bs,
        max_model_len=_int(facts, "max_model_len"),
        max_num_seqs=_int(facts, "max_num_seqs"),
        max_num_batched_tokens=batch,
        batch_given=given,
        batch_follows_len=follows,
        oom_requested=_oom(oom, "requested"),
        oom_free=_oom(oom, "free"),
        oom_held=_oom(oom, "this_process"),
        foreign=_q(facts, "foreign_bytes"),
        cuda_graph=_q(facts, "cuda_graph_bytes"),
        tp=tp,
        graph_estimate=_graph_estimate(facts),
        graph_advice=_float(facts, "cuda_graph_suggested_util"),
        mamba_blocks=_int(facts, "mamba_blocks"),
        pp=_int(facts, "pipeline_parallel_size") or 1,
        dtype=_str(facts, "dtype"),
        gpu_name=_str(facts, "gpu_name"),
        kv_cache_dtype=_str(facts, "kv_cache_dtype"),
        kv_cache_memory=_q(facts, "kv_cache_memory_bytes"),
        multimodal=bool(getattr(facts.get("multimodal"), "value", False)),
        mm_single_seq=multimodal_single_seq,
        swap_total=_q(facts, "swap_bytes"),
        cpu_total=_q(facts, "cpu_total_bytes"),
        sources=sources,
    )
