"""What loading a checkpoint allocates beyond its tensors' bytes, per GPU: vLLM's "weights" figure.

vLLM measures the weights as the growth of `torch.cuda.max_memory_allocated` around model
loading (`DeviceMemoryProfiler`: V0 0.6/0.7 `worker/model_runner.py: load_model`, V1
`gpu_model_runner.py: load_model`), so its "Loading model weights took" / "Model loading
took" counts what PyTorch's CUDA caching allocator hands out, not a checkpoint's bytes:
- each tensor is a block of the allocator (c10/cuda/CUDACachingAllocator.cpp): sizes round up
  to 512 B; a tensor of 10 MiB or more gets a segment rounded up to 2 MiB, and the rest of that
  segment is split off only when more than 1 MiB (kSmallSize) is left, so a 35 MiB tensor
  holds a 36 MiB block;
- tensor parallelism splits the vocabulary (padded to a multiple of 64, `pad_vocab_size`), the
  attention heads and the MLP, but every rank keeps whole norms (RMSNorm weights);
- the rotary embedding's `cos_sin_cache` buffer, max_position x rotary_dim in the model dtype
  (one per model: `get_rope` caches it), is no checkpoint tensor.
These are exact for the layers counted here (dense or MoE decoders with standard attention);
other layers' blocks are left as their bytes.
"""

from __future__ import annotations

from triage.plan.spec import TextConfig
from triage.units import MiB

BLOCK = 512  # kMinBlockSize
SMALL = 1 * MiB  # kSmallSize: at most this left in a segment is not split off
LARGE = 10 * MiB  # kMinLargeAlloc: from here segments are rounded to kRoundLarge
ROUND_LARGE = 2 * MiB
VOCAB_PAD = 64  # vocab_parallel_embedding.DEFAULT_VOCAB_PADDING_SIZE
# families whose positions are learned or ALiBi: no rotary cache
_NO_ROPE = ("gpt2", "gpt_bigcode", "opt", "bloom", "mpt", "bert", "roberta", "xlm-roberta", "t5", "whisper")


def block_bytes(size: int) -> int:
    """The bytes the caching allocator's block for a tensor of `size` bytes counts as allocated."""
    rounded = max(BLOCK, -(-size // BLOCK) * BLOCK)
    if rounded < LARGE:
        return rounded
    segment = -(-rounded // ROUND_LARGE) * ROUND_LARGE
    return segment if segment - rounded <= SMALL else rounded


def _rank_matrices(cfg: TextConfig, tp: int) -> list[tuple[int, int]]:
    """(elements per rank, how many) for the large matrices of a dense or MoE decoder at TP `tp`."""
    hidden, layers = cfg.number("hidden_size"), cfg.number("num_hidden_layers")
    heads, kv, head_dim = cfg.number("num_attention_heads"), cfg.kv_heads(), cfg.head_dim()
    vocab = -(-cfg.number("vocab_size") // VOCAB_PAD) * VOCAB_PAD // tp
    tied = bool(cfg.get("tie_word_embeddings", False))
    found = [(vocab * hidden, 1 if tied else 2)]
    q, kv_rank = heads // tp, max(1, kv // tp)
    found += [((q + 2 * kv_rank) * head_dim * hidden, layers), (hidden * q * head_dim, layers)]
    experts = cfg.number("num_experts")
    if experts:
        inter = (cfg.number("moe_intermediate_size") or cfg.number("intermediate_size")) // tp
        found += [(experts * 2 * inter * hidden, layers), (experts * inter * hidden, layers)]
    else:
        inter = cfg.number("intermediate_size") // tp
        found += [(2 * inter * hidden, layers), (inter * hidden, layers)]
    return found


def rope_cache_bytes(cfg: TextConfig, dtype_bytes: int) -> int:
    """The rotary embedding's cos/sin cache: max_position x rotary_dim elements (vLLM's get_rope)."""
    if cfg.model_type in _NO_ROPE or cfg.get("alibi"):
        return 0
    positions = cfg.number("max_position_embeddings")
    rope = cfg.get("rope_scaling") or {}
    kind = str(rope.get("rope_type") or rope.get("type") or "") if isinstance(rope, dict) else ""
    if kind == "yarn":  # YaRN's cache spans the scaled length
        positions = int(positions * float(rope.get("factor") or 1.0))
    rotary = int(cfg.head_dim() * float(cfg.get("partial_rotary_factor", 1.0) or 1.0))
    return positions * rotary * dtype_bytes


def load_overhead(cfg: TextConfig, dtype_bytes: int, tp: int, quantized: bool) -> tuple[int, str]:
    """Bytes per GPU that vLLM's weights figure holds beyond the checkpoint's size / TP, and how.

    Only for the layers counted here: MLA, Mamba and quantized layouts keep the rope cache alone.
    """
    tp = max(1, tp)
    rope = rope_cache_bytes(cfg, dtype_bytes)
    if quantized or cfg.get("kv_lora_rank") is not None or cfg.get("mamba_d_state") is not None:
        return rope, f"+ {rope / MiB:.1f} MiB rotary cache"
    waste = sum(count * (block_bytes(n * dtype_bytes) - n * dtype_bytes) for n, count in _rank_matrices(cfg, tp))
    norms = (2 * cfg.number("num_hidden_layers") + 1) * cfg.number("hidden_size") * dtype_bytes
    replicated = norms - norms // tp
    vocab = cfg.number("vocab_size")
    padded = -(-vocab // VOCAB_PAD) * VOCAB_PAD
    tied = bool(cfg.get("tie_word_embeddings", False))
    padding = (padded - vocab) * cfg.number("hidden_size") * dtype_bytes * (1 if tied else 2) // tp
    total = rope + waste + replicated + padding
    return total, (
        f"+ {total / MiB:.1f} MiB as PyTorch's allocator holds it ({rope / MiB:.1f} rotary cache, "
        f"{waste / MiB:.1f} block rounding, {(replicated + padding) / MiB:.1f} norms kept whole and vocab padding)"
    )
