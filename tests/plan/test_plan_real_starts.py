"""`plan` against real vLLM starts: a table of facts, the plan's error per row, stated.

Each row is a start from ../shared/corpus that printed what vLLM computed: the GPU's total,
the weights it loaded and the KV cache memory it kept, per GPU (facts only: numbers and
flags, no log text). The model's config.json is a fixture under fixtures/configs/ written
from the public config values; where the public checkpoint is sharded, its index
(fixtures/configs/indexes/, `metadata.total_size` = the parameters of the exact shapes x
2 B, cross-checked against the printed load figure) is put beside it, as a download has it.
The plan runs from the same flags and the same total; its error against what vLLM printed
is stated in the row, so a change to the estimates that moves a figure shows here.

The rows are every corpus start (healthy, or failing after its KV pool was sized) whose GPU
total the log prints (or its own figures give: the V0 0.7.2 row) and whose model config is
public and stated exactly, and one public start (its provenance beside the row: a notebook's
`vllm serve` output in huggingface/cookbook). The other 47 corpus logs that print a KV pool, tokens or blocks serve local
fine-tunes or unnamed paths, quantize online (bitsandbytes, online int4 with an fp8 cache),
run forks, or print no total (a card's total moves by ~0.2 GiB between boards and drivers:
79.14-79.33 GiB for 80 GB cards in the corpus), so they are not rows. Each row is planned
for its printed release and engine (`--vllm-version`, `--vllm-engine`; none printed: V1
0.10): V0 rows with V0's
arithmetic (the whole max(max_model_len, 2048) profile batch without chunked prefill, the
driver's sampler, 0.6's non-torch figure with the CUDA context). A V0 row's pool is its
printed block count x block bytes: the executor takes the least of its ranks' counts. What
holds: the V1 starts' KV pools within 0.6% mean absolute, 1.1% worst, the V0 starts' within
0.6% and 1.1% (the issue's aim: 2% and 5%); the weights from an index within 0.1% on every
row (the share per GPU plus what PyTorch's allocator holds: triage.plan.allocation); the
weights counted from a config within -1%/+2% of the printed figure on every upstream row,
the interval the plan takes them in (triage.plan.params.COUNTED_SPREAD). The one row outside
it runs a fork whose attention backend allocates while the model is built, which vLLM's
"Model loading took" counts; the same log's checkpoint size is the plan's count. Every
healthy start is "fits"; the V0 3090 start that failed (29,000 tokens > its 23,648) is
"borderline": its need lies inside the pool's interval.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import NamedTuple

import pytest
from conftest import ROOT

CONFIGS = ROOT / "fixtures" / "configs"
INDEXES = CONFIGS / "indexes"


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
    verdict: str  # the plan's verdict for the start
    index: str | None = None  # fixtures/configs/indexes/<index>.model.safetensors.index.json: the public
    # checkpoint's metadata.total_size, given beside config.json as a downloaded model has it


STARTS = [
    Start(
        "Qwen/Qwen2.5-1.5B-Instruct",
        "qwen2.5-1.5b-instruct",
        "0.28.1rc1 (V1, a fork: BRIDGE_ATTN backend)",
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
        0.0,
        0.8,
        "fits",
        "llama-3.1-8b-instruct",
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
        # "# GPU blocks: 31284" x 1 MiB (16 tokens x 2 x 4 KV heads x 128 x 2 B x 32 layers): V0's executor
        # takes the least of its ranks' block counts; the driver rank runs the sampler in its profile
        # (peak_torch_memory=8.70GiB, kv_cache_size=30.55GiB) where the other rank printed 31.68 GiB
        31284 * 2**20,
        0.0,
        0.7,
        "fits",
        "llama-3.1-8b-instruct",
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
        14955183499,  # 13.9281 GiB
        11770 * 1572864,  # "# CUDA blocks: 11770" x (16 tokens x 2 x 4 KV heads x 128 x 2 B x 48 layers)
        0.0,
        0.3,
        "fits",
        "qwen2.5-14b-instruct",
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
        0.0,
        -0.7,
        "fits",
        "qwen3-coder-30b-a3b-instruct",
    ),
    Start(
        "meta-llama/Llama-3.1-8B-Instruct",
        "llama-3.1-8b-instruct",
        "~0.6.4 (V0)",
        ("--max-model-len", "29000", "--gpu-memory-utilization", "0.9", "--max-num-batched-tokens", "29000"),
        25318832210,  # total_gpu_memory=23.58GiB
        16094101452,  # 14.9888 GB (GiB figures)
        1478 * 16 * 131072,  # "# GPU blocks: 1478" (kv_cache_size=2.89GiB) x 16 tokens x 128 KiB per token
        0.0,
        0.3,
        "borderline",  # it failed: 29,000 > the 23,648 tokens of its pool; the plan's 29,000-token need
        # (3.54 GiB) lies inside the pool's interval (activation and non-torch taken as estimates)
        "llama-3.1-8b-instruct",
    ),
    # huggingface/cookbook@ed2c6467015cee5bd962606a5caa0ece10483982,
    # notebooks/en/fine_tune_chatbot_docs_synthetic.ipynb lines 260-285 (a notebook's `vllm serve`
    # output): 0.8.2 on a compute-capability 7.5 GPU, "Falling back to V0"; args: dtype='float16',
    # max_model_len=2048, gpu_memory_utilization=0.8938626454842437, max_num_batched_tokens=2048,
    # max_num_seqs=192; "total_gpu_memory (14.74GiB)", "Model loading took 6.0160 GB",
    # "# cuda blocks: 3637" (the rest "reserved for KV Cache is 6.22GiB").
    Start(
        "unsloth/Llama-3.2-3B-Instruct",
        "llama-3.2-3b-instruct",
        "0.8.2 (V0, the fallback below compute capability 8.0)",
        (
            "--max-model-len",
            "2048",
            "--gpu-memory-utilization",
            "0.8938626454842437",
            "--dtype",
            "float16",
            "--max-num-batched-tokens",
            "2048",
            "--max-num-seqs",
            "192",
        ),
        int(14.74 * 2**30),
        int(6.0160 * 2**30),
        3637 * 16 * 114688,  # blocks x 16 tokens x (2 x 8 KV heads x 128 x 2 B x 28 layers)
        -0.5,  # counted from config.json (no index here): norms and the rotary cache left out
        1.1,
        "fits",
    ),
]
V1 = [s for s in STARTS if "V1" in s.vllm]
V0 = [s for s in STARTS if "V0" in s.vllm]
FORKS = {"0.28.1rc1 (V1, a fork: BRIDGE_ATTN backend)"}


def _model_folder(start: Start, tmp: Path) -> Path:
    """The fixture's config.json, with the checkpoint's index beside it where the row has one."""
    if start.index is None:
        return CONFIGS / start.fixture
    folder = tmp / start.fixture
    folder.mkdir(exist_ok=True)
    shutil.copy(CONFIGS / start.fixture / "config.json", folder / "config.json")
    shutil.copy(INDEXES / f"{start.index}.model.safetensors.index.json", folder / "model.safetensors.index.json")
    return folder


def _release(start: Start) -> str | None:
    """The row's printed release (`~0.6.4`: read from the log's formats), None where none was printed."""
    from triage.plan.estimates import version_tuple

    first = start.vllm.split()[0].lstrip("~")
    return first if version_tuple(first) else None


def _plan(start: Start):
    import argparse

    from triage.plan.command import make_plan

    with tempfile.TemporaryDirectory() as tmp:
        args = argparse.Namespace(
            model=str(_model_folder(start, Path(tmp))),
            gpu_memory=f"{start.total}B",
            gpu=None,
            nvidia_smi=None,
            vllm_version=_release(start),
            vllm_engine="v0" if "V0" in start.vllm else None,
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


def test_the_v0_starts_kv_pools_are_within_two_percent_mean_absolute_and_five_worst():
    """Planned with their release (--vllm-version): V0's profile batch, sampler and non-torch figure."""
    errors = [abs(_errors(s)[1]) for s in V0]
    assert len(errors) >= 3
    assert sum(errors) / len(errors) <= 2.0 and max(errors) <= 5.0, errors


