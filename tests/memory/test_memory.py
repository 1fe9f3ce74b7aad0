"""The memory model against vLLM's formulas (0.10.1 / 0.6.3 source) and vLLM's own printed figures.

Unit tests build MemoryInputs by hand; corpus tests read figures that vLLM printed from
../shared/corpus at test time (skipped when it is absent) and check the model reproduces them.
"""

from __future__ import annotations

import re

import pytest
from conftest import CORPUS, log_text
from msgspec.structs import replace

from triage.memory import (
    FAILS,
    FITS,
    KV_FIT,
    OUTSIDE,
    STARTUP,
    UNKNOWN,
    Config,
    MemoryInputs,
    Quantity,
    budget,
    evaluate,
    kv,
    solve,
    verify,
)
from triage.units import GiB, MiB


def gib(x: float) -> Quantity:
    return Quantity.printed_bytes(round(x * GiB))


def test_printed_two_decimal_gib_carries_half_a_hundredth():
    q = gib(1.25)
    assert q.lo == pytest.approx(1.245 * GiB) and q.hi == pytest.approx(1.255 * GiB)
    m = Quantity.printed_bytes(round(442.62 * MiB))
    assert m.hi - m.lo == pytest.approx(0.01 * MiB)
    assert Quantity.printed_bytes(123456789).width == 0  # not on a printed grid: exact


def test_interval_arithmetic_keeps_the_worst_case():
    d = gib(10.00) - gib(1.25)
    assert d.lo == pytest.approx(8.74 * GiB) and d.hi == pytest.approx(8.76 * GiB)
    assert d.source == "derived"


def test_startup_check_is_vllms_free_below_requested():
    # gpu_worker.init_device: free < total x util raises; 0.90 x 79.19 = 71.27 > 70.00 free
    inp = MemoryInputs(engine="v1", failure=STARTUP, total=gib(79.19), free=gib(70.00), util=Quantity.exact(0.9))
    [c] = [c for c in evaluate(inp) if c.name == STARTUP]
    assert c.verdict == FAILS
    u = budget.max_util_for_free(gib(70.00), gib(79.19))
    assert u == 0.88  # 0.88 x 79.195 = 69.69 <= 69.995; 0.89 x 79.195 = 70.48 > 69.995
    assert verify(inp, {"--gpu-memory-utilization": "0.88"}).target.verdict == FITS


def test_v0_has_no_startup_check():
    inp = MemoryInputs(engine="v0", total=gib(79.19), free=gib(10.0))
    assert all(c.name != STARTUP for c in evaluate(inp))


def test_kv_fit_with_worst_case_rounding_and_whole_blocks():
    # needed 10.00 GiB for 40960 tokens = 2560 blocks; pool 1.25 GiB.
    # worst case: floor(1.245 / (10.005 / 2560)) = floor(318.56) = 318 blocks = 5088 tokens.
    inp = MemoryInputs(engine="v1", failure=KV_FIT, pool=gib(1.25), kv_needed=gib(10.00), max_model_len=40960)
    assert solve.fit_len(inp) == 5088
    assert verify(inp, {"--max-model-len": "5120"}).target.verdict != FITS  # the naive 40960 x 1.25 / 10
    assert not verify(inp, {"--kv-cache-dtype": "fp8"}).ok  # 5.00 GiB > 1.25 GiB: fp8 alone does not fit
    assert solve.fp8_len(inp) == 10192  # floor(1.245 / (10.005 / 2 / 2560)) = 637 blocks x 16


def test_block_bytes_from_pool_and_tokens_is_an_interval():
    bb = kv.block_bytes_from_pool(gib(0.85), 6144, 16)
    worst, best = kv.pool_tokens(gib(0.85), bb, 16)
    assert worst <= 6144 <= best


def test_vllm_estimate_on_exact_figures():
    # estimate_max_model_len: largest L with cdiv(L, 16) x bpb <= available, capped at max_model_len
    bpb = 2 * MiB
    assert kv.vllm_estimate(485 * bpb + 1, bpb, 16, 8192) == 7760
    assert kv.vllm_estimate(10 * GiB, bpb, 16, 8192) == 8192


def test_outside_budget_cut_leaves_the_shortfall():
    # graph capture asked 2.00 GiB with 0.50 GiB free on 80.00 GiB at util 0.95
    inp = MemoryInputs(
        engine="v1",
        failure="cuda_graph_capture",
        total=gib(80.0),
        util=Quantity.exact(0.95),
        oom_requested=gib(2.0),
        oom_free=gib(0.5),
    )
    u = solve.outside_util(inp)
    # short 1.51 GiB worst case: 0.95 - 1.51 / 79.995 = 0.9311 -> 0.93
    assert u == 0.93
    [c] = [c for c in verify(inp, {"--gpu-memory-utilization": "0.93"}).checks if c.name == OUTSIDE]
    assert c.verdict == FITS and c.margin > 0
    assert verify(inp, {"--enforce-eager": ""}).ok


