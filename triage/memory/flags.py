"""vLLM command-line flags to and from a Config: what a remedy or `what-if` asks about."""

from __future__ import annotations

from collections.abc import Mapping

from triage.units import parse_size
from triage.memory.inputs import Config

# flag -> (Config field, parser)
_INT = int


def _util(text: str) -> float:
    u = float(text)
    if not 0 < u <= 1:
        raise ValueError(f"--gpu-memory-utilization must be in (0, 1]: {text}")
    return u


def _positive(text: str) -> int:
    n = int(str(text).replace(",", "").replace("_", ""))
    if n <= 0:
        raise ValueError(f"must be a positive integer: {text}")
    return n


def _bytes(text: str) -> int:
    """Bytes as vLLM's kv_cache_memory_bytes takes them: a plain integer, or a size ('4.5GiB', '4G')."""
    t = str(text).strip()
    if t.isdigit():
        return int(t)
    if t[-1:].upper() in ("K", "M", "G", "T"):
        t += "iB"
    return parse_size(t)


FLAGS: dict[str, tuple[str, object]] = {
    "--gpu-memory-utilization": ("gpu_memory_utilization", _util),
    "--max-model-len": ("max_model_len", _positive),
    "--max-num-seqs": ("max_num_seqs", _positive),
    "--max-num-batched-tokens": ("max_num_batched_tokens", _positive),
    "--kv-cache-dtype": ("kv_cache_dtype", str),
    "--tensor-parallel-size": ("tensor_parallel_size", _positive),
    "--enforce-eager": ("enforce_eager", lambda _t: True),
    "--kv-cache-memory": ("kv_cache_memory", _bytes),
    "--kv-cache-memory-bytes": ("kv_cache_memory", _bytes),
    "--swap-space": ("swap_space", float),
    "--cpu-offload-gb": ("cpu_offload_gb", float),
}


def known(flag: str) -> bool:
    return flag in FLAGS


def apply(base: Config, flags: Mapping[str, str]) -> Config:
    """base with the flags the model knows applied; others (e.g. --cpu-offload-gb) are ignored.

    Raises ValueError for a value vLLM would refuse (so a remedy never offers it).
    """
    changes: dict[str, object] = {}
    for flag, text in flags.items():
        if flag in FLAGS:
            name, parse = FLAGS[flag]
            changes[name] = parse(text)  # type: ignore[operator]
    return base.changed(**changes)


def numeric(flags: Mapping[str, str]) -> bool:
    """Does this remedy set a flag the model can check?"""
    return any(f in FLAGS for f in flags)
