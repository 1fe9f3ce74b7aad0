"""Estimates of the memory vLLM measures at startup and a config cannot state exactly.

Each figure comes with the assumption it rests on, so a plan can label it. They are inputs
to the memory model (triage.memory), not its arithmetic:
- the activation peak of the profile run: V1 runs one forward pass of
  max_num_batched_tokens tokens, then the sampler on max_num_seqs rows of logits;
- the non-torch memory that grows from the worker's first snapshot (cuBLAS workspaces;
  NCCL and custom all-reduce buffers with TP/PP), the median of real starts' printed
  figures by degree (triage.plan.non_torch);
- CUDA graph memory, captured after the KV cache, outside the budget (none with
  --enforce-eager);
- the worker's own CUDA context, taken from free memory before the startup check.
The defaults of max_num_batched_tokens and max_num_seqs are vLLM 0.10's for `vllm serve`
(engine/arg_utils.py: 8192/1024 on GPUs of 70 GiB or more other than A100, else 2048/256).
"""

from __future__ import annotations

from msgspec import Struct

from triage.plan.spec import TextConfig
from triage.units import GiB, MiB

GRAPHS_BASE = 100 * MiB
GRAPHS_PER_BILLION = 40 * MiB  # per billion parameters on the GPU (0.38 GiB printed for an 8B model)
GRAPHS_CAP = 3 * GiB // 2
CUDA_CONTEXT = 450 * MiB


class Estimate(Struct):
    bytes: int
    assumption: str
    spread: tuple[float, float] = (0.5, 2.0)  # the interval the checks take it in, as factors of `bytes`


def default_batch(total_bytes: int, gpu_name: str) -> tuple[int, int, str]:
    """(max_num_batched_tokens, max_num_seqs, why) as `vllm serve` 0.10 defaults them."""
    if total_bytes >= 70 * GiB and "a100" not in gpu_name.lower():
        return 8192, 1024, "vLLM 0.10 `vllm serve` defaults on GPUs >= 70 GiB (not A100)"
    return 2048, 256, "vLLM 0.10 `vllm serve` defaults on GPUs under 70 GiB (and A100)"


def activation_peak(cfg: TextConfig, tokens: int, seqs: int, tp: int, dtype_bytes: int) -> Estimate:
    """The profile run's torch peak: the larger of its two phases, which do not overlap.

    V1's profile_run (gpu_model_runner.py, 0.10) runs the forward pass of `tokens` tokens,
    whose intermediates are freed when it returns, then the sampler on `seqs` rows of
    logits while the forward's output hidden states are still held. The logits are
    all-gathered, so every TP rank holds the whole vocabulary.
    """
    hidden, heads = cfg.number("hidden_size"), cfg.number("num_attention_heads")
    tp = max(1, tp)
    inter = cfg.number("intermediate_size")
    if cfg.number("num_experts"):
        k = cfg.number("num_experts_per_tok", cfg.number("experts_per_token", 2)) or 2
        inter = max(inter, k * (cfg.number("moe_intermediate_size", inter) or inter))
    qkv = (heads + 2 * cfg.kv_heads()) * cfg.head_dim()
    per_token = (3 * inter + qkv) // tp + 4 * hidden
    forward = tokens * per_token * dtype_bytes
    vocab = cfg.number("vocab_size")
    held = tokens * hidden * dtype_bytes
    sampler = seqs * vocab * 4 * 3
    return Estimate(
        max(forward, held + sampler),
        (
            f"estimated: the larger of a forward pass of {tokens:,} tokens x ({3 * inter // tp:,} MLP + "
            f"{qkv // tp:,} QKV + {4 * hidden:,} hidden) x {dtype_bytes} B, and the sampler's {seqs} rows x "
            f"{vocab:,} vocab x 4 B x 3 copies beside the forward's {tokens:,} x {hidden:,} output"
        ),
    )


def non_torch(tp: int, pp: int = 1, version: str | None = None) -> Estimate:
    """Measured from real starts' printed figures, by parallel degree (triage.plan.non_torch). V0 0.6
    subtracted all non-torch memory (CUDA context included); 0.7 and V1 the increase since the worker began."""
    from triage.plan.non_torch import estimate, estimate_absolute, spread

    parsed = version_tuple(version)
    if parsed is not None and parsed < (0, 7):
        return Estimate(*estimate_absolute(tp, pp), spread(tp, pp))
    return Estimate(*estimate(tp, pp), spread(tp, pp))


