"""Estimates of the memory vLLM measures at startup and a config cannot state exactly.

Each figure comes with the assumption it rests on, so a plan can label it. They are inputs
to the memory model (triage.memory), not its arithmetic:
- the activation peak of the profile run: V1 runs one forward pass of
  max_num_batched_tokens tokens, then the sampler on max_num_seqs rows of logits;
- the non-torch memory that grows during the profile (cuBLAS workspaces; NCCL buffers
  with tensor parallelism);
- CUDA graph memory, captured after the KV cache, outside the budget (none with
  --enforce-eager);
- the worker's own CUDA context, taken from free memory before the startup check.
The defaults of max_num_batched_tokens and max_num_seqs are vLLM 0.10's for `vllm serve`
(engine/arg_utils.py: 8192/1024 on GPUs of 70 GiB or more other than A100, else 2048/256).
"""

from __future__ import annotations

from dataclasses import dataclass

from triage.plan.spec import TextConfig
from triage.units import GiB, MiB

NON_TORCH_SINGLE = 150 * MiB
NON_TORCH_TP = 600 * MiB
GRAPHS_BASE = 100 * MiB
GRAPHS_PER_BILLION = 40 * MiB  # per billion parameters on the GPU (0.38 GiB printed for an 8B model)
GRAPHS_CAP = 3 * GiB // 2
CUDA_CONTEXT = 450 * MiB


@dataclass
class Estimate:
    bytes: int
    assumption: str


def default_batch(total_bytes: int, gpu_name: str) -> tuple[int, int, str]:
    """(max_num_batched_tokens, max_num_seqs, why) as `vllm serve` 0.10 defaults them."""
    if total_bytes >= 70 * GiB and "a100" not in gpu_name.lower():
        return 8192, 1024, "vLLM 0.10 `vllm serve` defaults on GPUs >= 70 GiB (not A100)"
    return 2048, 256, "vLLM 0.10 `vllm serve` defaults on GPUs under 70 GiB (and A100)"


def activation_peak(cfg: TextConfig, tokens: int, seqs: int, tp: int, dtype_bytes: int) -> Estimate:
    """The profile run's torch peak: the widest layer's intermediates for `tokens`, plus the sampler's logits."""
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
    sampler = seqs * vocab * 4 * 3 // tp if tp > 1 else seqs * vocab * 4 * 3
    return Estimate(
        forward + sampler,
        (
            f"estimated: a forward pass of {tokens:,} tokens x ({3 * inter // tp:,} MLP + {qkv // tp:,} QKV + "
            f"{4 * hidden:,} hidden) x {dtype_bytes} B, plus {seqs} sampler rows x {vocab:,} vocab x 4 B x 3 copies"
        ),
    )


def non_torch(tp: int) -> Estimate:
    if tp > 1:
        return Estimate(NON_TORCH_TP, "estimated: ~0.6 GiB of cuBLAS workspaces and NCCL buffers with TP")
    return Estimate(NON_TORCH_SINGLE, "estimated: ~0.15 GiB of cuBLAS workspaces on one GPU")


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
