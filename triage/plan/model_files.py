"""Find a model's files on this machine and read what sizing needs, never the network.

A model is a local folder, or an id (`ORG/NAME`) found in the Hugging Face cache
(`$HF_HOME/hub/models--ORG--NAME/snapshots/*/`). From it: `config.json`, and the weight
bytes from `model.safetensors.index.json` (its `metadata.total_size`) or, without an
index, from each `.safetensors` file's header. A safetensors file starts with an 8-byte
little-endian header length and a JSON header naming each tensor's dtype and shape; only
the header is read (bounded), never the tensors.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

from msgspec import Struct, field

from triage.errors import InputError

MAX_JSON_BYTES = 8 << 20  # config.json / index: a few KB; anything over 8 MiB is not one
MAX_HEADER_BYTES = 64 << 20
MAX_SHARDS = 4096  # safetensors headers of the largest checkpoints are a few MB
DTYPE_BYTES = {
    "F64": 8,
    "I64": 8,
    "U64": 8,
    "F32": 4,
    "I32": 4,
    "U32": 4,
    "F16": 2,
    "BF16": 2,
    "I16": 2,
    "U16": 2,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "F8_E8M0": 1,
    "I8": 1,
    "U8": 1,
    "BOOL": 1,
    "F4": 0.5,
}


class ModelFiles(Struct):
    """What was found for one model: where, its config, and the checkpoint's size if known."""

    name: str
    folder: Path
    config: dict
    weights_bytes: int | None = None
    weights_source: str | None = None  # "safetensors index" | "safetensors headers"
    tensor_params: int | None = None  # element count from headers (None from an index)
    notes: list[str] = field(default_factory=list)


def hf_cache_hub() -> Path:
    """The hub folder the Hugging Face libraries use: $HF_HUB_CACHE, $HF_HOME/hub, ~/.cache/huggingface/hub."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    home = os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface")
    return Path(home) / "hub"


def locate(model: str) -> Path:
    """A folder holding config.json: the path itself, or the newest snapshot of the id in the HF cache."""
    path = Path(model).expanduser()
    if path.is_dir():
        if (path / "config.json").is_file():
            return path
        raise InputError(f"no config.json in the model folder {model}")
    if path.is_file() and path.name == "config.json":
        return path.parent
    if model.count("/") != 1 or model.startswith(("/", ".", "~")):
        raise InputError(f"model {model!r} is neither a folder nor an ORG/NAME id")
    snapshots = hf_cache_hub() / ("models--" + model.replace("/", "--")) / "snapshots"
    found = (
        sorted(
            (p for p in snapshots.glob("*") if (p / "config.json").is_file()),
            key=lambda p: p.stat().st_mtime,
            reverse=True,
        )
        if snapshots.is_dir()
        else []
    )
    if not found:
        raise InputError(
            f"model {model!r} is not in the local Hugging Face cache ({snapshots.parent}); "
            "download it first or give its folder (plan never uses the network)"
        )
    return found[0]


def read_json(path: Path) -> dict:
    """A small JSON object file, or a clear InputError (too large, not JSON, not an object)."""
    try:
        size = path.stat().st_size
        if size > MAX_JSON_BYTES:
            raise InputError(f"{path.name} is {size} bytes, too large to be a model config")
        data = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (ValueError, RecursionError) as exc:
        raise InputError(f"{path.name} is not valid JSON: {str(exc)[:120]}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path.name} is not a JSON object")
    return data


def safetensors_header(path: Path) -> dict:
    """The JSON header of one .safetensors file (the 8-byte length, then that many bytes)."""
    with open(path, "rb") as fh:
        head = fh.read(8)
        if len(head) != 8:
            raise InputError(f"{path.name} is too short to be a safetensors file")
        (length,) = struct.unpack("<Q", head)
        if length > MAX_HEADER_BYTES:
            raise InputError(f"{path.name}: header length {length} is not plausible")
        raw = fh.read(length)
    if len(raw) != length:
        raise InputError(f"{path.name}: header cut short ({len(raw)} of {length} bytes)")
    try:
        header = json.loads(raw.decode("utf-8", errors="replace"))
    except (ValueError, RecursionError):
        raise InputError(f"{path.name}: the safetensors header is not JSON") from None
    if not isinstance(header, dict):
        raise InputError(f"{path.name}: the safetensors header is not a JSON object")
    return header


MAX_DIM = 1 << 40  # one dimension of a tensor (the largest real ones are ~1e6)
MAX_ELEMENTS = 1 << 50  # elements of one tensor, and of a checkpoint: a petabyte is no model
MAX_DIMS = 16


def header_totals(header: dict) -> tuple[int, int]:
    """(bytes, elements) of the tensors a header lists, from dtype and shape (offsets may lie).
    A shape that is not a short list of whole numbers in range is an InputError, found before
    a product grows: huge dimensions would make each product a number thousands of digits long."""
    nbytes = elements = 0
    for name, info in header.items():
        if name == "__metadata__" or not isinstance(info, dict):
            continue
        shape = info.get("shape") or []
        if not isinstance(shape, list) or len(shape) > MAX_DIMS:
            raise InputError(f"tensor {str(name)[:60]!r}: its shape is not a list of at most {MAX_DIMS} numbers")
        count = 1
        for dim in shape:
            if isinstance(dim, bool) or not isinstance(dim, int) or not 0 <= dim <= MAX_DIM:
                raise InputError(f"tensor {str(name)[:60]!r}: dimension {str(dim)[:40]} is not plausible")
            count *= dim
            if count > MAX_ELEMENTS:
                raise InputError(f"tensor {str(name)[:60]!r}: more than {MAX_ELEMENTS:,} elements is not plausible")
        elements += count
        if elements > MAX_ELEMENTS:
            raise InputError(f"the tensors hold more than {MAX_ELEMENTS:,} elements: not plausible")
        nbytes += int(count * DTYPE_BYTES.get(str(info.get("dtype")), 2))
    return nbytes, elements


def _weights(folder: Path, files: ModelFiles) -> None:
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        total = (read_json(index).get("metadata") or {}).get("total_size")
        if isinstance(total, (int, float)) and not isinstance(total, bool) and 0 < total <= MAX_ELEMENTS:
            files.weights_bytes, files.weights_source = int(total), "safetensors index (metadata.total_size)"
            return
        files.notes.append("model.safetensors.index.json has no metadata.total_size")
    shards = sorted(folder.glob("*.safetensors"))
    if not shards:
        return
    nbytes = elements = 0
    for shard in shards[:MAX_SHARDS]:
        try:
            b, e = header_totals(safetensors_header(shard))
        except (InputError, OSError, ValueError, TypeError, OverflowError) as exc:
            files.notes.append(f"weights counted from config.json: {shard.name} could not be read ({exc})")
            return
        nbytes, elements = nbytes + b, elements + e
    files.weights_bytes, files.tensor_params = nbytes, elements
    files.weights_source = f"safetensors headers ({len(shards)} file{'s' if len(shards) > 1 else ''})"


def load(model: str) -> ModelFiles:
    """Locate and read a model: config.json always, the checkpoint size when its files are there."""
    folder = locate(model)
    files = ModelFiles(name=model.rstrip("/"), folder=folder, config=read_json(folder / "config.json"))
    _weights(folder, files)
    return files
