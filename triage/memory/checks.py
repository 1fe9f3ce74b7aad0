"""fits / fails / cannot tell, with the margin, for one of vLLM's checks.

A check compares what is needed with what there is, both intervals. It *fits* when the
worst case fits (need.hi <= have.lo), *fails* when even the best case fails
(need.lo > have.hi), and otherwise cannot tell: the rounding of the printed figures decides.
A check whose inputs the log does not give is *cannot tell* with the missing figures named.
"""

from __future__ import annotations

import math

from msgspec import Struct

from triage.memory.quantities import Quantity, weakest
from triage.units import GiB, MiB

FITS = "fits"
FAILS = "fails"
UNKNOWN = "cannot tell"


class Check(Struct, frozen=True):
    """One of vLLM's checks under a configuration.

    name: a stable id (`startup_free_memory`, `kv_pool_positive`, `kv_fits_max_model_len`, ...).
    margin: have - need in the worst case (negative when it fails), in `unit`.
    source: the weakest provenance among the inputs (printed, derived, default, estimated).
    """

    name: str
    verdict: str
    what: str
    need: Quantity | None = None
    have: Quantity | None = None
    unit: str = "bytes"
    missing: tuple[str, ...] = ()
    source: str = ""
    note: str = ""
    lines: tuple[int, ...] = ()

    @property
    def margin(self) -> float | None:
        """Worst-case spare (have.lo - need.hi); negative: short by that much in the worst case."""
        if self.need is None or self.have is None:
            return None
        return self.have.lo - self.need.hi

    @property
    def fits(self) -> bool:
        return self.verdict == FITS

    def describe(self) -> str:
        """One line a person reads: 'fits with 0.31 GiB to spare (KV pool 1.25 GiB >= 1.24 GiB)'."""
        if self.verdict == UNKNOWN and self.missing:
            return f"{self.what}: cannot tell, the log does not give {', '.join(self.missing)}"
        m = self.margin
        if m is None:
            return f"{self.what}: {self.verdict}" + (f" ({self.note})" if self.note else "")
        amount = fmt(abs(m), self.unit)
        if self.verdict == FITS:
            head = f"fits with {amount} to spare"
        elif self.verdict == FAILS:
            head = f"fails, short by {fmt(max(self.need.lo - self.have.hi, 0), self.unit)} at best"  # type: ignore[union-attr]
        elif not math.isfinite(m):  # a figure bounded on one side only (e.g. the GPU's total missing)
            head = "cannot tell: the log's figures bound it on one side only"
        else:
            head = f"cannot tell: within the rounding of the printed figures ({amount} either way)"
        tail = f" ({self.note})" if self.note else ""
        est = f"; {self.source}" if self.source in ("estimated", "default") else ""
        return f"{self.what}: {head}{tail}{est}"


def fmt(x: float, unit: str) -> str:
    if unit == "bytes":
        return f"{x / GiB:.2f} GiB" if abs(x) >= GiB else f"{x / MiB:.0f} MiB"
    if unit == "tokens":
        return f"{int(x):,} tokens"
    return f"{x:g} {unit}"


def compare(name: str, what: str, need: Quantity, have: Quantity, unit: str = "bytes", note: str = "") -> Check:
    """need <= have, decided on the worst case."""
    if need.hi <= have.lo:
        verdict = FITS
    elif need.lo > have.hi:
        verdict = FAILS
    else:
        verdict = UNKNOWN
    lines = tuple(sorted({q.line for q in (need, have) if q.line}))
    return Check(
        name, verdict, what, need, have, unit, source=weakest(need.source, have.source), note=note, lines=lines
    )


def unknown(name: str, what: str, *missing: str) -> Check:
    return Check(name, UNKNOWN, what, missing=tuple(missing))


def overall(checks: list[Check]) -> str:
    """fails if any check fails; fits if all fit; otherwise cannot tell."""
    if any(c.verdict == FAILS for c in checks):
        return FAILS
    if checks and all(c.verdict == FITS for c in checks):
        return FITS
    return UNKNOWN
