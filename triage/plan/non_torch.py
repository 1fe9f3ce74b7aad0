"""Non-torch memory per parallel degree: what vLLM's own logs printed, and the plan's estimate from it.

vLLM's V1 worker (gpu_worker.py, 0.10) snapshots memory in init_device *before* it sets up
the distributed environment, and counts everything that is not PyTorch's allocator and
appeared since (`non_torch_increase`: NCCL communicators, custom all-reduce IPC buffers,
cuBLAS workspaces) in the memory it keeps off the KV cache. V0 from 0.7 measured the same
increase. So with tensor or pipeline parallelism the figure carries the communicators.

The estimate is measured, not derived: the median of the figures printed by real starts
(one per log: the median over its ranks), for one GPU and for more than one. The figures
read here, by the format of the line that printed them:
- `non_torch_memory takes X GiB` (V0 0.7-0.9's profiling line): the increase;
- `X GiB for non-torch memory` (V1 0.10.2-0.2x's usage line): the increase;
- `X GiB for consumed memory (weights + non-torch)` (V1 0.2x) less the `Model loading took`
  before it: the increase, derived;
- `non_torch_memory=X GiB` (V0 0.6's `Memory profiling results`): everything outside
  torch, the CUDA context included: a different quantity, kept apart and used only for
  a V0 0.6 plan (worker.py 0.6.4 subtracts that whole figure from the budget).
`scripts/non_torch_table.py` prints the table from a folder of logs; the test recomputes
the medians from ../shared/corpus and holds them equal to the constants here.
"""

from __future__ import annotations

import re
import statistics

from msgspec import Struct

from triage.units import GiB

# Medians of the corpus figures (scripts/non_torch_table.py over ../shared/corpus, 182 logs):
# one GPU: 7 starts, -0.51..4.12 GiB; more than one: 4 starts (TP 2, 3, 8, 8), 0.21..2.70 GiB.
SINGLE_GIB = 0.16
PARALLEL_GIB = 1.82
PARALLEL_RANGE_GIB = (0.21, 2.70)  # the least and the most a TP/PP > 1 start printed
# V0 0.6 counts everything outside torch (the CUDA context too): the medians of its absolute figures.
# Two starts only (one GPU: a 3090 at 0.35 GiB; TP 2: 0.73 GiB): a third V0 0.6 log would test them.
ABSOLUTE_SINGLE_GIB = 0.35
ABSOLUTE_PARALLEL_GIB = 0.73
SOURCE = "the median of the non-torch figures printed by real vLLM starts (scripts/non_torch_table.py)"

_INCREASE = (
    re.compile(r"non_torch_memory takes (-?\d+(?:\.\d+)?) ?GiB"),
    re.compile(r"(-?\d+(?:\.\d+)?) GiB for non-torch memory"),
)
_ABSOLUTE = re.compile(r"non_torch_memory=(-?\d+(?:\.\d+)?) ?GiB")
_CONSUMED = re.compile(r"(\d+(?:\.\d+)?) GiB for consumed memory \(weights \+ non-torch\)")
_LOADED = re.compile(r"Model loading took (\d+(?:\.\d+)?) GiB")
_TP = re.compile(r"tensor_parallel_size=(\d+)")
_PP = re.compile(r"pipeline_parallel_size=(\d+)")
_WORKER = re.compile(r"Worker_TP(\d+)")
_VERSION = re.compile(r"(?:LLM engine \(v|vLLM API server version |version )(\d+\.\d+[\w.+-]*)")


class Figure(Struct, frozen=True):
    """One printed non-torch figure of a start, in GiB, and how it was measured."""

    gib: float
    kind: str  # "increase", "derived" (consumed less weights) or "absolute" (V0 0.6, not used)


class LogFigures(Struct, frozen=True):
    tp: int
    pp: int
    version: str
    figures: tuple[Figure, ...]

    @property
    def degree(self) -> int:
        return self.tp * self.pp

    def value(self, absolute: bool = False) -> float | None:
        """The start's figure: the median over its ranks of the ones measured as an increase
        (`absolute`: of V0 0.6's whole non-torch figures instead)."""
        usable = [f.gib for f in self.figures if (f.kind == "absolute") == absolute]
        return statistics.median(usable) if usable else None