def test_the_rows_with_an_index_take_its_total_size_and_land_within_one_percent():
    """The index's bytes / TP plus what the allocator holds (triage.plan.allocation): within 0.1% on
    V0 and V1 (V0 0.7.2 at TP 2 printed 1.24% over the bare share: 3.5 MiB of block rounding a layer)."""
    indexed = [s for s in STARTS if s.index is not None]
    assert len(indexed) >= 4
    for start in indexed:
        assert _plan(start).weights_source.startswith("safetensors index"), start.model
    errors = {s.vllm: abs(_errors(s)[0]) for s in indexed}
    assert max(errors.values()) <= 0.1, errors


def test_the_weights_counted_from_a_config_are_within_the_interval_the_plan_takes_them_in():
    """The counted interval (-1%/+2%, triage.plan.params.COUNTED_SPREAD) holds on every upstream row
    counted from config.json; the fork's row is the one outside it, by its attention backend."""
    from triage.plan.params import COUNTED_SPREAD

    low, high = COUNTED_SPREAD
    for start in STARTS:
        counted = start._replace(index=None)
        if start.vllm in FORKS or "AWQ" in start.model:
            continue
        ratio = counted.weights / _plan(counted).weights_bytes_per_gpu
        assert low <= ratio <= high, (start.model, start.vllm, ratio)


def test_the_forks_excess_is_its_backend_not_the_count():
    """vLLM's "Model loading took" is the memory allocated while the model is built and loaded
    (gpu_model_runner.load_model under DeviceMemoryProfiler, 0.28), so an attention backend that
    allocates at construction is counted in it. The fork's row printed 2.98 GiB; the same log's
    "Checkpoint size: 2.88 GiB" is the plan's count, and upstream 0.11.0 printed 2.88 GiB (2.8798)
    for the same shapes."""
    (fork,) = [s for s in STARTS if s.vllm in FORKS]
    assert round(_plan(fork).weights_bytes_per_gpu / 2**30, 2) == 2.88
    (upstream,) = [s for s in STARTS if s.model == "Qwen/Qwen2.5-Math-1.5B"]
    assert abs(_errors(upstream)[0]) < 0.5


def test_every_healthy_start_fits():
    """The one start that is not "fits" failed: its 29,000-token max_model_len did not fit its pool."""
    assert [s.vllm for s in STARTS if s.verdict != "fits"] == ["~0.6.4 (V0)"]


def test_the_tight_start_fits_on_config_counted_weights_too():
    """Qwen3-Coder at 1.15x concurrency: one 131,072-token request needs 12 of its 13.8 GiB pool.
    Without the index its weights are counted from config.json and taken at -1%/+2%: it still fits."""
    (start,) = [s for s in STARTS if s.model.startswith("Qwen/Qwen3-Coder")]
    plan = _plan(start._replace(index=None))
    assert plan.weights_source.startswith("estimated") and plan.verdict == "fits"
