"""KV cache bytes per token per GPU, by architecture family, the way vLLM (V1) lays the cache out.

- Standard and grouped-query attention: 2 (K and V) x kv_heads x head_dim x dtype bytes per
  layer; the KV heads are split by tensor parallelism but never below one per GPU
  (`max(1, kv_heads // tp)`: vLLM replicates them).
- MLA (DeepSeek V2/V3, Kimi K2): one latent vector per token and layer,
  `kv_lora_rank + qk_rope_head_dim` elements, the same on every GPU (not split by TP).
- Sliding-window / global mixes (Gemma 2/3, gpt-oss, a `layer_types` list): every layer has
  the same page size, so vLLM groups layers into `group_size = fewest layers of one kind`
  and counts tokens per group: the printed "GPU KV cache size" divides the pool by
  per-layer bytes x group_size x number of groups, which can exceed the layer count (Gemma 3:
  10 x 7 = 70 slots for 62 layers).
- Hybrid attention/Mamba: attention layers cost per token; Mamba layers hold a fixed state per
  sequence (conv + SSM state), reported apart.
Pipeline parallelism gives each GPU the layers of one stage (the largest, ceil(layers / pp)).
"""

from __future__ import annotations

import math

from msgspec import Struct, field

from triage.plan.spec import TextConfig

MLA_TYPES = ("deepseek_v2", "deepseek_v3", "deepseek_mtp", "kimi_k2")
_PATTERN_DEFAULTS = {"gemma3": 6, "gemma3_text": 6, "cohere2": 4}


class LayerGroup(Struct):
    kind: str  # "full" | "sliding" | "mla" | "mamba"
    layers: int  # on the busiest GPU (one pipeline stage)
    bytes_per_token: int = 0  # per layer, per GPU (0 for mamba)
    window: int | None = None
    state_bytes_per_sequence: int = 0  # per layer, per GPU (mamba only)


class KvLayout(Struct):
    family: str
    groups: list[LayerGroup]
    bytes_per_token: int  # the per-GPU bytes vLLM's printed KV token count divides the pool by
    attention_bytes_per_token: int  # the plain sum over attention layers
    state_bytes_per_sequence: int = 0
    formula: str = ""
    notes: list[str] = field(default_factory=list)
    min_block_size: int = 0  # vLLM raises the block size to this (hybrid Mamba models)


def _stage(layers: int, pp: int) -> int:
    return math.ceil(layers / max(1, pp))


def _layer_kinds(cfg: TextConfig, layers: int) -> list[str]:
    """'full' / 'sliding' per layer from `layer_types`, the family's pattern, or a global window."""
    types = cfg.get("layer_types")
    if isinstance(types, list) and len(types) == layers and all(isinstance(t, str) for t in types):
        return ["sliding" if "sliding" in t else "full" for t in types]
    nope = cfg.get("no_rope_layers")  # Llama 4: RoPE layers attend in local chunks, NoPE (0) layers globally
    if cfg.get("attention_chunk_size") and isinstance(nope, list) and len(nope) == layers:
        return ["chunked" if flag else "full" for flag in nope]
    window = cfg.get("sliding_window")
    mt = cfg.model_type
    if not window:
        return ["full"] * layers
    if mt == "gemma2":
        return ["sliding" if i % 2 == 0 else "full" for i in range(layers)]
    if mt == "gpt_oss":
        return ["sliding" if i % 2 == 0 else "full" for i in range(layers)]
    if mt in _PATTERN_DEFAULTS:
        pattern = cfg.number("sliding_window_pattern", _PATTERN_DEFAULTS[mt]) or _PATTERN_DEFAULTS[mt]
        return ["full" if (i + 1) % pattern == 0 else "sliding" for i in range(layers)]
    if mt in ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe") and not cfg.get("use_sliding_window"):
        return ["full"] * layers
    return ["sliding"] * layers  # Mistral v0.1, Phi-3: one window on every layer


def _grouped_slots(counts: list[int]) -> int:
    """vLLM's hybrid grouping: group_size = min count; slots = group_size x number of groups."""
    counts = [c for c in counts if c > 0]
    if len(counts) <= 1:
        return sum(counts)
    size = min(counts)
    return size * sum(math.ceil(c / size) for c in counts)