def test_utilization_cut_below_the_weights_is_refused():
    # 16.01 GiB free of 93.00 GiB; 26 GiB of weights (estimated): no utilization that passes
    # the startup check holds them
    w = Quantity(26 * GiB, 23.4 * GiB, 28.6 * GiB, "estimated")
    inp = MemoryInputs(
        engine="v1", failure=STARTUP, total=gib(93.0), free=gib(16.01), weights=w, util=Quantity.exact(0.8)
    )
    assert solve.startup_util(inp) is None
    assert solve.weights_exceed(inp) is not None


def test_small_model_small_budget_is_offered():
    # 4.04 GiB free of 119.70 GiB, a 0.27 GB model: 0.03 x 119.705 = 3.59 <= 4.035
    w = Quantity(0.274e9, 0.247e9, 0.301e9, "estimated")
    inp = MemoryInputs(engine="v1", failure=STARTUP, total=gib(119.70), free=gib(4.04), weights=w)
    # thousandths below 0.10, leaving 5% of the free (0.20 GiB) outside: (4.035 - 0.202) / 119.705 = 0.032
    assert solve.startup_util(inp) == 0.032


def test_v0_block_count_limits_max_model_len():
    # raise_if_cache_size_invalid: max_model_len > blocks x block_size
    inp = MemoryInputs(engine="v0", failure=KV_FIT, gpu_blocks=1000, max_model_len=32768)
    assert solve.fit_len(inp) == 16000
    assert [c.verdict for c in evaluate(inp) if c.name == KV_FIT] == [FAILS]


def test_v0_multimodal_profile_ignores_max_num_seqs():
    inp = MemoryInputs(
        engine="v0",
        failure="profile_run",
        oom_requested=Quantity.printed_bytes(800 * MiB),
        oom_free=Quantity.printed_bytes(round(442.62 * MiB)),
        mm_single_seq=True,
        max_num_seqs=256,
    )
    assert not verify(inp, {"--max-num-seqs": "128"}).ok


def test_missing_figures_cannot_tell():
    inp = MemoryInputs(engine="v1", failure=KV_FIT, max_model_len=8192)
    [c] = [c for c in evaluate(inp) if c.name == KV_FIT]
    assert c.verdict == UNKNOWN and c.missing
    assert "cannot tell" in c.describe()


def test_swap_space_is_per_gpu_times_tp():
    # V0 config: swap x GPUs per node > 0.7 x host RAM raises; 16 GiB printed = 4 GiB x TP 4
    inp = MemoryInputs(engine="v0", failure="host_swap_space", tp=4, swap_total=gib(16.0), cpu_total=gib(32.0))
    assert [c.verdict for c in evaluate(inp, Config(swap_space=4))] == [FITS]  # 16 <= 22.4
    assert [c.verdict for c in evaluate(inp, Config(swap_space=6))] == [FAILS]  # 24 > 22.4


# ------------------------------------------------------------------ vLLM's own printed figures

_KV_MEM = re.compile(r"Available KV cache memory: (-?[0-9.]+) GiB")
_KV_TOK = re.compile(r"GPU KV cache size: ([0-9,]+) tokens")
_CONC = re.compile(r"Maximum concurrency for ([0-9,]+) tokens per request: ([0-9.]+)x")
_EST = re.compile(
    r"max seq len \((\d+)\), \(([0-9.]+) Gi?B KV cache is needed, which is larger than the "
    r"available KV cache memory \(([0-9.]+) Gi?B\)\. Based on the available memory, the "
    r"estimated maximum model length is (\d+)"
)


# Corpus logs (new with taxonomy v3) whose printed figures the model does not reproduce yet (issue 24).
FIGURE_KNOWN_MISSES: dict[str, str] = {}


def _corpus_texts():
    if not CORPUS.is_dir():
        pytest.skip("../shared/corpus is not here")
    return {p.name: log_text(p) for p in sorted(CORPUS.glob("*.log")) if p.name not in FIGURE_KNOWN_MISSES}


