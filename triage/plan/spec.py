"""A model's config.json read the way vLLM reads it: the text model's fields, with defaults.

vLLM sizes the language model of a multimodal checkpoint from its nested `text_config`
(its `hf_text_config`); some of those nested configs are sparse and lean on the
transformers defaults of their `model_type`, so the few defaults that matter are here
(facts of transformers' config classes). Every key lookup goes through `TextConfig.get`,
which also accepts the alternative names different families use.
"""

from __future__ import annotations

from typing import Any

from msgspec import Struct

# transformers' defaults for config classes that multimodal checkpoints nest without repeating.
_DEFAULTS: dict[str, dict[str, Any]] = {
    "llama": {
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "vocab_size": 32000,
        "max_position_embeddings": 2048,
        "tie_word_embeddings": False,
    },
    "mistral": {
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 32000,
        "max_position_embeddings": 131072,
        "tie_word_embeddings": False,
    },
    # transformers 5.x configuration_gemma*.py: head_dim 256 whatever hidden / heads gives
    "gemma": {
        "hidden_size": 3072,
        "intermediate_size": 24576,
        "num_hidden_layers": 28,
        "num_attention_heads": 16,
        "num_key_value_heads": 16,
        "head_dim": 256,
        "vocab_size": 256000,
        "max_position_embeddings": 8192,
        "tie_word_embeddings": True,
    },
    "gemma2": {
        "hidden_size": 2304,
        "intermediate_size": 9216,
        "num_hidden_layers": 26,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "vocab_size": 256000,
        "max_position_embeddings": 8192,
        "sliding_window": 4096,
        "tie_word_embeddings": True,
    },
    "gemma3_text": {
        "hidden_size": 2304,
        "intermediate_size": 9216,
        "num_hidden_layers": 26,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "vocab_size": 262208,
        "max_position_embeddings": 131072,
        "sliding_window": 4096,
        "sliding_window_pattern": 6,
        "tie_word_embeddings": True,
    },
    "qwen3": {"head_dim": 128, "vocab_size": 151936, "max_position_embeddings": 32768, "tie_word_embeddings": False},
    "qwen3_moe": {"head_dim": 128, "vocab_size": 151936, "max_position_embeddings": 32768},
    "gpt_oss": {
        "head_dim": 64,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "sliding_window": 128,
        "num_local_experts": 128,
        "num_experts_per_tok": 4,
        "vocab_size": 201088,
    },
    "llama4_text": {
        "head_dim": 128,
        "num_local_experts": 16,
        "num_experts_per_tok": 1,
        "interleave_moe_layer_step": 1,
        "intermediate_size": 8192,
        "intermediate_size_mlp": 16384,
        "vocab_size": 202048,
        "attention_chunk_size": 8192,
        "tie_word_embeddings": False,
    },
}
# Alternative key names, tried in order (vLLM's get_total_num_kv_heads reads the same list).
_ALIASES = {
    "num_key_value_heads": ("n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num"),
    "num_hidden_layers": ("num_hidden_layers", "n_layer", "num_layers"),
    "num_attention_heads": ("num_attention_heads", "n_head"),
    "hidden_size": ("hidden_size", "d_model", "n_embd"),
    "num_experts": ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts"),
    "decoder_sparse_step": ("decoder_sparse_step", "interleave_moe_layer_step"),
}
# The keys vLLM's _get_and_verify_max_len reads for the model's own length; the smallest wins.
LENGTH_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_target_positions",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}
_DTYPE_NAMES = {
    "half": "float16",
    "float16": "float16",
    "fp16": "float16",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float": "float32",
    "float32": "float32",
    "fp32": "float32",
}


