"""Parameters and weight bytes per GPU, from the checkpoint's own size or counted from config.json.

The checkpoint's size (safetensors index or headers) is what vLLM loads, quantized or not,
so it is preferred; config.json arithmetic is the fallback (labelled estimated). Counting
covers the matrices (embeddings, attention incl. MLA, dense/MoE MLP, Mamba mixers); norms
and biases are left out (under 0.1%). Quantized checkpoints keep embeddings and the LM head
in the model dtype; their linear layers take bits/8 bytes plus group scales. Tensor and
pipeline parallelism split the weights evenly per GPU (vocab-parallel embeddings included).
"""

from __future__ import annotations

from msgspec import Struct

from triage.plan.spec import DTYPE_BYTES, TextConfig

_TIED_BY_DEFAULT = ("gemma", "gemma2", "gemma3", "gemma3_text")


class ParamCount(Struct):
    embedding: int
    lm_head: int
    linear: int  # every other matrix
    experts: int  # the part of `linear` in routed experts (MXFP4 quantizes only these)

    @property
    def total(self) -> int:
        return self.embedding + self.lm_head + self.linear


class Weights(Struct):
    parameters: int
    parameters_source: str
    total_bytes: int
    per_gpu_bytes: int
    source: str
    estimated: bool
    spread: tuple[float, float] = (0.97, 1.03)  # the interval the checks take an estimate in, as factors


# A config count of an unquantized text model leaves out only norms, biases and buffers, so
# vLLM's printed figure is at or above it: real starts printed 0.1-1.2% more than the count
# (tests/plan/test_plan_real_starts.py). Quantized layouts and vision encoders are cruder: +-3%.
COUNTED_SPREAD = (0.99, 1.02)


def _attention(cfg: TextConfig) -> int:
    hidden, heads = cfg.number("hidden_size"), cfg.number("num_attention_heads")
    if cfg.get("kv_lora_rank") is not None:  # MLA
        rank, rope = cfg.number("kv_lora_rank"), cfg.number("qk_rope_head_dim")
        nope, v = cfg.number("qk_nope_head_dim"), cfg.number("v_head_dim")
        q_rank = cfg.number("q_lora_rank")
        q = hidden * q_rank + q_rank * heads * (nope + rope) if q_rank else hidden * heads * (nope + rope)
        return q + hidden * (rank + rope) + rank * heads * (nope + v) + heads * v * hidden
    head_dim, kv = cfg.head_dim(), cfg.kv_heads()
    return 2 * hidden * heads * head_dim + 2 * hidden * kv * head_dim


def _moe_layer(cfg: TextConfig, i: int) -> bool:
    if not cfg.number("num_experts"):
        return False
    if cfg.get("first_k_dense_replace") is not None:
        return i >= cfg.number("first_k_dense_replace")
    if cfg.get("expert_layer_period"):
        return i % cfg.number("expert_layer_period") == cfg.number("expert_layer_offset")
    only = cfg.get("mlp_only_layers")
    if isinstance(only, list) and i in only:
        return False
    step = cfg.number("decoder_sparse_step", 1) or 1
    return (i + 1) % step == 0


# MLPs of two matrices (up, down: fc1/fc2, c_fc/c_proj) rather than gate + up + down
_TWO_MATRIX_MLP = ("phi", "gpt2", "gpt_bigcode", "gpt_neox", "gptj", "falcon", "opt", "bloom", "starcoder2", "mpt")


def _mlp(cfg: TextConfig, i: int) -> tuple[int, int]:
    """(all MLP params, routed-expert params) of layer i."""
    hidden, inter = cfg.number("hidden_size"), cfg.number("intermediate_size")
    mats = 2 if cfg.model_type in _TWO_MATRIX_MLP else 3
    if not _moe_layer(cfg, i):
        return mats * hidden * cfg.number("intermediate_size_mlp", inter), 0  # Llama 4's dense layers are wider
    experts = cfg.number("num_experts")
    expert_inter = cfg.number("moe_intermediate_size", inter) or inter
    routed = experts * 3 * hidden * expert_inter
    shared = cfg.number("n_shared_experts") * 3 * hidden * expert_inter
    shared += 3 * hidden * cfg.number("shared_expert_intermediate_size")
    if cfg.model_type.startswith("llama4"):  # one shared expert of intermediate_size beside the routed ones
        shared += 3 * hidden * inter
    return routed + shared + hidden * experts, routed


