"""Everything a plan knows before any memory arithmetic: the model, the GPU, the flags, resolved.

It reads the model's files, resolves dtype and KV dtype as vLLM does, lays out the KV cache
and counts the weights per GPU, fills vLLM's defaults for the flags not given, and collects
the configuration errors vLLM would raise before touching memory (heads not divisible by
TP, a max_model_len beyond the model's own, more GPUs than the machine has).
"""

from __future__ import annotations

from msgspec import Struct, field

from triage.plan import estimates, params, plausible
from triage.plan import kv_layout as kv
from triage.plan.gpu import Gpu
from triage.plan.model_files import ModelFiles
from triage.plan.spec import DTYPE_BYTES, LENGTH_KEYS, TextConfig, kv_dtype_bytes, resolve_dtype
from triage.units import GiB
from triage.vllm_flags import ServeFlags

DEFAULT_UTIL = 0.9
DEFAULT_BLOCK = 16
MAX_LAYERS = 4096  # the deepest models have ~200 layers; more is a broken config


class Launch(Struct):
    files: ModelFiles
    cfg: TextConfig
    flags: ServeFlags
    gpu: Gpu
    dtype: str
    dtype_source: str
    kv_bytes: int
    kv_source: str
    layout: kv.KvLayout
    weights: params.Weights
    util: float
    block_size: int
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    derived_len: int | None
    problems: list[tuple[str, str]] = field(default_factory=list)  # (cause id, message)
    assumptions: list[str] = field(default_factory=list)
    version: str | None = None  # the vLLM release planned for (--vllm-version); None: V1 (0.10)
    engine: str | None = None  # "v0" / "v1" where given (--vllm-engine); None: the release's default

    @property
    def v0(self) -> bool:
        return self.engine == "v0" if self.engine else estimates.is_v0(self.version)

    @property
    def world(self) -> int:
        return self.flags.tp * self.flags.pp


def _lengths(cfg: TextConfig, flags: ServeFlags, launch_problems: list, assumptions: list) -> tuple[int, int | None]:
    derived = cfg.max_length()
    if flags.max_model_len:
        if derived and flags.max_model_len > derived:
            launch_problems.append(
                (
                    "invalid_arguments",
                    (
                        f"--max-model-len {flags.max_model_len:,} is above the model's own {derived:,} "
                        "(config.json); vLLM refuses it unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"
                    ),
                )
            )
        return flags.max_model_len, derived
    if derived is None:
        assumptions.append("config.json gives no maximum length; vLLM assumes 2048")
        return 2048, None
    assumptions.append(f"max_model_len {derived:,}: the model's own maximum (vLLM's default without --max-model-len)")
    return derived, derived


def _validate(cfg: TextConfig, flags: ServeFlags, gpu: Gpu, problems: list) -> None:
    heads = cfg.number("num_attention_heads")
    if heads and heads % flags.tp:
        problems.append(
            (
                "parallelism_mismatch",
                f"{heads} attention heads are not divisible by tensor parallel size {flags.tp} (vLLM refuses to start)",
            )
        )
    used = flags.tp * flags.pp
    if gpu.source.startswith("nvidia-smi") and gpu.count < used:
        problems.append(
            (
                "parallelism_mismatch",
                f"the launch needs {used} GPUs (TP {flags.tp} x PP {flags.pp}) but nvidia-smi lists {gpu.count}",
            )
        )


def _batch(cfg: TextConfig, gpu: Gpu, length: int, version: str | None, v0: bool) -> tuple[int, int, str]:
    """vLLM's default (max_num_batched_tokens, max_num_seqs) for this release: V0's or V1's."""
    if not v0:
        return estimates.default_batch(gpu.total_bytes, gpu.name)
    sliding = cfg.get("sliding_window") is not None and cfg.get("use_sliding_window") is not False
    return estimates.v0_batch(length, version, chunked_default=not cfg.multimodal and not sliding)


