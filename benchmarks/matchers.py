"""The scan's word-search engines side by side, on the benchmark's log shapes.

    python benchmarks/matchers.py                 # 8 MB of each shape
    python benchmarks/matchers.py --mb 32 --runs 3

For each engine installed (Hyperscan, the pure-Python search, and the Rust Aho-Corasick
automaton the project dropped after this measurement: its adapter lives here, so the
comparison can be run again wherever `ahocorasick-rs` is installed), with the scan's real
word set (`vocabulary.matcher()`'s grammar and evidence words):

- start-up: a fresh interpreter's import of the engine's library and the build of its
  search (Hyperscan: compiled afresh, and loaded from the cache a second run finds);
- search: the engine's hits over every 1 MiB chunk of each shape (the raw search, no
  request text masked), in MB/s;
- scan: the whole quiet chunk scan (`scan.iter_marked`, the pipeline's way) with that engine.

Best of `--runs`; the logs are generated (seeded) under a temporary folder.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import logs
import shapes

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from triage.ingest import matcher as matcher_module  # noqa: E402
from triage.ingest.matcher import Engine, Matcher  # noqa: E402
from triage.ingest.read import InputStats  # noqa: E402
from triage.ingest.scan import iter_marked  # noqa: E402
from triage.parse.sysinfo import WORDS  # noqa: E402
from triage.parse.vocabulary import LEVEL_WORDS, number_words, prefilter_words  # noqa: E402

MB = 1_000_000
CHUNK = 1 << 20
SHAPES: dict[str, Callable[[Path, int], None]] = {
    "startup": lambda p, n: logs.write_log("startup", p, min(n, 2 * MB)),
    "serve": lambda p, n: logs.write_log("serve", p, n),
    "access": lambda p, n: logs.write_log("access", p, n),
    "longserve": shapes.longserve,
    "metrics": shapes.metrics,
    "smi": lambda p, n: shapes.smi(p, 0),
    "chains": lambda p, n: shapes.chains(p, 0),
}
_STARTUP = """
import sys, time
sys.path.insert(0, {here!r})
sys.path.insert(0, {root!r})
import matchers
words = matchers.Matcher((*matchers.prefilter_words(), *matchers.LEVEL_WORDS), matchers.WORDS, "python").words
t0 = time.perf_counter()
{library}
t1 = time.perf_counter()
matchers.ENGINES[{engine!r}](words)
t2 = time.perf_counter()
print(t1 - t0, t2 - t1)
"""


class AhoCorasick:
    """The Rust Aho-Corasick automaton as an `Engine` (the project's adapter before it was dropped)."""

    name = "ahocorasick"

    def __init__(self, words: list[bytes]) -> None:
        import ahocorasick_rs as acr

        self._ac = acr.BytesAhoCorasick(words, implementation=acr.Implementation.DFA)

    def hits(self, data: bytes) -> list[tuple[int, int]]:
        return [(start, i) for i, start, _end in self._ac.find_matches_as_indexes(data, overlapping=True)]

    def hits_upto(self, data: bytes, cap: int) -> list[tuple[int, int]] | None:
        found = self.hits(data)  # the automaton cannot stop early
        return found if len(found) <= cap else None

    def line_heads(self, patterns: list[bytes]) -> None:
        return None


ENGINES: dict[str, Callable[[list[bytes]], Engine]] = {**matcher_module._BACKENDS, "ahocorasick": AhoCorasick}
_MATCHERS: dict[str, Matcher] = {}


def matcher(engine: str) -> Matcher:
    """The scan's matcher with `engine` as its search (built once)."""
    if engine not in _MATCHERS:
        m = Matcher((*prefilter_words(), *LEVEL_WORDS), WORDS, "python", number_words())
        m.engine = ENGINES[engine](m.words)
        _MATCHERS[engine] = m
    return _MATCHERS[engine]


def engines() -> list[str]:
    """The engines that build here."""
    out = []
    for name in ENGINES:
        try:
            matcher(name)
        except Exception:  # noqa: BLE001 - not installed: left out of the table
            continue
        out.append(name)
    return out


_LIBRARIES = {"hyperscan": "import hyperscan", "ahocorasick": "import ahocorasick_rs", "python": "import re"}


def startup(engine: str, cache: str) -> tuple[float, float]:
    """(seconds to import `engine`'s library, seconds to build its search for the scan's
    words) in a fresh interpreter using `cache` as its cache folder."""
    env = {**os.environ, "XDG_CACHE_HOME": cache}
    here = str(Path(__file__).resolve().parent)
    code = _STARTUP.format(here=here, root=str(ROOT), engine=engine, library=_LIBRARIES[engine])
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    words, build = out.stdout.split()
    return float(words), float(build)


def search_rate(engine: str, data: bytes, runs: int) -> float:
    """MB/s of the engine's search alone (every hit, overlapping ones too) over `data`'s 1 MiB chunks."""
    hits = matcher(engine).engine.hits
    chunks = [data[i : i + CHUNK] for i in range(0, len(data), CHUNK)]
    best = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        for chunk in chunks:
            hits(chunk)
        best = min(best, time.perf_counter() - t0)
    return len(data) / MB / best


def scan_rate(engine: str, data: bytes, runs: int) -> float:
    """MB/s of the quiet chunk scan with the engine (every line it hands on consumed)."""
    m = matcher(engine)
    chunks = [data[i : i + CHUNK] for i in range(0, len(data), CHUNK)]
    best = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        for _line in iter_marked(chunks, InputStats(name="x"), m, 3):
            pass
        best = min(best, time.perf_counter() - t0)
    return len(data) / MB / best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=int, default=8, help="size of each generated shape (MB)")
    ap.add_argument("--runs", type=int, default=2)
    args = ap.parse_args()
    names = engines()
    with tempfile.TemporaryDirectory() as tmp:
        print("start-up (fresh interpreter)   library import ms   build ms (cold cache)   build ms (warm cache)")
        for name in names:
            cache = os.path.join(tmp, f"cache-{name}")
            lib, cold = startup(name, cache)
            _, warm = startup(name, cache)
            print(f"  {name:<28} {lib * 1e3:>17.1f} {cold * 1e3:>21.1f} {warm * 1e3:>23.1f}")
        print()
        print(f"{'shape':<10} {'MB':>6}  " + "  ".join(f"{n + ' search':>18} {n + ' scan':>16}" for n in names))
        for shape, write in SHAPES.items():
            path = Path(tmp) / f"{shape}.log"
            write(path, args.mb * MB)
            data = path.read_bytes()
            cells = []
            rates = {}
            for name in names:
                rates[name] = (search_rate(name, data, args.runs), scan_rate(name, data, args.runs))
                cells.append(f"{rates[name][0]:>13.0f} MB/s {rates[name][1]:>11.0f} MB/s")
            win = max(names, key=lambda n: rates[n][1])
            print(f"{shape:<10} {len(data) / MB:>6.1f}  " + "  ".join(cells) + f"   scan won by {win}")


if __name__ == "__main__":
    main()