def attention_layout(cfg: TextConfig, tp: int, pp: int, kv_bytes: int) -> KvLayout:
    layers = cfg.number("num_hidden_layers")
    total_heads, head_dim = cfg.kv_heads(), cfg.head_dim()
    heads = max(1, total_heads // max(1, tp))
    per_layer = 2 * heads * head_dim * kv_bytes
    kinds = _layer_kinds(cfg, layers)
    local = "chunked" if "chunked" in kinds else "sliding"
    n_sliding = _stage(kinds.count(local), pp)
    n_full = _stage(kinds.count("full"), pp)
    groups = [LayerGroup("full", n_full, per_layer)] if n_full else []
    if n_sliding:
        window = cfg.number("attention_chunk_size" if local == "chunked" else "sliding_window")
        groups.append(LayerGroup(local, n_sliding, per_layer, window=window))
    slots = _grouped_slots([n_full, n_sliding])
    family = "mha" if total_heads == cfg.number("num_attention_heads") else "mqa" if total_heads == 1 else "gqa"
    split = f"max(1, {total_heads} // tp {tp}) = {heads}" if tp > 1 else f"{heads}"
    formula = f"2 x {split} kv heads x {head_dim} head_dim x {kv_bytes} B = {per_layer} B per layer"
    notes = []
    if n_full and n_sliding:
        family += "+sliding-window" if local == "sliding" else "+chunked-local"
        formula += (
            f"; {n_full} full + {n_sliding} {local} layers, grouped as vLLM does: "
            f"{slots} layer slots x {per_layer} B = {per_layer * slots} B"
        )
        notes.append(
            "sliding-window layers keep only their window per sequence; vLLM's token count "
            "is per group of layers, so long sequences fit more than the count suggests"
        )
    else:
        formula += f" x {slots} layers = {per_layer * slots} B"
    if total_heads < tp:
        notes.append(f"{total_heads} KV heads over {tp} GPUs: each GPU holds one replicated head")
    return KvLayout(family, groups, per_layer * slots, per_layer * (n_full + n_sliding), formula=formula, notes=notes)


def mla_layout(cfg: TextConfig, pp: int, kv_bytes: int) -> KvLayout:
    layers = _stage(cfg.number("num_hidden_layers"), pp)
    rank, rope = cfg.number("kv_lora_rank"), cfg.number("qk_rope_head_dim")
    per_layer = (rank + rope) * kv_bytes
    formula = (
        f"MLA: ({rank} kv_lora_rank + {rope} qk_rope_head_dim) x {kv_bytes} B = {per_layer} B per layer "
        f"x {layers} layers = {per_layer * layers} B (one latent per token, not split by TP)"
    )
    return KvLayout(
        "mla", [LayerGroup("mla", layers, per_layer)], per_layer * layers, per_layer * layers, formula=formula
    )


def mamba_kinds(cfg: TextConfig, layers: int) -> list[str] | None:
    """'attention' / 'mamba' per layer for the hybrid families vLLM serves, else None."""
    period, offset = cfg.get("attn_layer_period"), cfg.get("attn_layer_offset")
    if period:  # Jamba
        return ["attention" if i % int(period) == int(offset or 0) else "mamba" for i in range(layers)]
    pattern = cfg.get("hybrid_override_pattern")  # Nemotron-H: M = mamba, * = attention, - = MLP
    if isinstance(pattern, str) and pattern:
        return ["attention" if c == "*" else "mamba" if c == "M" else "mlp" for c in pattern]
    for key in ("layers_block_type", "layer_types"):
        types = cfg.get(key)
        if isinstance(types, list) and any("mamba" in str(t) or "linear" in str(t) for t in types):
            return ["mamba" if "mamba" in str(t) or "linear" in str(t) else "attention" for t in types]
    return None


def _mamba_state(cfg: TextConfig, tp: int, state_bytes: int) -> tuple[int, str]:
    """One Mamba layer's state per sequence per GPU, as vLLM's MambaStateShapeCalculator shapes it."""
    hidden, tp = cfg.number("hidden_size"), max(1, tp)
    d_state = cfg.number("mamba_d_state", cfg.number("ssm_state_size", cfg.number("state_size", 16)))
    d_conv = cfg.number("mamba_d_conv", cfg.number("conv_kernel", 4))
    expand = cfg.number("mamba_expand", cfg.number("expand", 2))
    inner = cfg.number("mamba_intermediate_size", expand * hidden)
    v_heads = cfg.number("linear_num_value_heads")
    if v_heads:  # gated delta-net linear attention: conv over q, k, v; a key x value state per value head
        k_heads, k_dim = cfg.number("linear_num_key_heads"), cfg.number("linear_key_head_dim")
        v_dim, kernel = cfg.number("linear_value_head_dim"), cfg.number("linear_conv_kernel_dim", 4)
        conv_dim = (2 * k_heads * k_dim + v_heads * v_dim) // tp
        conv, ssm = (kernel - 1) * conv_dim, v_heads // tp * k_dim * v_dim
        return (conv + ssm) * state_bytes, (
            f"linear attention: conv {kernel - 1} x {conv_dim} + state "
            f"{v_heads // tp} heads x {k_dim} x {v_dim} (estimated)"
        )
    heads = cfg.number("mamba_num_heads", cfg.number("mamba_n_heads", 0))
    if heads:  # Mamba2: conv over x, B and C (groups replicated up to TP), SSM state per head
        groups = cfg.number("mamba_n_groups", cfg.number("n_groups", 1)) or 1
        groups += 0 if groups % tp == 0 else tp - groups
        head_dim = cfg.number("mamba_head_dim", cfg.number("mamba_d_head", inner // heads))
        conv_dim = (inner + 2 * groups * d_state) // tp
        conv, ssm = (d_conv - 1) * conv_dim, heads // tp * head_dim * d_state
        return (conv + ssm) * state_bytes, (
            f"Mamba2: conv {d_conv - 1} x {conv_dim} + SSM {heads // tp} heads x {head_dim} x {d_state}"
        )
    inner //= tp
    conv, ssm = (d_conv - 1) * inner, inner * d_state
    return (conv + ssm) * state_bytes, f"Mamba: conv {d_conv - 1} x {inner} + SSM {inner} x {d_state}"


def mamba_layout(cfg: TextConfig, kinds: list[str], tp: int, pp: int, kv_bytes: int, state_bytes: int) -> KvLayout:
    """Attention per token, Mamba state per sequence; vLLM pads both to one page and groups them."""
    heads = max(1, cfg.kv_heads() // max(1, tp))
    per_layer = 2 * heads * cfg.head_dim() * kv_bytes
    n_attn, n_mamba = _stage(kinds.count("attention"), pp), _stage(kinds.count("mamba"), pp)
    state, how = _mamba_state(cfg, tp, state_bytes)
    # vLLM 0.10 (models/config.py HybridAttentionMambaModelConfig): the attention block grows to whole
    # multiples of 16 tokens until its page holds a Mamba state; the Mamba page is padded to it.
    block = 16 * -(-state // (16 * per_layer)) if per_layer else 16
    slots = _grouped_slots([n_attn, n_mamba])
    groups = [LayerGroup("full", n_attn, per_layer), LayerGroup("mamba", n_mamba, 0, state_bytes_per_sequence=state)]
    formula = (
        f"attention: 2 x {heads} kv heads x {cfg.head_dim()} x {kv_bytes} B = {per_layer} B per layer, "
        f"x {n_attn} layers = {per_layer * n_attn} B per token; {how} = {state} B per Mamba layer and "
        f"sequence; block size {block} so one page holds a state; {n_attn} attention + {n_mamba} Mamba "
        f"layers grouped as vLLM does: {slots} layer slots x {per_layer} B = {per_layer * slots} B"
    )
    notes = [
        "hybrid model: the Mamba layers hold a fixed state per sequence, not per token; vLLM's token "
        "count is per group of layers, so a sequence costs attention bytes per token plus one page per "
        "Mamba group"
    ]
    return KvLayout(
        "hybrid-mamba",
        groups,
        per_layer * slots,
        per_layer * n_attn,
        state * n_mamba,
        formula=formula,
        notes=notes,
        min_block_size=block,
    )


def max_memory_usage(layout: KvLayout, max_model_len: int, block_size: int, batched_tokens: int) -> int:
    """KV bytes one request of max_model_len needs on one GPU: vLLM's max_memory_usage_bytes summed over layers.

    Full attention and MLA: cdiv(len, block) pages; a sliding window: the window - 1 plus one
    scheduled batch, capped at len, plus one page; a Mamba layer: one page (its padded state).
    """
    total = 0
    for g in layout.groups:
        page = block_size * (g.bytes_per_token or _attention_per_layer(layout))
        if g.kind == "mamba":
            total += g.layers * max(page, g.state_bytes_per_sequence)
        elif g.kind == "sliding" and g.window:
            tokens = min(g.window - 1 + batched_tokens, max_model_len)
            total += g.layers * (-(-tokens // block_size) + 1) * page
        elif g.kind == "chunked" and g.window:
            tokens = min(g.window + batched_tokens, max_model_len)
            total += g.layers * -(-tokens // block_size) * page
        else:
            total += g.layers * -(-max_model_len // block_size) * page
    return total


def _attention_per_layer(layout: KvLayout) -> int:
    return max((g.bytes_per_token for g in layout.groups), default=0)


def uniform(layout: KvLayout) -> bool:
    """One kind of layer: vLLM's need then grows exactly with the length (whole blocks)."""
    return len({g.kind for g in layout.groups}) == 1 and layout.groups[0].kind not in ("sliding", "chunked")


def kv_layout(cfg: TextConfig, tp: int, pp: int, kv_bytes: int, model_bytes: int) -> KvLayout:
    """The family's layout for one GPU; `kv_bytes` per cached element, `model_bytes` for Mamba state."""
    if cfg.model_type in MLA_TYPES and cfg.get("kv_lora_rank") is not None:
        return mla_layout(cfg, pp, kv_bytes)
    layers = cfg.number("num_hidden_layers")
    kinds = mamba_kinds(cfg, layers)
    if kinds is not None and "mamba" in kinds:
        return mamba_layout(cfg, kinds, tp, pp, kv_bytes, model_bytes)
    if not layers or not cfg.number("num_attention_heads"):
        return KvLayout(
            "attention-free",
            [],
            0,
            0,
            formula="no attention layers in config.json",
            notes=["config.json gives no layer or head count"],
        )
    return attention_layout(cfg, tp, pp, kv_bytes)
