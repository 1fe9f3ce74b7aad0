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


# --- the families of issue 24 not held above: a TP the weights fit, a utilization cut that keeps one
# --- request's KV, and the computable remedies that must be offered (pinned pool, V0 block count,
# --- V0 profile length). Each re-derived from the log's text, worst case on every printed figure.
_GIB = r"([\d.]+) GiB"
_UTIL = re.compile(r"gpu_memory_utilization'?[=:]\s*([\d.]+)")
_TOTAL = re.compile(r"total capacity of ([\d.]+) GiB|Free memory on device \([\d.]+/([\d.]+) GiB\)")
_POOL = re.compile(r"Available KV cache memory: " + _GIB)
_TOKENS = re.compile(r"GPU KV cache size: ([\d,]+) tokens")
_LEN = re.compile(r"max_model_len'?[=:]\s*(\d+)|max_seq_len=(\d+)|Using max model len (\d+)")
_MODEL = re.compile(r"Starting to load model (\S+?)\.\.\.|model='([^']+)'|'model': '([^']+)'")
_SIZE = re.compile(r"(?<![A-Za-z])(?<!-A)(\d+(?:\.\d+)?)[Bb](?![A-Za-z0-9])")
_PINNED = re.compile(r"reserved ([\d.]+) ?GiB memory for KV Cache as specified by kv_cache_memory_bytes")
_NEEDED = re.compile(r"\(([\d.]+) GiB KV cache is needed, which is larger than the available KV cache memory")
_V0_BLOCKS = re.compile(
    r"max seq len \((\d+)\) is larger than the maximum number of tokens that can be stored in KV cache \((\d+)\)"
)
_ALLOC = re.compile(
    r"Tried to allocate ([\d.]+) (GiB|MiB)\. GPU \d+ has a total capacity of [\d.]+ GiB of which ([\d.]+) (GiB|MiB) is free"
)
_HALF = 0.005  # every printed GiB/MiB figure is rounded to 0.01


def _gib(value: str, unit: str = "GiB") -> float:
    return float(value) / (1 if unit == "GiB" else 1024)


def _first(rx: re.Pattern[str], text: str) -> str | None:
    m = rx.search(text)
    return next((g for g in m.groups() if g), None) if m else None


def _bytes_per_param(model: str) -> float:
    """The fewest bytes a parameter takes by the checkpoint's name (4-bit names first)."""
    low = model.lower()
    if any(k in low for k in ("awq", "gptq", "int4", "w4a16", "4bit", "bnb", "nf4", "gguf", "-q2", "-q4")):
        return 0.25 if "q2" in low else 0.5
    if any(k in low for k in ("fp8", "int8", "w8a8", "8bit")):
        return 1.0
    return 2.0


def test_a_tensor_parallel_size_the_weights_fit(offers):
    """Weights counted from the model name (at least 95% of the named size: '7B' is 6.7-7.6B) over the
    TP offered must fit the GPU's total at the log's utilization."""
    checked = 0
    for path, text, flag_sets in offers:
        model, total = _first(_MODEL, text), _first(_TOTAL, text)
        size = _SIZE.search(model.rsplit("/", 1)[-1]) if model else None
        if not size or not total:
            continue
        util = float(_first(_UTIL, text) or 0.9)
        weights = float(size.group(1)) * 1e9 * 0.95 * _bytes_per_param(model) / GiB
        for f in flag_sets:
            if "--tensor-parallel-size" in f and "parallelism" not in path.parent.name:
                checked += 1
                tp = int(f["--tensor-parallel-size"])
                assert weights / tp <= (float(total) + _HALF) * util, (path.name, f, weights / tp)
    assert checked >= 5


def test_a_utilization_cut_keeps_one_max_model_len_request_in_the_pool(offers):
    """After the KV cache was sized: pool at u = pool - total x (U - u) >= one request (bytes per token at
    most pool.hi / tokens), at the length the remedy sets or the log's."""
    checked = 0
    for path, text, flag_sets in offers:
        pool, tokens, total = _first(_POOL, text), _first(_TOKENS, text), _first(_TOTAL, text)
        if not (pool and tokens and total):
            continue
        util = float(_first(_UTIL, text) or 0.9)
        per_token = (float(pool) + _HALF) / int(tokens.replace(",", ""))
        for f in flag_sets:
            u = float(f.get("--gpu-memory-utilization", util))
            length = int(f.get("--max-model-len", _first(_LEN, text) or 0))
            if u >= util or not length:
                continue
            checked += 1
            left = float(pool) - _HALF - (float(total) + _HALF) * (util - u)
            assert left >= length * per_token, (path.name, f, left, length * per_token)
    assert checked >= 3


def test_the_pinned_pool_gets_the_bytes_one_request_needs(offers):
    """--kv-cache-memory-bytes sized the pool: vLLM's printed need (rounded up) is offered, and holds."""
    seen = 0
    for path, text, flag_sets in offers:
        needed = _first(_NEEDED, text.replace("\n", ""))  # a hard-wrapped paste splits it mid-word
        if not _PINNED.search(text) or not needed:
            continue
        seen += 1
        pins = [int(f["--kv-cache-memory-bytes"]) for f in flag_sets if "--kv-cache-memory-bytes" in f]
        assert pins, (path.name, flag_sets)
        assert all(p >= (float(needed) + _HALF) * GiB for p in pins), (path.name, pins)
    assert seen >= 2


def test_a_v0_block_count_gets_the_length_it_holds(offers):
    """V0's `# GPU blocks` bound: the tokens vLLM says the cache stores; the length offered is at most that."""
    seen = 0
    for path, text, flag_sets in offers:
        m = _V0_BLOCKS.search(text)
        if not m or "V1 LLM engine" in text:
            continue
        seen += 1
        lengths = [int(f["--max-model-len"]) for f in flag_sets if "--max-model-len" in f and len(f) == 1]
        assert lengths, (path.name, flag_sets)
        assert all(n <= int(m.group(2)) for n in lengths), (path.name, lengths)
    assert seen >= 2


def test_a_v0_profile_run_gets_the_length_whose_profile_fits(offers):
    """V0 without chunked prefill profiles max(max_model_len, 2048) tokens: a length whose scaled allocation
    fits what was free (at least 2048, below the log's) is offered wherever one exists, and fits."""
    seen = 0
    for path, text, flag_sets in offers:
        m, length = _ALLOC.search(text), _first(_LEN, text)
        v0 = "Initializing an LLM engine" in text or "Initializing a V0 LLM engine" in text
        if not (m and length and v0 and "profile_run" in text) or "chunked_prefill_enabled=True" in text:
            continue
        req, free = _gib(m.group(1), m.group(2)) + _HALF, _gib(m.group(3), m.group(4)) - _HALF
        fits = int(length) * free / req
        if fits < 2048 + 256 or fits >= int(length):
            continue
        seen += 1
        lengths = [int(f["--max-model-len"]) for f in flag_sets if "--max-model-len" in f and len(f) == 1]
        assert lengths, (path.name, flag_sets)
        assert all(max(n, 2048) * req / int(length) <= free for n in lengths), (path.name, lengths)
    assert seen >= 2
