"""The `vllm serve` flags a plan reads, from the plan's own arguments or a whole command line.

Accepts `--flag value`, `--flag=value`, underscores for dashes, the short forms vLLM has
(`-tp`, `-pp`, `-q`), and lengths like `32k`. Real `vllm serve` flags that do not change
memory (vllm_serve_flags.txt) are ignored but listed, so the user sees what was not taken into
account; any other flag is a usage error, so a typo never answers FITS.
"""

from __future__ import annotations

import difflib
import functools
import re
from dataclasses import dataclass, field
from importlib import resources

from triage.errors import UsageError
from triage.units import parse_size

_INT = {"tensor-parallel-size": "tp", "pipeline-parallel-size": "pp", "max-model-len": "max_model_len",
        "max-num-seqs": "max_num_seqs", "max-num-batched-tokens": "max_num_batched_tokens",
        "block-size": "block_size", "data-parallel-size": "dp"}
_FLOAT = {"gpu-memory-utilization": "gpu_memory_utilization", "cpu-offload-gb": "cpu_offload_gb",
          "swap-space": "swap_space"}
_STR = {"kv-cache-dtype": "kv_cache_dtype", "dtype": "dtype", "quantization": "quantization", "model": "model",
        "kv-cache-memory": "kv_cache_memory", "kv-cache-memory-bytes": "kv_cache_memory"}
_BOOL = {"enforce-eager": "enforce_eager"}
_SHORT = {"-tp": "tensor-parallel-size", "-pp": "pipeline-parallel-size", "-q": "quantization",
          "-dp": "data-parallel-size"}
_LENGTH = re.compile(r"^(\d+(?:\.\d+)?)([kKmM]?)$")


@dataclass
class ServeFlags:
    model: str | None = None
    tp: int = 1
    pp: int = 1
    dp: int = 1
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    block_size: int | None = None
    gpu_memory_utilization: float | None = None
    kv_cache_dtype: str | None = None
    dtype: str | None = None
    quantization: str | None = None
    kv_cache_memory: str | None = None
    cpu_offload_gb: float | None = None
    swap_space: float | None = None
    enforce_eager: bool = False
    given: list[str] = field(default_factory=list)  # the memory flags the user set, as typed
    ignored: list[str] = field(default_factory=list)


def _length(text: str, flag: str) -> int:
    m = _LENGTH.match(text.strip())
    if not m:
        raise UsageError(f"--{flag} {text!r} is not a whole number")
    scale = {"": 1, "k": 1024, "m": 1024 * 1024}[m.group(2).lower()]
    value = float(m.group(1)) * scale
    if value != int(value) or value <= 0 or value > 1 << 40:
        raise UsageError(f"--{flag} {text!r} is out of range")
    return int(value)


def _set(flags: ServeFlags, name: str, value: str | None) -> None:
    if name in _BOOL:
        setattr(flags, _BOOL[name], value is None or value.lower() not in ("false", "0", "no"))
    elif value is None:
        raise UsageError(f"--{name} needs a value")
    elif name in _INT:
        setattr(flags, _INT[name], _length(value, name))
    elif name in _FLOAT:
        try:
            number = float(value)
        except ValueError:
            raise UsageError(f"--{name} {value!r} is not a number") from None
        if not 0 <= number <= 1 << 20 or (name == "gpu-memory-utilization" and not 0 < number <= 1):
            raise UsageError(f"--{name} {value!r} is out of range")
        setattr(flags, _FLOAT[name], number)
    elif _STR[name] == "kv_cache_memory":  # bytes, as vLLM reads it, or a size: 8GiB
        text = value + "B" if value.strip().isdigit() else value
        try:
            if parse_size(text) <= 0:
                raise ValueError
        except ValueError:
            raise UsageError(f"--{name} {value!r} is not a size (bytes, or 8GiB)") from None
        flags.kv_cache_memory = text
    else:
        setattr(flags, _STR[name], value)


def parse(tokens: list[str], flags: ServeFlags | None = None) -> ServeFlags:
    """Read vLLM flags from tokens; a bare first token (after `vllm serve`) is the model."""
    flags = flags or ServeFlags()
    tokens = list(tokens)
    if len(tokens) >= 2 and tokens[0].endswith("vllm") and tokens[1] == "serve":
        tokens = tokens[2:]
    elif tokens and tokens[0] in ("python", "python3") and "-m" in tokens[:3]:
        tokens = tokens[tokens.index("-m") + 2:]
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        if not tok.startswith("-"):
            if flags.model is None:
                flags.model = tok
            else:
                flags.ignored.append(tok)
            continue
        name, _, inline = tok.partition("=")
        name = _SHORT.get(name, name.lstrip("-").replace("_", "-"))
        value: str | None = inline if "=" in tok else None
        known = name in _INT or name in _FLOAT or name in _STR or name in _BOOL
        if value is None and name not in _BOOL and i < len(tokens) and not tokens[i].startswith("--"):
            if known or not tokens[i].startswith("-"):
                value, i = tokens[i], i + 1
        if not known:
            _check_serve_flag(tok, name)
            flags.ignored.append(tok if value is None else f"{tok} {value}")
            continue
        _set(flags, name, value)
        if name != "model":
            flags.given.append(f"--{name}" + (f" {value}" if value is not None else ""))
    if flags.tp < 1 or flags.pp < 1:
        raise UsageError("--tensor-parallel-size and --pipeline-parallel-size must be at least 1")
    return flags


@functools.lru_cache(maxsize=1)
def serve_flags() -> frozenset[str]:
    """The names (no dashes) of the flags `vllm serve` takes, from the packaged list."""
    text = resources.files("triage.plan").joinpath("vllm_serve_flags.txt").read_text(encoding="utf-8")
    return frozenset(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#"))


def _check_serve_flag(token: str, name: str) -> None:
    """A flag neither the plan nor `vllm serve` knows is a typo: refused, with the nearest real one."""
    if name in serve_flags() or name.startswith("no-") and name[3:] in serve_flags():
        return
    known = sorted(serve_flags() | set(_INT) | set(_FLOAT) | set(_STR) | set(_BOOL))
    near = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
    hint = f" (did you mean --{near[0]}?)" if near else ""
    raise UsageError(f"unknown flag {token.partition('=')[0]}: neither plan nor `vllm serve` takes it{hint}")