def _degree(pattern: re.Pattern[str], text: str) -> int:
    found = [int(m) for m in pattern.findall(text)]
    return max(found) if found else 1


def read(text: str) -> LogFigures | None:
    """The non-torch figures a log printed, with its TP/PP degree; None when it printed none."""
    figures = [Figure(float(m.group(1)), "increase") for p in _INCREASE for m in p.finditer(text)]
    figures += [Figure(float(m.group(1)), "absolute") for m in _ABSOLUTE.finditer(text)]
    for m in _CONSUMED.finditer(text):
        loaded = _LOADED.findall(text, 0, m.start())
        if loaded:
            figures.append(Figure(round(float(m.group(1)) - float(loaded[-1]), 2), "derived"))
    if not figures:
        return None
    tp = _degree(_TP, text)
    workers = [int(n) + 1 for n in _WORKER.findall(text)]
    tp = max([tp, *workers])
    version = _VERSION.search(text)
    return LogFigures(tp, _degree(_PP, text), version.group(1) if version else "unknown", tuple(figures))


def parallel_range(logs: list[LogFigures]) -> tuple[float, float] | None:
    """The least and the most the TP/PP > 1 starts printed (their medians over ranks)."""
    values = [v for lf in logs if lf.degree > 1 and (v := lf.value()) is not None]
    return (round(min(values), 2), round(max(values), 2)) if values else None


def medians(logs: list[LogFigures], absolute: bool = False) -> tuple[float | None, float | None]:
    """(one GPU, more than one): the median of the starts' figures, rounded to the GiB hundredth."""

    def med(values: list[float]) -> float | None:
        return round(statistics.median(values), 2) if values else None

    values = [(lf.degree, lf.value(absolute)) for lf in logs]
    return (
        med([v for d, v in values if d == 1 and v is not None]),
        med([v for d, v in values if d > 1 and v is not None]),
    )


def spread(tp: int, pp: int = 1) -> tuple[float, float]:
    """The interval the checks take the estimate in, as factors: with TP/PP the printed range;
    on one GPU half to twice (its printed range holds a unified-memory device's 8 GiB)."""
    if tp * pp > 1:
        return PARALLEL_RANGE_GIB[0] / PARALLEL_GIB, PARALLEL_RANGE_GIB[1] / PARALLEL_GIB
    return 0.5, 2.0


def estimate(tp: int, pp: int = 1) -> tuple[int, str]:
    """The plan's non-torch estimate per GPU for this degree, and the sentence that says what it is."""
    if tp * pp > 1:
        low, high = PARALLEL_RANGE_GIB
        return int(PARALLEL_GIB * GiB), (
            f"estimated: ~{PARALLEL_GIB:.2f} GiB of non-torch memory per GPU with TP/PP > 1 (NCCL and "
            f"custom all-reduce buffers, cuBLAS workspaces), {SOURCE}; real starts printed {low:.2f}-{high:.2f} GiB"
        )
    return int(SINGLE_GIB * GiB), (
        f"estimated: ~{SINGLE_GIB:.2f} GiB of non-torch memory on one GPU (cuBLAS workspaces), {SOURCE}"
    )


def estimate_absolute(tp: int, pp: int = 1) -> tuple[int, str]:
    """V0 0.6's non-torch figure per GPU (the CUDA context included), from its printed absolute figures."""
    gib = ABSOLUTE_PARALLEL_GIB if tp * pp > 1 else ABSOLUTE_SINGLE_GIB
    return int(gib * GiB), (
        f"estimated: ~{gib:.2f} GiB of non-torch memory per GPU as V0 0.6 counts it (the CUDA context, cuBLAS "
        f"and NCCL), the median of the absolute figures real V0 0.6 starts printed (scripts/non_torch_table.py)"
    )