def test_tokens_per_gib_reproduces_printed_kv_tokens():
    cases = 0
    for name, text in _corpus_texts().items():
        mem, tok = _KV_MEM.search(text), _KV_TOK.search(text)
        if not mem or not tok or float(mem.group(1)) <= 0:
            continue
        pool, tokens = gib(float(mem.group(1))), int(tok.group(1).replace(",", ""))
        bb = kv.block_bytes_from_pool(pool, tokens, 16)
        tpg = kv.tokens_per_gib(bb, 16)
        assert tpg.lo * pool.lo / GiB <= tokens + 16 and tokens <= tpg.hi * pool.hi / GiB, name
        worst, best = kv.pool_tokens(pool, bb, 16)
        assert worst <= tokens <= best, name
        conc = _CONC.search(text)
        if conc:  # vLLM's formula: full attention, or a sliding window's +1 block (window >= the length)
            length, printed = int(conc.group(1).replace(",", "")), float(conc.group(2))
            full = kv.max_concurrency(tokens // 16, kv.request_blocks(length, 16))
            window = kv.max_concurrency(tokens // 16, kv.request_blocks(length, 16, sliding_window=length + 1))
            assert abs(printed - round(full, 2)) <= 0.01 or abs(printed - round(window, 2)) <= 0.01 or printed > full, (
                name
            )  # hybrid groups: fewer blocks per request than full attention
        cases += 1
    assert cases >= 5


def test_estimated_max_model_len_is_reproduced():
    cases = 0
    for name, text in _corpus_texts().items():
        for m in _EST.finditer(text):
            length, needed, avail, estimate = int(m.group(1)), float(m.group(2)), float(m.group(3)), int(m.group(4))
            inp = MemoryInputs(
                engine="v1", failure=KV_FIT, pool=gib(avail), kv_needed=gib(needed), max_model_len=length
            )
            bb = kv.block_bytes_from_needed(gib(needed), length, 16)
            worst, best = kv.pool_tokens(gib(avail), bb, 16)
            # need per token never rises with the length (full attention linear, sliding-window and Mamba
            # layers capped), so vLLM's estimate is at most the linear best; full attention is in [worst, best]
            assert estimate <= best, name
            if estimate >= worst:  # full attention: the model alone (without the estimate) stays under it
                offered = solve.fit_len(inp)
                assert offered is not None and offered <= estimate, name  # never more than vLLM allows
                assert offered >= 0.9 * estimate, name  # and not wasteful by more than 10%
            # with the estimate read (as the tool does), the model offers exactly vLLM's figure
            assert solve.fit_len(replace(inp, kv_estimate=estimate)) == estimate, name
            cases += 1
    assert cases >= 2


def test_pinned_pool_is_not_sized_by_utilization():
    # kv_cache_memory_bytes pins the pool (profiling skipped): utilization changes nothing; pinning
    # what one request needs does. needed 4.26 GiB for 100000 tokens -> at most 4.265 GiB, rounded up to a MiB
    inp = MemoryInputs(
        engine="v1",
        failure=KV_FIT,
        pool=gib(4.25),
        kv_cache_memory=gib(4.25),
        kv_needed=gib(4.26),
        max_model_len=100000,
    )
    assert not verify(inp, {"--gpu-memory-utilization": "0.95"}).ok
    n = solve.kv_memory(inp)
    assert n == -(-round(4.265 * GiB) // MiB) * MiB
    assert verify(inp, {"--kv-cache-memory-bytes": str(n)}).ok


def test_pinned_pool_line_is_read():
    from conftest import triage_text

    log = (
        "(EngineCore pid=31) INFO 08-21 18:37:44 [gpu_worker.py:492] Initial free memory 31.16 GiB, reserved "
        "4.25 GiB memory for KV Cache as specified by kv_cache_memory_bytes config and skipped memory "
        "profiling. This does not respect the gpu_memory_utilization config.\n"
    )
    facts = triage_text(log).facts
    assert facts.get("kv_cache_memory_bytes") == round(4.25 * GiB)


def test_a_lower_utilization_bounds_the_pool_without_the_total():
    from triage.memory.budget import pool_at_lower_util

    g = float(1 << 30)
    pool = Quantity.rounded(3 * g, 0.01 * g)  # printed 3.00 GiB at utilization 0.9
    # non_kv (>= 9 GiB) drops out only to its lower end: total = (pool + non_kv) / 0.9 >= 13.33 GiB,
    # so 0.1 less utilization takes at least 1.33 GiB: the pool is at most 3.005 x 8/9 - 9 / 9
    shrunk = pool_at_lower_util(pool, 0.9, 0.8, 9 * g, None)
    assert shrunk.hi == pytest.approx(3.005 * g * 8 / 9 - g) and shrunk.lo == float("-inf")
    both = pool_at_lower_util(pool, 0.9, 0.8, 9 * g, 10 * g)
    assert both.lo == pytest.approx(2.995 * g * 8 / 9 - 10 * g / 9) and both.hi == shrunk.hi
    # a larger GPU cannot help: for any total consistent with the print, the pool stays under hi
    for non_kv in (9 * g, 20 * g, 60 * g):
        for printed in (2.995 * g, 3.005 * g):
            total = (printed + non_kv) / 0.9
            assert total * 0.8 - non_kv <= shrunk.hi + 1
    with pytest.raises(ValueError):
        pool_at_lower_util(pool, 0.9, 0.95, 0.0, None)