def cuda_graphs(enforce_eager: bool, params_per_gpu: float) -> Estimate:
    """Graph memory grows with the model's size on the GPU: ~0.1 GiB plus ~40 MiB per billion parameters."""
    if enforce_eager:
        return Estimate(0, "--enforce-eager: no CUDA graphs are captured")
    size = min(GRAPHS_CAP, int(GRAPHS_BASE + GRAPHS_PER_BILLION * params_per_gpu / 1e9))
    return Estimate(
        size,
        f"estimated: ~{size / GiB:.2f} GiB of CUDA graphs for vLLM 0.10's default capture sizes "
        "(0.1 GiB + 40 MiB per billion parameters per GPU), captured after the KV cache, "
        "outside the budget",
    )


def cuda_context() -> Estimate:
    return Estimate(
        CUDA_CONTEXT,
        "estimated: ~0.45 GiB of the worker's own CUDA context is taken from free memory before vLLM's startup check",
    )


# -- V0 (vLLM <= 0.7.x's default engine) ------------------------------------------------------------

V0_SEQS = 256  # engine/arg_utils.py 0.6-0.7: max_num_seqs when not set
V0_LONG = 32768  # above this max_model_len, `vllm serve` turns chunked prefill on (arg_utils, 0.6-0.7)
V0_SAMPLER_BYTES = 32  # per logit at the sampler's peak, counted from V0's sampler.py (below)


def version_tuple(version: str | None) -> tuple[int, ...] | None:
    """'0.7.2' / 'v0.6.4.post1' -> (0, 7, 2); None where no release is given or it does not read."""
    import re

    m = re.match(r"v?(\d+)\.(\d+)(?:\.(\d+))?", (version or "").strip())
    return tuple(int(g or 0) for g in m.groups()) if m else None


def is_v0(version: str | None) -> bool:
    """vLLM before 0.8 ran the V0 engine by default (0.8 made V1 the default)."""
    parsed = version_tuple(version)
    return parsed is not None and parsed < (0, 8)


def v0_batch(length: int, version: str | None, chunked_default: bool) -> tuple[int, int, str]:
    """(max_num_batched_tokens, max_num_seqs, why) as V0 defaults them (config.py SchedulerConfig, 0.6-0.7):
    without chunked prefill the profile batch is the whole max(max_model_len, 2048); `vllm serve` turns
    chunked prefill on above 32,768 tokens (not for multimodal or sliding-window models), whose batch
    is 512 tokens (0.6) or 2048 (0.7)."""
    if chunked_default and length > V0_LONG:
        chunk = 512 if (version_tuple(version) or (0, 7)) < (0, 7) else 2048
        return chunk, V0_SEQS, f"V0 {version or ''}: chunked prefill on above {V0_LONG:,} tokens, batch {chunk}"
    return max(length, 2048), V0_SEQS, f"V0 {version or ''}: no chunked prefill, the batch is max(max_model_len, 2048)"


def activation_peak_v0(cfg: TextConfig, tokens: int, seqs: int, tp: int, dtype_bytes: int) -> Estimate:
    """V0's profile run (worker/model_runner.py profile_run, 0.6-0.7): `tokens` tokens in `seqs` prompts,
    then, on the driver rank, the sampler on one row of logits per prompt.

    The forward's peak is at the MLP's down projection (Llama/Qwen2 decoder layer): the residual and the
    normed input (hidden each), gate_up (2 x intermediate / TP) still held by the MLP while its activation
    output (intermediate / TP) feeds down_proj's output (hidden), plus with TP > 1 the all-reduce's
    out-of-place result (hidden). The sampler (model_executor/layers/sampler.py) holds per logit the
    fp16 logits (2 B), their fp32 copy (4), and in top-k/top-p (the profile run enables both) the
    sorted values (4), their int64 indices (8), two masks (2), softmax (4), cumsum (4) and the
    scattered result (4): 32 B.
    """
    hidden = cfg.number("hidden_size")
    tp = max(1, tp)
    inter = cfg.number("intermediate_size")
    if cfg.number("num_experts"):
        k = cfg.number("num_experts_per_tok", cfg.number("experts_per_token", 2)) or 2
        inter = max(inter, k * (cfg.number("moe_intermediate_size", inter) or inter))
    reduce = hidden if tp > 1 else 0
    per_token = 3 * inter // tp + 3 * hidden + reduce
    forward = tokens * per_token * dtype_bytes
    vocab = cfg.number("vocab_size")
    held = tokens * hidden * dtype_bytes
    sampler = seqs * vocab * V0_SAMPLER_BYTES
    return Estimate(
        max(forward, held + sampler),
        (
            f"estimated (V0): the larger of a forward pass of {tokens:,} tokens x ({3 * inter // tp:,} MLP + "
            f"{3 * hidden + reduce:,} hidden) x {dtype_bytes} B, and the driver's sampler on {seqs} rows x "
            f"{vocab:,} vocab x {V0_SAMPLER_BYTES} B beside the forward's {tokens:,} x {hidden:,} output"
        ),
    )
