"""The figures of a config.json that `plan` computes with, checked before any arithmetic.

A config comes from anyone (a cache, a download, an upload): zero or negative heads, a NaN
vocabulary, a hidden size of 1e300 would be sized as "fits", or end in an OverflowError, or
make Python's integers thousands of digits long. Each figure sizing reads is held to a whole
number in a range wider than any real model's (the largest real ones are far inside); one
outside is one clear error naming the key and its value.
"""

from __future__ import annotations

import math
from typing import Any

# key -> (lowest, highest) allowed when the key is present (absent: the tool's own default)
BOUNDS: dict[str, tuple[int, int]] = {
    "hidden_size": (1, 1 << 20),
    "num_attention_heads": (1, 1 << 16),
    "num_key_value_heads": (1, 1 << 16),
    "head_dim": (1, 1 << 16),
    "vocab_size": (1, 1 << 27),
    "intermediate_size": (1, 1 << 22),
    "num_experts": (0, 1 << 16),
    "moe_intermediate_size": (0, 1 << 22),
    "n_shared_experts": (0, 1 << 10),
    "shared_expert_intermediate_size": (0, 1 << 22),
    "kv_lora_rank": (1, 1 << 16),
    "q_lora_rank": (0, 1 << 16),
    "qk_rope_head_dim": (0, 1 << 16),
    "qk_nope_head_dim": (0, 1 << 16),
    "v_head_dim": (0, 1 << 16),
    "mamba_d_state": (0, 1 << 16),
    "mamba_intermediate_size": (0, 1 << 22),
}
MAX_LENGTH = 1 << 40  # tokens: the longest real contexts are ~1e7
MAX_FACTOR = 1 << 16  # rope_scaling.factor


def whole(value: Any) -> int | None:
    """`value` as a whole number (an int, an integral finite float, digits), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) and value.is_integer() else None
    if isinstance(value, str) and value.strip().lstrip("-").isdigit() and len(value) <= 24:
        return int(value)
    return None


def check(cfg: Any, length_keys: tuple[str, ...]) -> None:
    """Raise ValueError naming the first figure `cfg` (a TextConfig) gives that is implausible."""
    for key, (low, high) in BOUNDS.items():
        _within(key, cfg.get(key), low, high)
    for key in length_keys:
        _within(key, cfg.text.get(key), 1, MAX_LENGTH)
    rope = cfg.get("rope_scaling")
    if isinstance(rope, dict) and rope.get("factor") is not None:
        factor = rope["factor"]
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 0 < factor <= MAX_FACTOR:
            raise ValueError(
                f"rope_scaling.factor {_shown(factor)} is not plausible (a number above 0, at most {MAX_FACTOR})"
            )


def _within(key: str, value: Any, low: int, high: int) -> None:
    if value is None:
        return
    number = whole(value)
    if number is None or not low <= number <= high:
        raise ValueError(f"{key} {_shown(value)} is not plausible (a whole number from {low} to {high:,})")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
