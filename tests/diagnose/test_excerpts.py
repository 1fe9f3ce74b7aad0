"""One-line and few-line pastes of errors the rules know: the same cause as the whole log, and a
report that says it read an excerpt and which figures it lacks (issue 22, part 3)."""

from __future__ import annotations

import pytest
from conftest import FIXTURES, triage_text

PASTES = {
    "repo-404": (
        "huggingface_hub.errors.RepositoryNotFoundError: 404 Client Error. (Request ID: Root=1-6811aa02-3c4d)"
        " Repository Not Found for url: https://huggingface.co/api/models/acme/llama-7b-chat/revision/main."
        " Please make sure you specified the correct `repo_id` and `repo_type`.",
        "model_not_found",
    ),
    "revision-404": (
        "huggingface_hub.errors.RevisionNotFoundError: 404 Client Error. (Request ID: Root=1-6811aa02)"
        " Revision Not Found for url: https://huggingface.co/api/models/acme/llama-7b-chat/revision/v9."
        " Invalid rev id: v9",
        "model_not_found",
    ),
    "free-memory": (
        "ValueError: Free memory on device (7.5/47.54 GiB) on startup is less than desired GPU memory"
        " utilization (0.9, 42.79 GiB). Decrease GPU memory utilization or reduce GPU memory used by"
        " other processes.",
        "foreign_gpu_processes",
    ),
    "free-memory-no-type": (
        "Free memory on device (44.1/47.54 GiB) on startup is less than desired GPU memory"
        " utilization (0.95, 45.16 GiB). Decrease GPU memory utilization or reduce GPU memory"
        " used by other processes.",
        "gpu_memory_utilization_too_high",
    ),
    "max-seq-len": (
        "ValueError: The model's max seq len (65536) is larger than the maximum number of tokens that"
        " can be stored in KV cache (21840). Try increasing `gpu_memory_utilization` or decreasing"
        " `max_model_len` when initializing the engine.",
        "kv_cache_insufficient",
    ),
    "max-seq-len-cut": (
        "The model's max seq len (65536) is larger than the maximum number of tokens that can be st",
        "kv_cache_insufficient",
    ),
    "bare-oom": ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 64.00 MiB.", "gpu_out_of_memory"),
    "old-oom": (
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 23.65 GiB"
        " total capacity; 22.80 GiB already allocated; 3.06 MiB free; 23.10 GiB reserved in total by"
        " PyTorch)",
        "gpu_out_of_memory",
    ),
    "mamba": ("ValueError: max_num_seqs (1024) exceeds available Mamba cache blocks (511).", "kv_cache_insufficient"),
    "no-module": ("ModuleNotFoundError: No module named 'pyarrow'", "dependency_missing"),
    "engine-timeout": (
        "TimeoutError: Timed out waiting for engine core processes to start. This is often caused by"
        " slow weight loading for large models. Waited 600s (configured by"
        " VLLM_ENGINE_READY_TIMEOUT_S).",
        "startup_timeout",
    ),
}


@pytest.mark.parametrize("name", PASTES)
def test_a_one_line_paste_gets_the_cause_and_says_it_is_an_excerpt(name):
    text, cause = PASTES[name]
    report = triage_text(text + "\n")
    assert [d.id for d in report.diagnoses][:1] == [cause]
    assert any(n.startswith("read as an excerpt") for n in report.notes), report.notes


def test_an_excerpt_names_the_memory_figures_it_lacks():
    report = triage_text(PASTES["bare-oom"][0] + "\n")
    note = next(n for n in report.notes if n.startswith("read as an excerpt"))
    for words in ("the vLLM version", "the GPU's total memory", "gpu_memory_utilization", "the phase it failed in"):
        assert words in note


def test_a_whole_log_is_not_called_an_excerpt():
    log = FIXTURES / "kv_cache_insufficient" / "v1-0.9.2-tp2-qwen14b-4090-estimated-max-len.log"
    report = triage_text(log.read_text())
    assert report.diagnoses and not any("excerpt" in n for n in report.notes)
