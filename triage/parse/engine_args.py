"""Engine settings from the reprs vLLM prints: the config banner, `args: Namespace(...)`,
and `non-default args: {...}`. These are Python reprs, not prose, so a small scanner
that respects quotes and brackets reads them; the grammar finds where they start.
"""

from __future__ import annotations

import re

# The settings a diagnosis can use, with every spelling vLLM has printed for them.
KEYS = {
    "model": "model",
    "model_tag": "model",
    "dtype": "dtype",
    "max_model_len": "max_model_len",
    "max_seq_len": "max_model_len",
    "tensor_parallel_size": "tensor_parallel_size",
    "pipeline_parallel_size": "pipeline_parallel_size",
    "data_parallel_size": "data_parallel_size",
    "quantization": "quantization",
    "enforce_eager": "enforce_eager",
    "kv_cache_dtype": "kv_cache_dtype",
    "gpu_memory_utilization": "gpu_memory_utilization",
    "max_num_seqs": "max_num_seqs",
    "max_num_batched_tokens": "max_num_batched_tokens",
    "block_size": "block_size",
    "swap_space": "swap_space",
    "cpu_offload_gb": "cpu_offload_gb",
    "kv_cache_memory_bytes": "kv_cache_memory_bytes",
    "kv_cache_memory": "kv_cache_memory_bytes",
    "trust_remote_code": "trust_remote_code",
    "served_model_name": "served_model_name",
    "port": "port",
    "host": "host",
    "device": "device",
    "enable_lora": "enable_lora",
    "max_seq_len_to_capture": "max_seq_len_to_capture",
    "limit_mm_per_prompt": "limit_mm_per_prompt",
}
_PAIR = re.compile(r"""['"]?([A-Za-z_]\w*)['"]?\s*[=:]\s*""")
_OPEN, _CLOSE = "([{", ")]}"
MAX_SCAN = 20000


def parse_settings(text: str) -> dict[str, str | int | float | bool | None]:
    """The known keys of a `k=v, ...` or `{'k': v, ...}` repr, values as Python scalars."""
    text = text[:MAX_SCAN].strip()
    if text.startswith(("{", "(")) and len(text) > 1:
        text = text[1:]
    out: dict[str, str | int | float | bool | None] = {}
    for key, raw in _top_level_pairs(text):
        name = KEYS.get(key)
        if name and (name not in out or out[name] is None):
            out[name] = _scalar(raw)
    return out


def _top_level_pairs(text: str):
    """Split at commas outside quotes and brackets; yield (key, raw value)."""
    depth, quote, start = 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            if ch == quote and text[i - 1] != "\\":
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth -= 1
            if depth < 0:
                yield from _pair(text[start:i])
                return
        elif ch == "," and depth == 0:
            yield from _pair(text[start:i])
            start = i + 1
    yield from _pair(text[start:])


def _pair(chunk: str):
    m = _PAIR.match(chunk.strip())
    if m:
        yield m.group(1), chunk.strip()[m.end() :].strip()


def _scalar(raw: str) -> str | int | float | bool | None:
    raw = raw.strip()
    if raw in ("None", "null", ""):
        return None
    if raw in ("True", "true"):
        return True
    if raw in ("False", "false"):
        return False
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
        return raw[1:-1]
    if raw.startswith("torch."):
        return raw[len("torch.") :]
    try:
        return int(raw)
    except ValueError:
        pass
    try:
        return float(raw)
    except ValueError:
        return raw[:200]
