"""The ways a user pastes one of vLLM's messages, rendered from the catalogue (not from any log).

A catalogued message is filled with values (short ones, or the long ones real starts print:
paths, hub ids with slashes, dicts, lists, sizes with units) and written in each form a user
pastes it in: the bare message, its exception line, the engine core's prefixed log line, a
config class's error wrapped by pydantic (vLLM >= 0.10; with and without its first line), the
line soft-wrapped by a terminal at 80 and 120 columns. argparse's own refusals of a flag are
no catalogue entry; `ARGPARSE` holds them (argparse's wording, Python 3.8 .. 3.13).
`tests/catalogue/test_pastes.py` runs them; `-s -k table` prints the pass rate per release and form.
"""

from __future__ import annotations

import re
from collections.abc import Callable

# the value a field of this name holds: (short, long)
_VALUES: list[tuple[str, str, str]] = [
    (r"gib|memory|mem\b|_gb\b|bytes", "3.50", "23.65 GiB"),
    (r"path|dir|file|folder|cache", "/models/orca", "/mnt/data/hf/hub/models--acme--Orca-2-13B/snapshots/4f2a9c1e"),
    (r"model|repo|name|tokenizer", "acme/orca-13b", "meta-llama/Llama-3.1-70B-Instruct"),
    (r"list|ids|choices|supported|options|backends|keys", "auto", "['FLASH_ATTN', 'TRITON_ATTN', 'FLEX_ATTENTION']"),
    (r"arch", "OrcaForCausalLM", "['Qwen2VLForConditionalGeneration', 'OrcaForCausalLM']"),
    (r"dict|config|kwargs|scaling|overrides", "auto", "{'rope_type': 'yarn', 'factor': 4.0, 'original': 32768}"),
    (r"len|size|num|count|tokens|blocks|rank|heads", "4096", "131072"),
]
_PREFIX_CORE = "(EngineCore_DP0 pid=123) ERROR 12-05 06:16:45 [core.py:708] "
_PREFIX_LOG = "ERROR 12-05 06:16:45 [{src}:{line}] "
_PYDANTIC = (
    "  Value error, {msg} [type=value_error, input_value=ArgsKwargs((), {{'model': 'acme/orca-13b'}}), "
    "input_type=ArgsKwargs]\n    For further information visit https://errors.pydantic.dev/2.11/v/value_error"
)

# argparse's refusals of `vllm serve` flags: the cause every one names is invalid_arguments
ARGPARSE = [
    "vllm serve: error: argument --dtype: invalid choice: 'bf16x' (choose from 'auto', 'half', 'float16', "
    "'bfloat16', 'float', 'float32')",
    "api_server.py: error: argument --kv-cache-dtype: invalid choice: 'fp4' (choose from auto, fp8, fp8_e4m3)",
    "vllm serve: error: argument --tensor-parallel-size/-tp: invalid int value: 'two'",
    "vllm serve: error: argument --gpu-memory-utilization: invalid float value: '90%'",
    "vllm serve: error: argument --max-model-len: expected one argument",
    "vllm serve: error: unrecognized arguments: --max-num-seq 256",
    "api_server.py: error: the following arguments are required: --model",
    "vllm: error: argument subparser: invalid choice: 'server' (choose from 'chat', 'complete', 'serve')",
]


def value(name: str, long: bool) -> str:
    """A plausible value for a formatted field, by its expression's name."""
    n = name.lower()
    for pattern, short, lengthy in _VALUES:
        if re.search(pattern, n):
            return lengthy if long else short
    return "auto"


def message(entry: dict, long: bool = False) -> str:
    """The entry's template with each field filled in."""
    return re.sub(r"\{([^{}]*)\}", lambda m: value(m.group(1), long), entry["template"])


# what pydantic runs while it builds a config: its __post_init__, validators and the checks they call
_VALIDATING = re.compile(r"__post_init__|__init__|_?(validate|verify|check)\w*|\w*_validator|_?set_\w*|_?resolve\w*")


def _config_class(entry: dict) -> str | None:
    """The pydantic dataclass a vLLM >= 0.10 config check is raised in (`ModelConfig`), else None
    (a getter's error is raised later, not while pydantic builds the config)."""
    m = re.fullmatch(r"vllm/config/(\w+)\.py", entry["file"])
    if not m or entry["exception"] != "ValueError" or m.group(1) in ("__init__", "utils", "vllm"):
        return None
    if not _VALIDATING.fullmatch(entry["function"]):
        return None
    return "".join(w.title() for w in m.group(1).split("_")) + "Config"


def _soft_wrap(text: str, width: int) -> str:
    """A terminal's wrap: the line cut every `width` characters, mid-word. A message whose source
    string kept its continuation's indent (`"... >= 0.14.0            to load"`) is left whole:
    a cut there leaves a line that starts indented, which reads as code, not as a wrap."""
    if "   " in text:
        return text
    return "\n".join(text[i : i + width] for i in range(0, len(text), width))


def _raised(entry: dict, msg: str) -> str:
    if entry["exception"].startswith("logger."):
        return _PREFIX_LOG.format(src=entry["file"].rsplit("/", 1)[-1], line=entry["line"]) + msg
    return f"{entry['exception']}: {msg}"


# form name -> (applies to this entry in this release?, the pasted text)
Form = tuple[Callable[[dict, bool], bool], Callable[[dict], str]]
FORMS: dict[str, Form] = {
    "bare": (lambda e, new: True, lambda e: message(e)),
    "exception": (lambda e, new: True, lambda e: _raised(e, message(e))),
    "engine-core": (
        lambda e, new: not e["exception"].startswith("logger."),
        lambda e: _PREFIX_CORE + _raised(e, message(e)),
    ),
    "pydantic": (
        lambda e, new: new and _config_class(e) is not None,
        lambda e: (
            f"pydantic_core._pydantic_core.ValidationError: 1 validation error for {_config_class(e)}\n"
            + _PYDANTIC.format(msg=message(e))
        ),
    ),
    "pydantic-block": (lambda e, new: new and _config_class(e) is not None, lambda e: _PYDANTIC.format(msg=message(e))),
    "wrap-80": (lambda e, new: len(_raised(e, message(e))) > 80, lambda e: _soft_wrap(_raised(e, message(e)), 80)),
    "wrap-120": (lambda e, new: len(_raised(e, message(e))) > 120, lambda e: _soft_wrap(_raised(e, message(e)), 120)),
    "bare-wrap-80": (lambda e, new: len(message(e)) > 80, lambda e: _soft_wrap(message(e), 80)),
    "core-wrap-120": (
        lambda e, new: not e["exception"].startswith("logger.") and len(_PREFIX_CORE + _raised(e, message(e))) > 120,
        lambda e: _soft_wrap(_PREFIX_CORE + _raised(e, message(e)), 120),
    ),
    "v0-worker": (  # a V0 Ray worker's ERROR line (vLLM < 0.11's logger header, no brackets at the start)
        lambda e, new: not e["exception"].startswith("logger."),
        lambda e: "(RayWorkerWrapper pid=4242) ERROR 12-05 06:16:45 worker_base.py:382] " + _raised(e, message(e)),
    ),
    "long-values": (
        lambda e, new: "{" in e["template"] and message(e, True) != message(e),
        lambda e: _raised(e, message(e, True)),
    ),
}


def pydantic_era(release: str) -> bool:
    """vLLM's config classes are pydantic dataclasses from 0.10 on."""
    return tuple(int(x) for x in re.findall(r"\d+", release)[:2]) >= (0, 10)
