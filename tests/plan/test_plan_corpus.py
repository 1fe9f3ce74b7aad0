"""The plan against real vLLM startups in ../shared/corpus (read at test time, never copied).

1. Where a log prints both its KV cache memory and its KV token count for a model whose
   config.json is a fixture, the plan's KV bytes per token turn the printed memory into
   tokens within 1% of vLLM's printed count.
2. A launch the corpus shows failing on memory (same model, GPU total and flags as the
   log's figures give them) is planned as "does not fit", for the cause the log was
   labelled with.
The logs are read through the tool's own pipeline (its facts), so nothing here is keyed
to a file name.
"""

from __future__ import annotations

import argparse
import re

import pytest
import yaml
from conftest import CORPUS, ROOT

from triage.memory import Quantity
from triage.memory import kv as mkv

CONFIGS = ROOT / "fixtures" / "configs"
# Causes a plan from the model and the GPU's total can see; memory other processes held is
# invisible to it without an nvidia-smi listing (the corpus logs do not carry one for these).
MEMORY_CAUSES = {"weights_exceed_memory", "kv_cache_insufficient", "gpu_memory_utilization_too_high"}
pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared/corpus not present")


def _fixture_names() -> dict[str, str]:
    names = {}
    for expect in CONFIGS.glob("*/expect.yaml"):
        for name in yaml.safe_load(expect.read_text())["names"]:
            names[name.split("/")[-1].lower()] = expect.parent.name
    return names


def _basename(model: str) -> str:
    m = re.search(r"models--[^/]+--([^/]+)", model)
    return (m.group(1) if m else model.rstrip("/").split("/")[-1]).lower()


def _corpus_facts() -> list[tuple[str, dict, str]]:
    from triage.pipeline import run_path

    names, out = _fixture_names(), []
    for log in sorted(CORPUS.glob("*.log")):
        report = run_path(log)
        model = report.facts.get("model")
        if model and _basename(str(model)) in names:
            out.append((log.stem, report, names[_basename(str(model))]))
    return out


FACTS = _corpus_facts() if CORPUS.is_dir() else []


def _plan(fixture: str, tokens: list[str], **gpu):
    from triage.plan.command import make_plan

    args = argparse.Namespace(
        model=str(CONFIGS / fixture), gpu_memory=gpu.get("memory"), gpu=None, nvidia_smi=gpu.get("smi")
    )
    return make_plan(args, tokens)


def _flags(facts: dict) -> list[str]:
    tokens = ["--tensor-parallel-size", str(facts.get("tensor_parallel_size") or 1)]
    for fact, flag in (
        ("max_model_len", "--max-model-len"),
        ("gpu_memory_utilization", "--gpu-memory-utilization"),
        ("dtype", "--dtype"),
        ("kv_cache_dtype", "--kv-cache-dtype"),
        ("max_num_seqs", "--max-num-seqs"),
        ("max_num_batched_tokens", "--max-num-batched-tokens"),
    ):
        if facts.get(fact) is not None:
            tokens += [flag, str(facts[fact])]
    return tokens + (["--enforce-eager"] if facts.get("enforce_eager") else [])


KV_LOGS = [
    (stem, r, fx) for stem, r, fx in FACTS if r.facts.get("kv_cache_bytes", 0) > 0 and r.facts.get("kv_cache_tokens")
]


def test_enough_corpus_logs_print_kv_memory_and_tokens_for_a_fixture_model():
    assert len(KV_LOGS) >= 8, [s for s, _, _ in KV_LOGS]


@pytest.mark.parametrize("stem,report,fixture", KV_LOGS, ids=[s for s, _, _ in KV_LOGS])
def test_kv_tokens_from_printed_memory_within_one_percent(stem, report, fixture):
    f = report.facts
    plan = _plan(fixture, _flags(f), memory="80GiB")
    block = Quantity.exact(plan.kv_bytes_per_token * plan.flags.block_size)
    printed_pool = Quantity.exact(f["kv_cache_bytes"])
    predicted, _ = mkv.pool_tokens(printed_pool, block, plan.flags.block_size)
    assert predicted == pytest.approx(f["kv_cache_tokens"], rel=0.01), (plan.kv.formula, predicted)


def _failing() -> list[tuple[str, object, str, list[str]]]:
    labels = yaml.safe_load((CORPUS / "labels.yaml").read_text()) if CORPUS.is_dir() else {}
    out = []
    for stem, report, fixture in FACTS:
        expect = (labels.get(stem) or {}).get("expect") or []
        diagnosed = [d.id for d in report.diagnoses]
        if (
            expect
            and expect[0] in MEMORY_CAUSES
            and diagnosed[:1] == expect[:1]
            and report.facts.get("gpu_total_bytes")
        ):
            out.append((stem, report, fixture, expect))
    return out


FAILING = _failing()


def test_the_corpus_has_failing_launches_of_fixture_models():
    assert len(FAILING) >= 2, [s for s, *_ in FAILING]


@pytest.mark.parametrize("stem,report,fixture,expect", FAILING, ids=[s for s, *_ in FAILING])
def test_a_launch_the_corpus_shows_failing_does_not_fit_for_the_same_reason(stem, report, fixture, expect):
    f = report.facts
    plan = _plan(fixture, _flags(f), memory=f"{f['gpu_total_bytes']}B")
    assert plan.verdict == "does not fit", plan.why
    assert plan.reason in expect, (plan.reason, plan.why)
    assert plan.remedies


POOL_LOGS = [
    (stem, r, fx)
    for stem, r, fx in KV_LOGS
    if r.facts.get("gpu_total_bytes") and r.facts.get("gpu_memory_utilization") and not r.diagnoses
]


@pytest.mark.parametrize("stem,report,fixture", POOL_LOGS, ids=[s for s, _, _ in POOL_LOGS])
def test_the_estimated_kv_pool_of_a_healthy_start_is_close_to_what_vllm_printed(stem, report, fixture):
    """The estimates (activation peak, non-torch memory) are labelled as such; on real healthy
    starts with the GPU total printed, the pool they leave is within 5% of vLLM's."""
    f = report.facts
    plan = _plan(fixture, _flags(f), memory=f"{f['gpu_total_bytes']}B")
    assert plan.kv_cache_bytes == pytest.approx(f["kv_cache_bytes"], rel=0.05)
