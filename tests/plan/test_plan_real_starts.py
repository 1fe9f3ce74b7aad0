"""`plan` against real vLLM starts: a table of facts, the plan's error per row, stated.

Each row is a start from ../shared/corpus that printed what vLLM computed: the GPU's total,
the weights it loaded and the KV cache memory it kept, per GPU (facts only: numbers and
flags, no log text). The model's config.json is a fixture under fixtures/configs/ written
from the public config values. The plan runs from the same flags and the same total; its
error against what vLLM printed is stated in the row, so a change to the estimates that moves
a figure shows here and is made deliberately.

The rows are every corpus start (healthy, or failing after its KV pool was sized) whose GPU
total the log prints (or its own figures give: the V0 0.7.2 row) and whose model config is
public and stated exactly; the other starts serve models whose configs cannot be stated
(local fine-tunes, unnamed paths) or print no GPU total (a card's typical total moves by
~0.1 GiB, 2% of a small pool). What holds: the V1 starts' KV pools are within 0.7% mean
absolute, 1.4% worst (the issue's aim: 2% and 5%). The weights, counted from the config (no
fixture carries an index file), are within 1% on six rows of eight (0.8% mean absolute;
vLLM 0.28 printed 3.5% more than the parameters for Qwen2.5-1.5B; Qwen2.5-14B at TP 2,
1.2%). Every healthy V1 start but one is "fits": Qwen3-Coder at 1.15x concurrency is
"borderline", as its config-counted weights carry a +-3% interval (1.7 GiB) and one
131,072-token request needs 12 GiB of its 13.8 GiB pool. The V0 rows are stated only: V0
profiled a whole max_model_len batch and measured non-torch memory its own way (0.6.4
counted the CUDA context), so the plan's V1 arithmetic misses them by -11% to +13%.
"""

from __future__ import annotations

from typing import NamedTuple

import pytest
from conftest import ROOT

CONFIGS = ROOT / "fixtures" / "configs"


class Start(NamedTuple):
    model: str  # the Hugging Face id the start served (the config fixture is written from its config.json)
    fixture: str
    vllm: str
    flags: tuple[str, ...]
    total: int  # GPU total, bytes, as vLLM printed it
    weights: int  # per GPU, as printed
    kv: int  # KV cache memory, per GPU, as printed
    weights_error: float  # the plan's error, percent of the printed figure
    kv_error: float
    verdict: str  # the plan's verdict for the start ("fits" for every healthy V1 start but one, see below)