class TextConfig(Struct):
    """The text model's config: `text_config` over the top level, then the model type's defaults."""

    top: dict
    text: dict

    @classmethod
    def of(cls, config: dict) -> TextConfig:
        nested = config.get("text_config") or config.get("llm_config") or config.get("language_config")
        text = dict(nested) if isinstance(nested, dict) else config
        return cls(top=config, text=text)

    @property
    def model_type(self) -> str:
        return str(self.text.get("model_type") or self.top.get("model_type") or "")

    @property
    def architecture(self) -> str:
        archs = self.top.get("architectures") or self.text.get("architectures") or []
        return str(archs[0]) if isinstance(archs, list) and archs else self.model_type or "unknown"

    @property
    def multimodal(self) -> bool:
        return self.text is not self.top

    def get(self, key: str, default: Any = None) -> Any:
        for name in _ALIASES.get(key, (key,)):
            value = self.text.get(name)
            if value is not None:
                return value
        value = _DEFAULTS.get(self.model_type, {}).get(key)
        return default if value is None else value

    def number(self, key: str, default: int = 0) -> int:
        value = self.get(key, default)
        try:
            return int(value)
        except (TypeError, ValueError):
            return default

    def kv_heads(self) -> int:
        """Total KV heads (multi_query -> 1; no KV field -> one per attention head), as vLLM counts."""
        if self.text.get("multi_query") and not self.text.get("new_decoder_architecture"):
            return 1
        return self.number("num_key_value_heads", self.number("num_attention_heads"))

    def head_dim(self) -> int:
        """`head_dim` when the config gives one, else hidden / heads (vLLM's get_head_size)."""
        explicit = self.get("head_dim")  # the config's, else its model type's default (Gemma: 256)
        if explicit is not None:
            return int(explicit)
        heads = self.number("num_attention_heads")
        return self.number("hidden_size") // heads if heads else 0

    def checkpoint_dtype(self) -> str | None:
        for source in (self.text, self.top):
            raw = source.get("torch_dtype") or source.get("dtype")
            if isinstance(raw, str) and raw.replace("torch.", "") in DTYPE_BYTES:
                return raw.replace("torch.", "")
        return None

    def quantization(self) -> dict:
        q = self.top.get("quantization_config") or self.text.get("quantization_config") or {}
        return q if isinstance(q, dict) else {}

    def max_length(self) -> int | None:
        """The model's own maximum length, as vLLM's _get_and_verify_max_len derives it (0.10)."""
        found = [self.number(k) for k in LENGTH_KEYS if self.get(k) is not None and self.number(k) > 0]
        if not found:
            return None
        length = self.number("model_max_length") or min(found)
        rope = self.get("rope_scaling") or {}
        kind = str(rope.get("rope_type") or rope.get("type") or "") if isinstance(rope, dict) else ""
        if kind and "gemma3" not in self.model_type and kind not in ("su", "longrope", "llama3"):
            if kind == "yarn" and rope.get("original_max_position_embeddings"):
                length = int(rope["original_max_position_embeddings"])
            length = int(length * float(rope.get("factor") or 1.0))
        return length


def resolve_dtype(flag: str | None, checkpoint: str | None) -> tuple[str, str]:
    """(dtype vLLM runs in, why): `--dtype auto` follows the checkpoint; float32 is run as bfloat16."""
    choice = (flag or "auto").lower()
    if choice != "auto":
        name = _DTYPE_NAMES.get(choice)
        if name is None:
            raise ValueError(f"unknown --dtype {flag!r}")
        return name, f"--dtype {flag}"
    if checkpoint is None:
        return "bfloat16", "assumed: config.json names no torch_dtype (vLLM falls back to the platform's first dtype)"
    if checkpoint == "float32":
        return "bfloat16", "config.json says float32, which vLLM downcasts to bfloat16 (float16 on GPUs without bf16)"
    return checkpoint, f"config.json torch_dtype {checkpoint} (--dtype auto)"


def kv_dtype_bytes(kv_cache_dtype: str | None, model_dtype: str) -> tuple[int, str]:
    """Bytes per KV element: `auto` follows the model dtype; every fp8 variant is one byte."""
    choice = (kv_cache_dtype or "auto").lower()
    if choice == "auto":
        return DTYPE_BYTES[model_dtype], f"auto: the model dtype {model_dtype}"
    if choice.startswith("fp8"):
        return 1, f"{choice}: one byte"
    name = _DTYPE_NAMES.get(choice)
    if name is None:
        raise ValueError(f"unknown --kv-cache-dtype {kv_cache_dtype!r}")
    return DTYPE_BYTES[name], choice
