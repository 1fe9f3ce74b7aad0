"""vLLM's `vllm serve` flags: the one table of what each flag sets, read two ways.

- `parse` reads a whole command line (or `plan`'s own arguments) into `ServeFlags`:
  `--flag value`, `--flag=value`, underscores for dashes, the short forms vLLM has (`-tp`,
  `-pp`, `-q`, `-dp`), and lengths like `32k`. Flags that do not change memory are ignored but
  listed, so the user sees what was not taken into account. Bad values are `UsageError`s.
- `apply` and `numeric` read a remedy's or `what-if`'s `{"--flag": "value"}` into the memory
  model's `Config`; a value vLLM would refuse is a `ValueError` (so a remedy never offers it).

Each flag names its kind, its `ServeFlags` field and (if the memory model reads it) its
`Config` field, so the two readers cannot disagree on which flag sets what.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, NamedTuple

from msgspec import Struct, field

from triage.errors import UsageError
from triage.patterns import LazyPattern
from triage.units import parse_size

if TYPE_CHECKING:
    from triage.memory.inputs import Config


class Flag(NamedTuple):
    """A flag's value kind, the `ServeFlags` field it sets and the `Config` field (None: not modelled)."""

    kind: str  # "count" | "fraction" | "number" | "text" | "size" | "switch"
    serve: str
    config: str | None


FLAGS: dict[str, Flag] = {
    "tensor-parallel-size": Flag("count", "tp", "tensor_parallel_size"),
    "pipeline-parallel-size": Flag("count", "pp", None),
    "data-parallel-size": Flag("count", "dp", None),
    "max-model-len": Flag("count", "max_model_len", "max_model_len"),
    "max-num-seqs": Flag("count", "max_num_seqs", "max_num_seqs"),
    "max-num-batched-tokens": Flag("count", "max_num_batched_tokens", "max_num_batched_tokens"),
    "block-size": Flag("count", "block_size", None),
    "gpu-memory-utilization": Flag("fraction", "gpu_memory_utilization", "gpu_memory_utilization"),
    "cpu-offload-gb": Flag("number", "cpu_offload_gb", "cpu_offload_gb"),
    "swap-space": Flag("number", "swap_space", "swap_space"),
    "kv-cache-dtype": Flag("text", "kv_cache_dtype", "kv_cache_dtype"),
    "dtype": Flag("text", "dtype", None),
    "quantization": Flag("text", "quantization", None),
    "model": Flag("text", "model", None),
    "kv-cache-memory": Flag("size", "kv_cache_memory", "kv_cache_memory"),
    "kv-cache-memory-bytes": Flag("size", "kv_cache_memory", "kv_cache_memory"),
    "enforce-eager": Flag("switch", "enforce_eager", "enforce_eager"),
}
SHORT = {
    "-tp": "tensor-parallel-size",
    "-pp": "pipeline-parallel-size",
    "-q": "quantization",
    "-dp": "data-parallel-size",
}
_LENGTH = LazyPattern(r"^(\d+(?:\.\d+)?)([kKmM]?)$")


# -- a command line, as `plan` reads it ---------------------------------------------------------


class ServeFlags(Struct):
    """What a command line sets (a Struct: defining a dataclass costs ~1 ms of every start)."""

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
    kind, attr, _ = FLAGS[name]
    if kind == "switch":
        setattr(flags, attr, value is None or value.lower() not in ("false", "0", "no"))
    elif value is None:
        raise UsageError(f"--{name} needs a value")
    elif kind == "count":
        setattr(flags, attr, _length(value, name))
    elif kind in ("fraction", "number"):
        try:
            number = float(value)
        except ValueError:
            raise UsageError(f"--{name} {value!r} is not a number") from None
        if not 0 <= number <= 1 << 20 or (kind == "fraction" and not 0 < number <= 1):
            raise UsageError(f"--{name} {value!r} is out of range")
        setattr(flags, attr, number)
    elif kind == "size":  # bytes, as vLLM reads it, or a size: 8GiB
        text = value + "B" if value.strip().isdigit() else value
        try:
            if parse_size(text) <= 0:
                raise ValueError
        except ValueError:
            raise UsageError(f"--{name} {value!r} is not a size (bytes, or 8GiB)") from None
        setattr(flags, attr, text)
    else:
        setattr(flags, attr, value)


