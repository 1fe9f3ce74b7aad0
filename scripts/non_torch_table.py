"""Print the non-torch memory figures vLLM printed in a folder of logs, by TP/PP degree, with the medians.

    python scripts/non_torch_table.py [FOLDER]   (default ../shared/corpus)

The medians are the plan's estimate (triage/plan/non_torch.py holds them as constants;
tests/plan/test_non_torch.py recomputes them from ../shared/corpus).
"""

from __future__ import annotations

import sys
from pathlib import Path

from triage.plan.non_torch import medians, read


def main(argv: list[str]) -> int:
    folder = Path(argv[0] if argv else "../shared/corpus")
    rows = []
    for path in sorted(folder.glob("*.log")):
        found = read(path.read_text(encoding="utf-8", errors="replace"))
        if found is not None:
            rows.append((path.name, found))
    print(f"{'TP':>3} {'PP':>3} {'vLLM':<22} {'figures (GiB, kind)':<44} {'start':>6}  log")
    for name, lf in sorted(rows, key=lambda r: (r[1].degree, r[0])):
        figs = ", ".join(f"{f.gib:g} {f.kind}" for f in lf.figures)
        value = lf.value()
        shown = f"{value:.2f}" if value is not None else "-"
        print(f"{lf.tp:>3} {lf.pp:>3} {lf.version[:22]:<22} {figs[:44]:<44} {shown:>6}  {name}")
    single, parallel = medians([lf for _, lf in rows])
    print(f"median, one GPU: {single} GiB; median, TP/PP > 1: {parallel} GiB (increase: V0 0.7, V1)")
    single, parallel = medians([lf for _, lf in rows], absolute=True)
    print(f"median, one GPU: {single} GiB; median, TP/PP > 1: {parallel} GiB (absolute: V0 0.6, for V0 0.6 plans)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