STARTS = [
    Start(
        "Qwen/Qwen2.5-1.5B-Instruct",
        "qwen2.5-1.5b-instruct",
        "0.28.1rc1 (V1)",
        (
            "--max-model-len",
            "4096",
            "--gpu-memory-utilization",
            "0.9",
            "--dtype",
            "float16",
            "--max-num-batched-tokens",
            "8192",
            "--enforce-eager",
        ),
        25200720609,
        3199750636,
        18640158065,
        -3.5,
        1.1,
        "fits",
    ),
    Start(
        "Qwen/Qwen2.5-Math-1.5B",
        "qwen2.5-1.5b-instruct",
        "0.11.0 (V1)",
        (
            "--max-model-len",
            "4096",
            "--gpu-memory-utilization",
            "0.95",
            "--dtype",
            "bfloat16",
            "--max-num-batched-tokens",
            "16384",
        ),
        85179938898,
        3092161705,
        75537737318,
        -0.2,
        0.3,
        "fits",
    ),
    Start(
        "meta-llama/Llama-3.1-8B-Instruct",
        "llama-3.1-8b-instruct",
        "V1 (version not printed)",
        ("--max-model-len", "8192"),
        25275882537,
        16095389942,
        6023691633,
        -0.2,
        1.4,
        "fits",
    ),
    Start(
        "meta-llama/Llama-3.1-8B-Instruct",
        "llama-3.1-8b-instruct",
        "0.6.4.post1 (V0)",
        (
            "--tensor-parallel-size",
            "2",
            "--max-model-len",
            "131072",
            "--gpu-memory-utilization",
            "0.9",
            "--max-num-seqs",
            "256",
            "--max-num-batched-tokens",
            "512",
        ),
        47695611822,
        8066163330,
        34016140984,
        -0.4,
        -4.3,
        "fits",
    ),
    Start(
        "Qwen/Qwen2.5-14B-Instruct",
        "qwen2.5-coder-14b-instruct",
        "0.7.2 (V0)",
        (
            "--tensor-parallel-size",
            "2",
            "--max-model-len",
            "32768",
            "--gpu-memory-utilization",
            "0.9",
            "--dtype",
            "half",
        ),
        42412802048,
        14955183499,
        18511309046,
        -1.2,
        13.2,
        "fits",
    ),
    Start(
        "llava-hf/llava-1.5-7b-hf (AWQ, ybelkada/llava-1.5-7b-hf-awq)",
        "llava-1.5-7b-hf-awq",
        "0.10.2 (V1)",
        ("--max-model-len", "4096", "--gpu-memory-utilization", "0.85"),
        17169131766,  # 15.99 GiB, "Free memory on device (13.58/15.99 GiB)"
        4566623977,  # 4.2530 GiB
        9652938998,  # 8.99 GiB
        -0.7,
        -0.2,
        "fits",
    ),
    Start(
        "Qwen/Qwen3-Coder-30B-A3B-Instruct",
        "qwen3-coder-30b-a3b-instruct",
        "0.26.1rc1 (V1)",
        ("--max-model-len", "131072", "--gpu-memory-utilization", "0.9", "--max-num-seqs", "16"),
        85094039552,  # 79.25 GiB, "Free memory on device (78.84/79.25 GiB)"
        61128122040,  # 56.93 GiB
        14860586844,  # 13.84 GiB
        -0.1,
        -0.2,
        "borderline",
    ),
    Start(
        "meta-llama/Llama-3.1-8B-Instruct",
        "llama-3.1-8b-instruct",
        "~0.6.4 (V0)",
        ("--max-model-len", "29000", "--gpu-memory-utilization", "0.9", "--max-num-batched-tokens", "29000"),
        25318832210,  # total_gpu_memory=23.58GiB
        16094101452,  # 14.9888 GB (GiB figures)
        3103113871,  # kv_cache_size=2.89GiB
        -0.2,
        -11.2,
        "borderline",
    ),
]
V1 = [s for s in STARTS if "V1" in s.vllm]


def _plan(start: Start):
    import argparse

    from triage.plan.command import make_plan

    args = argparse.Namespace(
        model=str(CONFIGS / start.fixture),
        gpu_memory=f"{start.total}B",
        gpu=None,
        nvidia_smi=None,
    )
    return make_plan(args, list(start.flags))


def _errors(start: Start) -> tuple[float, float]:
    plan = _plan(start)
    return (
        100 * (plan.weights_bytes_per_gpu / start.weights - 1),
        100 * (plan.kv_cache_bytes / start.kv - 1),
    )


@pytest.mark.parametrize("start", STARTS, ids=[f"{s.fixture}-{s.vllm.split()[0]}" for s in STARTS])
def test_the_plans_error_and_verdict_on_each_real_start_are_the_ones_stated(start):
    weights, kv = _errors(start)
    assert weights == pytest.approx(start.weights_error, abs=0.1), weights
    assert kv == pytest.approx(start.kv_error, abs=0.1), kv
    assert _plan(start).verdict == start.verdict


def test_the_v1_starts_kv_pools_are_within_two_percent_mean_absolute_and_five_worst():
    errors = [abs(_errors(s)[1]) for s in V1]
    assert len(errors) >= 5
    assert sum(errors) / len(errors) <= 2.0 and max(errors) <= 5.0, errors


def test_the_weights_are_within_one_percent_on_most_rows_and_under_four_on_every_one():
    errors = [abs(_errors(s)[0]) for s in STARTS]
    assert sum(e <= 1.0 for e in errors) >= 6 and max(errors) < 4.0, errors
    assert sum(errors) / len(errors) <= 1.0, errors


def test_every_healthy_v1_start_fits_but_the_one_a_config_count_leaves_open():
    open_ = [s.model for s in V1 if s.verdict != "fits"]
    assert open_ == ["Qwen/Qwen3-Coder-30B-A3B-Instruct"]
