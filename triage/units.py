"""Sizes as vLLM and PyTorch print them, to and from bytes (always binary units).

vLLM's "GB" labels hold GiB values (`/ 2**30`), and PyTorch's format_size uses binary
units, so every unit here is a power of 1024. Bytes are ints; rounding happens once, here.
"""

from __future__ import annotations

import math
import re

GiB = 1 << 30
MiB = 1 << 20
KiB = 1 << 10

_SIZE = re.compile(r"\s*(-?\d+(?:\.\d+)?)\s*([KMGTkmgt][Ii]?[Bb]|bytes|B)?\s*$")
_FACTORS = {"k": KiB, "m": MiB, "g": GiB, "t": 1 << 40}
MAX_ABS_BYTES = 1 << 70  # a zettabyte: beyond any device; larger figures are nonsense


def parse_size(text: object) -> int:
    """'1.96 GiB' / '14.99GiB' / '512.00 MiB' / '0 bytes' / '14.9889 GB' -> bytes (int)."""
    m = _SIZE.match(str(text))
    if not m:
        raise ValueError(f"not a size: {text!r}")
    number, unit = m.group(1), (m.group(2) or "B")
    factor = 1 if unit in ("B", "bytes") else _FACTORS[unit[0].lower()]
    value = float(number) * factor
    if not math.isfinite(value) or abs(value) > MAX_ABS_BYTES:
        raise ValueError(f"size out of range: {text!r}")
    return round(value)


def gib(n: int | float | None) -> str:
    """Bytes in vLLM's own unit with two decimals: '8.30 GiB'."""
    if n is None:
        return "?"
    return f"{n / GiB:.2f} GiB"


def mib(n: int | float | None) -> str:
    if n is None:
        return "?"
    return f"{n / MiB:.0f} MiB"


def human(n: int | float | None) -> str:
    """The unit that reads best: MiB under 1 GiB, GiB above."""
    if n is None:
        return "?"
    return mib(n) if abs(n) < GiB else gib(n)


def round_down(x: float, step: float) -> float:
    """Largest multiple of step not above x (a computed flag value must fit, so never round up)."""
    if step <= 0:
        raise ValueError("step must be positive")
    q = math.floor(x / step + 1e-9)
    result = q * step
    return int(result) if isinstance(step, int) and float(result).is_integer() else round(result, 10)


def round_up(x: float, step: float) -> float:
    if step <= 0:
        raise ValueError("step must be positive")
    q = math.ceil(x / step - 1e-9)
    result = q * step
    return int(result) if isinstance(step, int) and float(result).is_integer() else round(result, 10)
