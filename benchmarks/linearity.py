"""How the time of each per-line reader, and of the whole pipeline, grows with its input.

    python benchmarks/linearity.py            # every shape at n, 10n and 100n characters
    python benchmarks/linearity.py --base 600 # longer inputs

Each pathological shape of tests/hostile/line_shapes.py (a unit repeated between a prefix and
a suffix) is read at n, 10n and 100n characters by the reader it is aimed at (peeling and
the grammar, redaction, the nvidia-smi row reader, the anchor scan), and the pipeline at n,
10n, 100n lines of real log text. Linear work grows about 10x and 100x; a quadratic regex
or loop 100x and 10000x. The CPU time of the best of a few runs is printed with the two
ratios; a shape past 100x / 2000x is flagged and the exit status is 1.

This used to be a test; a timing belongs here (the test suite asserts no speed): the suite
runs the same shapes at full size for sound answers, and checks statically that no regex
of the package can backtrack exponentially (tests/hostile/test_regex_shapes.py).
"""

from __future__ import annotations

import argparse
import io
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "hostile"))
sys.path.insert(0, str(ROOT))
import line_shapes  # noqa: E402 - the shapes live with the tests that run them at full size

FLOOR = 5e-4  # seconds: below this a ratio measures the clock
BOUNDS = (100, 2000)  # 10x and 100x input: a quadratic cost gives 100x and 10000x


def best_cpu(fn: Callable[[object], object], arg: object, repeat: int = 3) -> float:
    """The least CPU time of a few runs (another process busy on a core does not count)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        fn(arg)
        best = min(best, time.process_time() - start)
    return best


def growth(fn: Callable[[object], object], make: Callable[[int], object], base: int) -> tuple[float, float, float]:
    """(seconds at n, time ratio at 10n, time ratio at 100n)."""
    small = max(best_cpu(fn, make(base)), FLOOR)
    return small, best_cpu(fn, make(10 * base)) / small, best_cpu(fn, make(100 * base), repeat=2) / small


def pipeline_case(lines: int) -> tuple[Callable[[bytes], object], Callable[[int], bytes]]:
    from triage.pipeline import run

    fixtures = sorted((ROOT / "fixtures" / "logs").glob("**/*.log"))
    real = sorted(
        {
            line
            for p in fixtures
            for line in p.read_text(encoding="utf-8", errors="replace").splitlines()
            if line.strip()
        }
    )
    block = ("\n".join(random.Random(7).sample(real, lines)) + "\n").encode()
    run(io.BytesIO(block), "warm")
    return (lambda data: run(io.BytesIO(data), "x")), (lambda n: block * max(1, n // lines))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", type=int, default=300, help="characters of the smallest input (default 300)")
    args = ap.parse_args(argv)
    flagged = 0
    print(f"{'reader':<11} {'shape':<34} {'n s':>8} {'10n x':>7} {'100n x':>8}")
    cases = [
        (label, fn, line_shapes.shape(*s), repr(s[1] + s[0] + s[2])[1:-1][:34])
        for label, fn, shapes in line_shapes.families()
        for s in shapes
    ]
    fn, make = pipeline_case(100)
    cases.append(("pipeline", fn, make, "100 real lines, repeated"))
    for label, fn, make, name in cases:
        small, ten, hundred = growth(fn, make, args.base)
        bad = ten >= BOUNDS[0] or hundred >= BOUNDS[1]
        flagged += bad
        print(f"{label:<11} {name:<34} {small:8.4f} {ten:7.1f} {hundred:8.1f}{'  SUPER-LINEAR' if bad else ''}")
    print(f"{len(cases)} cases, {flagged} super-linear")
    return 1 if flagged else 0


if __name__ == "__main__":
    raise SystemExit(main())