def parse(tokens: list[str], flags: ServeFlags | None = None) -> ServeFlags:
    """Read vLLM flags from tokens; a bare first token (after `vllm serve`) is the model."""
    flags = flags or ServeFlags()
    tokens = list(tokens)
    if len(tokens) >= 2 and tokens[0].endswith("vllm") and tokens[1] == "serve":
        tokens = tokens[2:]
    elif tokens and tokens[0] in ("python", "python3") and "-m" in tokens[:3]:
        tokens = tokens[tokens.index("-m") + 2 :]
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
        name = SHORT.get(name, name.lstrip("-").replace("_", "-"))
        value: str | None = inline if "=" in tok else None
        known = name in FLAGS
        switch = known and FLAGS[name].kind == "switch"
        takes_next = value is None and not switch and i < len(tokens) and not tokens[i].startswith("--")
        if takes_next and (known or not tokens[i].startswith("-")):
            value, i = tokens[i], i + 1
        if not known:
            _check_serve_flag(tok, name)
            flags.ignored.append(tok if value is None or "=" in tok else f"{tok} {value}")
            continue
        _set(flags, name, value)
        if name != "model":
            flags.given.append(f"--{name}" + (f" {value}" if value is not None else ""))
    if flags.tp < 1 or flags.pp < 1:
        raise UsageError("--tensor-parallel-size and --pipeline-parallel-size must be at least 1")
    return flags


# -- a remedy's flags, as the memory model reads them ----------------------------------------------


@functools.lru_cache(maxsize=1)
def _serve_flag_table() -> tuple[dict[str, tuple[str, str]], str]:
    """The packaged list (scripts/catalogue/serve_flags.py): each flag's first and last release
    read, and the newest release read. Lines are `NAME FIRST LAST`; a bare `NAME` has no span."""
    from importlib import resources

    text = resources.files("triage.plan").joinpath("vllm_serve_flags.txt").read_text(encoding="utf-8")
    table: dict[str, tuple[str, str]] = {}
    newest = ""
    for line in text.splitlines():
        if line.startswith("# Releases read:"):
            newest = line.removeprefix("# Releases read:").strip().rstrip(".").split()[-1]
        elif line.strip() and not line.startswith("#"):
            name, *span = line.split()
            table[name] = (span[0], span[-1]) if span else ("", "")
    return table, newest


def serve_flags() -> frozenset[str]:
    """The names (no dashes) of the flags `vllm serve` takes, from the packaged list."""
    return frozenset(_serve_flag_table()[0])


def _serve_name(name: str) -> str | None:
    """The listed flag `name` stands for: itself, its `no-` form, or a `--json-flag.key` of one."""
    for candidate in (name, name[3:] if name.startswith("no-") else "", name.partition(".")[0]):
        if candidate in serve_flags():
            return candidate
    return None


def releases_note(token: str) -> str:
    """`--flag` with the releases that have it, where not every release read does (a flag
    vLLM dropped is worth saying: the user's release may refuse it)."""
    flag = token.split()[0].partition("=")[0]
    if not flag.startswith("-"):
        return token
    name = _serve_name(SHORT.get(flag, flag.lstrip("-").replace("_", "-")))
    table, newest = _serve_flag_table()
    first, last = table.get(name or "", ("", ""))
    if not first:
        return token
    oldest = min((span[0] for span in table.values() if span[0]), key=_release_key)
    if last != newest:
        return f"{token} (vLLM {first} to {last} only; later releases refuse it)"
    return token if first == oldest else f"{token} (vLLM {first} and later)"


def _release_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version))


def _check_serve_flag(token: str, name: str) -> None:
    """A flag neither the plan nor `vllm serve` knows is a typo: refused, with the nearest real one."""
    if _serve_name(name) is not None:
        return
    import difflib  # only for a refused flag

    near = difflib.get_close_matches(name, sorted(serve_flags() | set(FLAGS)), n=1, cutoff=0.75)
    hint = f" (did you mean --{near[0]}?)" if near else ""
    raise UsageError(f"unknown flag {token.partition('=')[0]}: neither plan nor `vllm serve` takes it{hint}")


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


_CONFIG_VALUE: dict[str, Callable[[str], object]] = {
    "count": _positive,
    "fraction": _util,
    "number": float,
    "text": str,
    "size": _bytes,
    "switch": lambda _t: True,
}
# "--flag" -> (Config field, parser), for the flags the memory model reads
_MODELLED = {f"--{name}": (flag.config, _CONFIG_VALUE[flag.kind]) for name, flag in FLAGS.items() if flag.config}


def known(flag: str) -> bool:
    """Does the memory model read this flag (`--name`, as a remedy writes it)?"""
    return flag in _MODELLED


def apply(base: Config, flags: Mapping[str, str]) -> Config:
    """base with the flags the model knows applied; others (e.g. --pipeline-parallel-size) are ignored.

    Raises ValueError for a value vLLM would refuse (so a remedy never offers it).
    """
    changes: dict[str, object] = {}
    for flag, text in flags.items():
        if flag in _MODELLED:
            name, read = _MODELLED[flag]
            changes[name] = read(text)  # type: ignore[index]
    return base.changed(**changes)


def numeric(flags: Mapping[str, str]) -> bool:
    """Does this remedy set a flag the model can check?"""
    return any(f in _MODELLED for f in flags)
