"""Deep exception chains: the repeated middle links left out (ingest/chains.py: by the scan on
raw bytes, then after it) give the report that reading every link gives, but for the note
that says how many were skipped.

Logs are generated here: a startup header, then a handler that re-raises N levels deep.
"""

from __future__ import annotations

import functools
import io

import pytest

from triage import pipeline
from triage.ingest import chains, scan
from triage.ingest.control import ScanControl

E = "(EngineCore_DP0 pid=311) ERROR 10-02 16:20:{s:02d} [core.py:718] "
HEAD = [
    "(APIServer pid=1) INFO 10-02 16:20:00 [api_server.py:1896] vLLM API server version 0.10.2",
    "(EngineCore_DP0 pid=311) INFO 10-02 16:20:01 [core.py:70] Initializing a V1 LLM engine (v0.10.2)",
]
OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.64 GiB. GPU 0 has a total capacity of "
    "79.19 GiB of which 2.05 GiB is free."
)


def _link(
    i: int, exc: str, e: str, note: str = "During handling of the above exception, another exception occurred:"
) -> list[str]:
    return [
        e + "Traceback (most recent call last):",
        e + f'  File "/x/vllm/v1/worker/gpu_worker.py", line {100 + i % 50}, in retry_{i % 7}',
        e + "    self.model_runner.profile_run()",
        e + exc,
        e,
        e + note,
        e,
    ]


def _log(depth: int, odd: dict[int, str] | None = None, tick: int = 0, between: dict[int, str] | None = None) -> bytes:
    out = list(HEAD)
    for i in range(depth):
        e = E.format(s=(i // tick) % 60 if tick else 27)
        out += _link(i, (odd or {}).get(i, f"RuntimeError: attempt {i} failed"), e)
        if between and i in between:
            out.append(between[i])
    e = E.format(s=59)
    out += [
        e + "Traceback (most recent call last):",
        e + '  File "/x/vllm/v1/worker/gpu_worker.py", line 232, in determine_available_memory',
        e + "    self.model_runner.profile_run()",
        e + OOM,
    ]
    return ("\n".join(out) + "\n").encode()


class _Whole:
    """Every link handed on (the full path)."""

    def __init__(self, marked, control) -> None:
        self._marked = marked

    def __iter__(self):
        return iter(self._marked)


def _reports(data: bytes, monkeypatch) -> tuple[dict, dict]:
    cut = pipeline.run(io.BytesIO(data), "log").model_dump()
    monkeypatch.setattr(pipeline, "CutChains", _Whole)
    monkeypatch.setattr(pipeline, "iter_marked", functools.partial(scan.iter_marked, quiet=False))  # no skip
    whole = pipeline.run(io.BytesIO(data), "log").model_dump()
    monkeypatch.undo()
    return cut, whole


def _same(data: bytes, monkeypatch) -> dict:
    cut, whole = _reports(data, monkeypatch)
    notes = cut.pop("notes")
    assert whole.pop("notes") == [n for n in notes if "chained traceback" not in n]
    assert cut == whole
    cut["notes"] = notes
    return cut


@pytest.mark.parametrize("depth", [1, chains.FIRST_LINKS, chains.FIRST_LINKS + chains.LAST_LINKS + 1, 300])
def test_a_deep_chain_cut_gives_the_full_report(depth, monkeypatch):
    report = _same(_log(depth), monkeypatch)
    most = max(0, depth - chains.FIRST_LINKS - chains.LAST_LINKS)  # fewer when a link's digits change its shape
    skipped = [int(n.split()[0]) for n in report["notes"] if "chained traceback" in n]
    assert (skipped and 0 < skipped[0] <= most) or (not skipped and most <= 1)
    if depth == 300:
        assert skipped[0] > 250


def test_a_link_of_another_kind_in_the_middle_is_read(monkeypatch):
    report = _same(_log(300, odd={150: OOM, 151: "ValueError: No available memory for the cache blocks."}), monkeypatch)
    assert report["notes"]


@pytest.mark.parametrize(
    "between",
    [
        "(APIServer pid=1) ERROR 10-02 16:20:30 [core_client.py:564] RuntimeError: Engine core initialization failed.",
        "plain text with no prefix",
        "(EngineCore_DP0 pid=311) ERROR 10-02 16:20:27 [core.py:718] Traceback (most recent call last):",
    ],
)
def test_a_line_of_another_kind_between_links_is_read(between, monkeypatch):
    _same(_log(200, between={60: between, 120: between}), monkeypatch)


def test_timestamps_that_move_along_the_chain_do_not_end_it(monkeypatch):
    report = _same(_log(300, tick=7), monkeypatch)
    assert report["notes"]


@pytest.mark.parametrize("chunk", [4096, 1 << 16])
def test_the_scan_skips_repeated_links_within_a_chunk(chunk, monkeypatch):
    data = _log(300)
    stats = scan.InputStats("log")
    pieces = [data[i : i + chunk] for i in range(0, len(data), chunk)]
    control = ScanControl()
    handed = list(scan.iter_marked(iter(pieces), stats, pipeline.matcher(), 3, control=control))
    assert control.links_skipped > 0 and stats.lines == data.count(b"\n")
    assert len(handed) < data.count(b"\n") - 4 * control.links_skipped
    _same(data, monkeypatch)


def test_a_link_too_long_to_hold_is_handed_on(monkeypatch):
    frames = "\n".join(
        E.format(s=27) + f'  File "/x/m.py", line {i}, in f{i}' for i in range(chains.MAX_LINK_LINES + 50)
    )
    data = _log(
        200, odd={40: frames[len(E.format(s=27)) :] + "\n" + E.format(s=27) + "RuntimeError: attempt 40 failed"}
    )
    _same(data, monkeypatch)
