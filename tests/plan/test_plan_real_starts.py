"""`plan` against real vLLM starts: a table of facts, the plan's error per row, stated.

Each row is a start from ../shared/corpus that printed what vLLM computed: the GPU's total,
the weights it loaded and the KV cache memory it kept, per GPU (facts only: numbers and
flags, no log text). The model's config.json is a fixture under fixtures/configs/ written
from the public config values. The plan runs from the same flags and the same total; its
error against what vLLM printed is stated in the row, so a change to the estimates that moves
a figure shows here and is made deliberately.

The issue's aim is the KV pool within 2% mean absolute and the weights within 1%. What holds
(see the rows): the V1 starts' KV pools are within 2% on average (1.7%), each within 3%; the
weights are within 1% on three rows of five and 1.1% mean absolute (Qwen2.5-1.5B on 0.28
loads 3.5% more than its parameters; Qwen2.5-14B at TP 2, 1.2%); the V0 0.7.2 TP2 start's
pool is 21% over, because V0 profiled a whole max_model_len batch (32768 tokens) where the
plan assumes V1's 2048 (given --max-num-batched-tokens 32768 it is 6% over).
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
        -1.3,
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
        -1.2,
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
        -2.6,
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
        0.0,
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
        20.8,
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
def test_the_plans_error_on_each_real_start_is_the_one_stated(start):
    weights, kv = _errors(start)
    assert weights == pytest.approx(start.weights_error, abs=0.1), weights
    assert kv == pytest.approx(start.kv_error, abs=0.1), kv


def test_the_v1_starts_kv_pools_are_within_two_percent_on_average():
    errors = [abs(_errors(s)[1]) for s in V1]
    assert len(errors) >= 3
    assert sum(errors) / len(errors) <= 2.0 and max(errors) <= 3.0, errors


def test_the_weights_are_within_one_percent_on_most_rows_and_under_four_on_every_one():
    errors = [abs(_errors(s)[0]) for s in STARTS]
    assert sum(e <= 1.0 for e in errors) >= 3 and max(errors) < 4.0, errors
    assert sum(errors) / len(errors) <= 1.2, errors