def _mamba(cfg: TextConfig) -> int:
    hidden = cfg.number("hidden_size")
    inner = cfg.number("mamba_intermediate_size", cfg.number("mamba_expand", 2) * hidden)
    d_state = cfg.number("mamba_d_state", 16)
    dt_rank = cfg.number("mamba_dt_rank", -(-hidden // 16))
    return 3 * hidden * inner + inner * (dt_rank + 2 * d_state) + dt_rank * inner


def _pooling(cfg: TextConfig) -> bool:
    """A bare `*Model` architecture (MistralModel, Qwen2Model, BertModel): vLLM serves it as a
    pooling model, whose adapter deletes the LM head it built (models/adapters.py, 0.9), so no
    head is loaded or counted."""
    arch = cfg.architecture
    return arch.endswith("Model") and not arch.endswith(("ForCausalLM", "LMHeadModel"))


def count(cfg: TextConfig, layer_kinds: list[str] | None = None) -> ParamCount:
    """Matrix parameters from config.json (estimated: norms, biases and vision towers left out)."""
    vocab, hidden = cfg.number("vocab_size"), cfg.number("hidden_size")
    layers = cfg.number("num_hidden_layers")
    tied = cfg.get("tie_word_embeddings", cfg.model_type in _TIED_BY_DEFAULT) or _pooling(cfg)
    linear = experts = 0
    for i in range(layers):
        kind = layer_kinds[i] if layer_kinds and i < len(layer_kinds) else "attention"
        linear += _mamba(cfg) if kind == "mamba" else _attention(cfg) if kind != "mlp" else 0
        mlp, routed = _mlp(cfg, i)
        linear, experts = linear + mlp, experts + routed
    return ParamCount(vocab * hidden, 0 if tied else vocab * hidden, linear, experts)


def encoder_params(cfg: TextConfig) -> int:
    """A multimodal checkpoint's vision encoder (ViT-style `vision_config`) and its projector, estimated:
    per layer 4 x hidden^2 (attention) + 2 x hidden x intermediate (MLP)."""
    vision = cfg.top.get("vision_config") if cfg.multimodal else None
    if not isinstance(vision, dict):
        return 0
    try:
        hidden, inter = int(vision.get("hidden_size") or 0), int(vision.get("intermediate_size") or 0)
        layers = int(vision.get("num_hidden_layers") or vision.get("depth") or 0)
    except (TypeError, ValueError):
        return 0
    if not 0 < layers <= 1024:
        return 0
    text_hidden = cfg.number("hidden_size")
    return layers * (4 * hidden * hidden + 2 * hidden * inter) + hidden * text_hidden + text_hidden * text_hidden


def quant_method(cfg: TextConfig, flag: str | None) -> tuple[str | None, int | None, int]:
    """(method, weight bits, group size) from quantization_config, else the --quantization flag."""
    q = cfg.quantization()
    method = str(q.get("quant_method") or "").lower() or (flag.lower() if flag else None)
    bits = q.get("bits") or q.get("w_bit") or q.get("num_bits")
    group = q.get("group_size") or q.get("q_group_size") or 128
    for group_cfg in (q.get("config_groups") or {}).values():  # compressed-tensors
        weights = (group_cfg or {}).get("weights") or {}
        bits = bits or weights.get("num_bits")
        group = weights.get("group_size") or group
        if weights.get("type") == "float" and weights.get("num_bits") == 8:
            method = "fp8"
    if q.get("load_in_4bit"):
        bits = 4
    if method and "fp8" in method:
        bits = 8
    return method, int(bits) if bits else None, int(group) if isinstance(group, int) and group > 0 else 128


def _quantized_bytes(params: ParamCount, method: str, bits: int | None, group: int, dtype_bytes: int) -> int:
    dense = (params.embedding + params.lm_head) * dtype_bytes
    if method == "mxfp4":
        return dense + (params.linear - params.experts) * dtype_bytes + params.experts * 17 // 32
    bits = bits or 4
    scales = (16 + bits) / (group * bits) if bits < 8 else 0.0  # one fp16 scale + a zero per group
    return dense + int(params.linear * bits / 8 * (1 + scales))


def weights(
    cfg: TextConfig,
    files_bytes: int | None,
    files_source: str | None,
    header_params: int | None,
    model_dtype: str,
    quant_flag: str | None,
    world: int,
    layer_kinds: list[str] | None,
) -> Weights:
    """Total and per-GPU weight bytes; `world` = tp x pp (the GPUs that share the weights)."""
    params = count(cfg, layer_kinds)
    method, bits, group = quant_method(cfg, quant_flag)
    dtype_bytes = DTYPE_BYTES[model_dtype]
    encoder = encoder_params(cfg)
    n_params, p_source = params.total + encoder, "counted from config.json (matrices only)"
    if header_params and not method:
        n_params, p_source = header_params, "safetensors headers"
    if files_bytes:
        total, source, estimated = files_bytes, files_source or "checkpoint files", False
        ckpt = cfg.checkpoint_dtype()
        if not cfg.quantization() and ckpt in DTYPE_BYTES and DTYPE_BYTES[ckpt] != dtype_bytes:
            total = files_bytes * dtype_bytes // DTYPE_BYTES[ckpt]
            source += f", cast from {ckpt} to {model_dtype}"
        elif method and not cfg.quantization():  # online quantization of a full-precision checkpoint
            total, estimated = _quantized_bytes(params, method, bits, group, dtype_bytes), True
            source = f"estimated: {method} applied at load to {n_params:,} parameters"
    elif method:
        total, estimated = _quantized_bytes(params, method, bits, group, dtype_bytes), True
        source = (
            f"estimated: {params.total:,} parameters, linear layers {method} {bits or 4}-bit, "
            f"embeddings in {model_dtype}"
        )
    else:
        total, estimated = params.total * dtype_bytes, True
        source = f"estimated: {params.total:,} parameters x {dtype_bytes} B ({model_dtype})"
    if encoder and not files_bytes:
        total += encoder * dtype_bytes
        source += f", plus a {encoder:,}-parameter vision encoder in {model_dtype} (from vision_config)"
    counted = estimated and not method and not (encoder and not files_bytes)
    spread = COUNTED_SPREAD if counted else (0.97, 1.03)
    return Weights(n_params, p_source, total, -(-total // max(1, world)), source, estimated, spread)