def build(
    files: ModelFiles, flags: ServeFlags, gpu: Gpu, version: str | None = None, engine: str | None = None
) -> Launch:
    """Resolve the launch; raises ValueError for a dtype flag vLLM does not know."""
    cfg = TextConfig.of(files.config)
    if not 0 <= cfg.number("num_hidden_layers") <= MAX_LAYERS:
        raise ValueError(f"num_hidden_layers {cfg.get('num_hidden_layers')!r} is not plausible")
    plausible.check(cfg, LENGTH_KEYS)  # zero heads, a NaN vocabulary, 1e300: one clear error, before any sum
    dtype, dtype_source = resolve_dtype(flags.dtype, cfg.checkpoint_dtype())
    kv_bytes, kv_source = kv_dtype_bytes(flags.kv_cache_dtype, dtype)
    layout = kv.kv_layout(cfg, flags.tp, flags.pp, kv_bytes, DTYPE_BYTES[dtype])
    kinds = kv.mamba_kinds(cfg, cfg.number("num_hidden_layers"))
    weights = params.weights(
        cfg,
        files.weights_bytes,
        files.weights_source,
        files.tensor_params,
        dtype,
        flags.quantization,
        flags.tp * flags.pp,
        kinds,
    )
    if not weights.estimated:  # the checkpoint's bytes, as the allocator holds them on each GPU
        from triage.plan.allocation import load_overhead

        quantized = bool(cfg.quantization() or flags.quantization)
        extra, how = load_overhead(cfg, DTYPE_BYTES[dtype], flags.tp, quantized)
        weights.per_gpu_bytes += extra
        weights.source += f" / {flags.tp * flags.pp} GPU(s) {how}"
    problems: list[tuple[str, str]] = []
    assumptions: list[str] = []
    length, derived = _lengths(cfg, flags, problems, assumptions)
    _validate(cfg, flags, gpu, problems)
    v0 = engine == "v0" if engine else estimates.is_v0(version)
    tokens, seqs, why = _batch(cfg, gpu, length, version, v0)
    if flags.max_num_batched_tokens is None or flags.max_num_seqs is None:
        assumptions.append(f"{why}: max_num_batched_tokens {tokens}, max_num_seqs {seqs}")
    tokens = flags.max_num_batched_tokens or tokens
    seqs = min(flags.max_num_seqs or seqs, tokens)
    util = flags.gpu_memory_utilization if flags.gpu_memory_utilization is not None else DEFAULT_UTIL
    if flags.gpu_memory_utilization is None:
        assumptions.append(f"gpu_memory_utilization {DEFAULT_UTIL} (vLLM's default)")
    if flags.pp > 1:
        assumptions.append(f"pipeline parallel {flags.pp}: each GPU holds the layers of one stage (the largest)")
    if flags.cpu_offload_gb:  # vLLM keeps up to that many GiB of each GPU's weights in host memory
        offload = min(weights.per_gpu_bytes, int(flags.cpu_offload_gb * GiB))
        weights.per_gpu_bytes -= offload
        weights.source += f", less {flags.cpu_offload_gb:g} GiB offloaded to the CPU (--cpu-offload-gb)"
    if cfg.multimodal and weights.estimated:
        assumptions.append(
            "multimodal: the vision encoder is counted from vision_config (estimated); its "
            "profile pass on the largest images is not"
        )
    block = flags.block_size or DEFAULT_BLOCK
    if layout.min_block_size and (flags.block_size is None or block < layout.min_block_size):
        block = layout.min_block_size
        assumptions.append(f"block size {block}: vLLM raises the attention block until a page holds a Mamba state")
    return Launch(
        files,
        cfg,
        flags,
        gpu,
        dtype,
        dtype_source,
        kv_bytes,
        kv_source,
        layout,
        weights,
        util,
        block,
        length,
        seqs,
        tokens,
        derived,
        problems,
        assumptions,
        version,
        engine,
    )
