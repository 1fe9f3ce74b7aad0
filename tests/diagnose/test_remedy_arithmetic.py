"""Every numeric remedy offered on the corpus and the fixtures, re-derived from the log's own text by
vLLM's arithmetic (issue 24), independently of the parser and the memory model: one check per
family of remedy that was once wrong. Each family's fixtures (tests/diagnose/test_remedy_checks.py)
show the offered and refused values by hand; this test holds the rule over every real log."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import CORPUS, FIXTURES, log_text, triage_file

GiB = float(1 << 30)
_TP_RANK = re.compile(r"in world size \d+ is assigned as DP rank \d+, PP rank \d+, (?:PCP rank \d+, )?TP rank (\d+)")
_TP_ARG = re.compile(r"tensor_parallel_size[=:]\s*'?(\d+)")
_ESTIMATE = re.compile(r"estimated maximum model length is (\d+)")
_CC = re.compile(r"has compute capability (\d+)\.(\d+)")
_NEGATIVE_V1 = re.compile(r"Available KV cache memory: -\d")
_KV_SIZED = re.compile(r"GPU KV cache size: [\d,]+ tokens|# (?:GPU|CUDA) blocks: \d+")
_GRAPHS = re.compile(r"Graph capturing finished in \d+ secs?, took ([\d.]+) GiB")


def _logs() -> list[Path]:
    logs = sorted(FIXTURES.glob("*/*.log"))
    if CORPUS.is_dir():
        logs += sorted(CORPUS.glob("*.log"))
    return logs


def _offered(path: Path) -> list[dict[str, str]]:
    return [dict(r.flags) for d in triage_file(path).diagnoses for r in d.remedies if r.flags]


@pytest.fixture(scope="module")
def offers() -> list[tuple[Path, str, list[dict[str, str]]]]:
    out = []
    for path in _logs():
        out.append((path, log_text(path), _offered(path)))
    return out


def test_tensor_parallel_is_above_the_tp_the_log_runs(offers):
    checked = 0
    for path, text, flag_sets in offers:
        running = [int(n) + 1 for n in _TP_RANK.findall(text)] + [int(n) for n in _TP_ARG.findall(text)]
        for f in flag_sets:
            if (
                "--tensor-parallel-size" in f
                and running
                and "parallelism" not in path.parent.name
                and not path.name.startswith(("parallelism", "rocm-"))
            ):
                checked += 1
                assert int(f["--tensor-parallel-size"]) > max(running), (path.name, f, max(running))
    assert checked >= 5


def test_lengths_stay_at_or_under_vllms_printed_estimate(offers):
    """vLLM's estimate is the longest length its own search fits in the exact pool (any attention kind)."""
    checked = 0
    for path, text, flag_sets in offers:
        estimates = [int(n) for n in _ESTIMATE.findall(text)]
        if not estimates:
            continue
        for f in flag_sets:
            if "--max-model-len" in f:
                bound = min(estimates) * (2 if f.get("--kv-cache-dtype", "").startswith("fp8") else 1)
                checked += 1
                assert int(f["--max-model-len"]) <= bound, (path.name, f, bound)
    assert checked >= 5


def test_no_float16_below_vllms_compute_capability_floor(offers):
    for path, text, flag_sets in offers:
        caps = [(int(a), int(b)) for a, b in _CC.findall(text)]
        if caps and min(caps) < (7, 0):
            assert all("--dtype" not in f for f in flag_sets), path.name


def test_no_shorter_context_for_a_v1_negative_pool(offers):
    """V1 profiles max_num_batched_tokens: max_model_len does not move the activation peak."""
    seen = 0
    for path, text, flag_sets in offers:
        if _NEGATIVE_V1.search(text) and "V1 LLM engine" in text:
            seen += 1
            assert all(set(f) != {"--max-model-len"} for f in flag_sets), path.name
    assert seen >= 1


def test_no_fewer_dummy_images_once_the_kv_cache_is_sized(offers):
    checked = 0
    for path, text, flag_sets in offers:
        if any("--limit-mm-per-prompt" in f for f in flag_sets):
            checked += 1
            assert not _KV_SIZED.search(text), path.name
    assert checked >= 1


def test_enforce_eager_offered_where_the_printed_graphs_cover_the_shortfall(offers):
    """Where graphs were captured (and printed) before an OOM whose shortfall they cover, eager is offered."""
    checked = 0
    oom = re.compile(
        r"Tried to allocate ([\d.]+) (GiB|MiB)\. GPU \d+ has a total capacity of [\d.]+ GiB of which "
        r"([\d.]+) (GiB|MiB) is free"
    )
    for path, text, flag_sets in offers:
        graphs, m = _GRAPHS.search(text), oom.search(text)
        if not graphs or not m or graphs.start() > m.start():
            continue
        req = float(m.group(1)) * (1 if m.group(2) == "GiB" else 1 / 1024) + 0.005
        free = float(m.group(3)) * (1 if m.group(4) == "GiB" else 1 / 1024) - 0.005
        if req - free <= float(graphs.group(1)) - 0.005:
            checked += 1
            assert {"--enforce-eager": ""} in flag_sets, path.name
    assert checked >= 2
