"""Figures with where they came from and how exact they are.

vLLM prints most memory figures with two decimals of GiB (`%.2f`), so a printed `1.25 GiB`
is any value in [1.245, 1.255) GiB. A fit decided at the edge must hold for every value in
that interval, so every figure here is an interval `[lo, hi]` plus its provenance. Interval
arithmetic keeps the worst case through sums and differences, so a check never turns a
coin flip into "fits".
"""

from __future__ import annotations

from msgspec import Struct

from triage.units import GiB, MiB

PRINTED = "printed"  # read from the log as vLLM/PyTorch printed it
DERIVED = "derived"  # computed from printed figures
DEFAULT = "default"  # vLLM's default: the log did not print it
ESTIMATED = "estimated"  # e.g. weights from the parameter count in the model name
GIVEN = "given"  # a value the user asks about (a flag in what-if or a remedy)

_WEAKNESS = {GIVEN: 0, PRINTED: 0, DERIVED: 1, DEFAULT: 2, ESTIMATED: 3}


def weakest(*sources: str) -> str:
    """The provenance of a result computed from several figures: estimated or default if any input
    is; otherwise derived (a sum of printed figures is no longer one printed figure)."""
    worst = max(sources, key=lambda s: _WEAKNESS.get(s, 1), default=DERIVED)
    return worst if _WEAKNESS.get(worst, 1) >= 2 else DERIVED


class Quantity(Struct, frozen=True):
    """A value in [lo, hi] (bytes, tokens or a ratio), its provenance and the log line it came from."""

    value: float
    lo: float
    hi: float
    source: str = PRINTED
    line: int = 0

    @classmethod
    def exact(cls, value: float, source: str = PRINTED, line: int = 0) -> Quantity:
        return cls(value, value, value, source, line)

    @classmethod
    def rounded(cls, value: float, step: float, source: str = PRINTED, line: int = 0) -> Quantity:
        """A figure printed to a multiple of `step` (0.01 GiB for `%.2f GiB`): +- step / 2."""
        return cls(value, value - step / 2, value + step / 2, source, line)

    @classmethod
    def printed_bytes(cls, n: float, line: int = 0, source: str = PRINTED) -> Quantity:
        """Bytes read back from a printed size: the rounding interval of the unit it was printed in.

        A value on the 0.01 GiB grid was printed as `x.yz GiB` (+-0.005 GiB); on the 0.01 MiB
        grid as `x.yz MiB` (+-0.005 MiB, PyTorch's format); otherwise it is taken as exact.
        """
        for unit in (GiB, MiB):
            hundredths = round(n / unit * 100)
            if hundredths and abs(hundredths * unit / 100 - n) <= 1:
                return cls.rounded(n, unit / 100, source, line)
        return cls.exact(n, source, line)

    @property
    def width(self) -> float:
        return self.hi - self.lo

    def __add__(self, other: Quantity | float) -> Quantity:
        o = _q(other)
        return Quantity(self.value + o.value, self.lo + o.lo, self.hi + o.hi, weakest(self.source, o.source))

    def __sub__(self, other: Quantity | float) -> Quantity:
        o = _q(other)
        return Quantity(self.value - o.value, self.lo - o.hi, self.hi - o.lo, weakest(self.source, o.source))

    def scale(self, k: float) -> Quantity:
        """Times a non-negative exact factor (a utilization, a TP ratio, a dtype ratio)."""
        if k < 0:
            raise ValueError("scale factor must be non-negative")
        return Quantity(self.value * k, self.lo * k, self.hi * k, self.source, self.line)

    def times(self, other: Quantity) -> Quantity:
        """Product of two non-negative intervals."""
        return Quantity(
            self.value * other.value, self.lo * other.lo, self.hi * other.hi, weakest(self.source, other.source)
        )

    def over(self, other: Quantity) -> Quantity:
        """Quotient of two positive intervals: [lo / other.hi, hi / other.lo]."""
        if other.lo <= 0:
            raise ZeroDivisionError("divisor interval reaches zero")
        return Quantity(
            self.value / other.value, self.lo / other.hi, self.hi / other.lo, weakest(self.source, other.source)
        )

    def with_source(self, source: str) -> Quantity:
        return Quantity(self.value, self.lo, self.hi, source, self.line)


def _q(x: Quantity | float) -> Quantity:
    return x if isinstance(x, Quantity) else Quantity.exact(float(x), GIVEN)


def as_quantity(x: Quantity | float | None, source: str = GIVEN) -> Quantity | None:
    """Plain numbers become exact quantities of the given provenance; None stays None."""
    if x is None or isinstance(x, Quantity):
        return x
    return Quantity.exact(float(x), source)
