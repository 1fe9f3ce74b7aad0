"""The GPU a plan sizes for: a size, a card name, or what nvidia-smi printed.

A card's memory here is the total CUDA reports (`torch.cuda.mem_get_info`, the "total
capacity" of an OOM message), which is what vLLM multiplies by gpu_memory_utilization;
it is below the marketing size and below nvidia-smi's total. Table values are typical
figures (they move by ~0.1 GiB with driver, ECC and MIG); give `--gpu-memory` or
`--nvidia-smi` for the exact one. nvidia-smi output (table or CSV) is read by the same
evidence reader the diagnosis uses (`triage.parse.sysinfo`), which also reports free memory.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from msgspec import Struct, field

from triage.errors import InputError, UsageError
from triage.units import GiB, parse_size

# name -> total GiB as CUDA reports it (typical), and the aliases that find it
CARDS: dict[str, tuple[float, tuple[str, ...]]] = {
    "H200": (139.81, ("h200", "h200-141gb")),
    "B200": (178.35, ("b200",)),
    "H100-80GB": (79.19, ("h100", "h100-80gb", "h100-sxm", "h100-pcie")),
    "A100-80GB": (79.15, ("a100-80gb", "a100-80g", "a100")),
    "A100-40GB": (39.39, ("a100-40gb", "a100-40g")),
    "L40S": (44.52, ("l40s", "l40")),
    "RTX-A6000": (47.54, ("a6000", "rtx-a6000")),
    "A10G": (22.20, ("a10g",)),
    "L4": (22.05, ("l4",)),
    "RTX-4090": (23.65, ("4090", "rtx-4090", "rtx4090")),
    "RTX-3090": (23.69, ("3090", "rtx-3090", "rtx3090")),
    "V100-32GB": (31.74, ("v100-32gb",)),
    "V100-16GB": (15.77, ("v100", "v100-16gb")),
    "T4": (14.75, ("t4", "tesla-t4")),
}


class Gpu(Struct):
    name: str
    total_bytes: int
    count: int = 1
    free_bytes: int | None = None  # the least free memory of the GPUs the launch uses
    source: str = ""
    other_processes_bytes: int | None = None
    notes: list[str] = field(default_factory=list)


def _key(name: str) -> str:
    return re.sub(r"[\s_]+", "-", name.strip().lower()).replace("nvidia-", "").replace("geforce-", "")


def from_size(text: str) -> Gpu:
    """`80GiB`, `24GB`, `79.15 GiB`: GB is read as GiB, as vLLM and PyTorch print it."""
    try:
        total = parse_size(text)
    except ValueError:
        raise UsageError(f"--gpu-memory {text!r} is not a size (say 80GiB or 24GB)") from None
    if total <= 0:
        raise UsageError(f"--gpu-memory {text!r} must be positive")
    if total < GiB // 4 and not re.search(r"[KkMm]", text):
        raise UsageError(f"--gpu-memory {text!r} needs a unit (say {text}GiB)")
    return Gpu(name="GPU", total_bytes=total, source=f"--gpu-memory {text}")


def from_name(name: str) -> Gpu:
    key = _key(name)
    for card, (size, aliases) in CARDS.items():
        if key == card.lower() or key in aliases:
            return Gpu(
                name=card,
                total_bytes=int(size * GiB),
                source=f"card table: {card}, {size:.2f} GiB "
                "(typical total as CUDA reports it; give --gpu-memory or --nvidia-smi for the exact one)",
            )
    known = ", ".join(CARDS)
    raise UsageError(f"unknown --gpu {name!r}; known cards: {known} (or give --gpu-memory SIZE)")


def card_for(name: str, smi_total: int) -> tuple[str, float] | None:
    """The table's card that nvidia-smi names (`NVIDIA L4`, `NVIDIA H100 80GB HBM3`), when its
    CUDA total is just under nvidia-smi's (the driver keeps up to ~1.5 GiB); else None."""
    key = f"-{_key(name)}-"
    best: tuple[str, float] | None = None
    for card, (size, aliases) in CARDS.items():
        named = any(f"-{alias}-" in key for alias in (card.lower(), *aliases))
        gap = smi_total - size * GiB
        if named and 0 <= gap <= 1.5 * GiB and (best is None or size > best[1]):
            best = (card, size)
    return best


def from_nvidia_smi(path: str, devices: int) -> Gpu:
    """The first `devices` GPUs nvidia-smi lists: the smallest total and free among them."""
    from triage.ingest.lines import Line
    from triage.model import events as ev
    from triage.parse.sysinfo import BundleReader

    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    reader, gpus, procs = BundleReader(), [], []
    for no, raw in enumerate(text.splitlines()[:100_000], 1):
        for event in reader.read(Line(no=no, text=raw[:4000])):
            if isinstance(event, ev.GpuInfo) and event.total:
                gpus.append(event)
            elif isinstance(event, ev.GpuProcess) and event.bytes:
                procs.append(event)
    if not gpus:
        raise InputError(
            f"no GPU memory rows in {path} (give `nvidia-smi` or "
            "`nvidia-smi --query-gpu=index,name,memory.total,memory.used,memory.free --format=csv`)"
        )
    used = gpus[: max(1, devices)]
    total: Any = min(g.total for g in used)  # type: ignore[type-var]
    frees = [g.free for g in used if g.free is not None]
    card = card_for(used[0].name or "", total)
    source = f"nvidia-smi ({path}), {len(gpus)} GPU{'s' if len(gpus) > 1 else ''} listed"
    if card is not None:  # the same total as --gpu CARD: what CUDA hands out, not nvidia-smi's figure
        name, size = card
        source += f"; total as CUDA reports a {name}: {size:.2f} GiB (nvidia-smi says {total / GiB:.2f} GiB)"
        total = int(size * GiB)
    gpu = Gpu(
        name=used[0].name or "GPU",
        total_bytes=total,
        count=len(gpus),
        free_bytes=min(min(frees), total) if frees else None,
        source=source,
    )
    others = sum(p.bytes or 0 for p in procs if p.gpu is None or p.gpu < len(used))
    gpu.other_processes_bytes = others or None
    if card is None:
        gpu.notes.append("nvidia-smi's total counts memory CUDA does not hand out; vLLM's total is a little smaller")
    if len(gpus) < devices:
        gpu.notes.append(f"the launch needs {devices} GPUs but nvidia-smi lists {len(gpus)}")
    return gpu
