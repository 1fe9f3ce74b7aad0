"""The plan's non-torch estimate: the median of what real vLLM starts printed, by parallel degree."""

from __future__ import annotations

import pytest
from conftest import ROOT

from triage.plan import non_torch
from triage.plan.estimates import non_torch as estimate
from triage.units import GiB

CORPUS = ROOT.parent / "shared" / "corpus"


def test_each_printed_format_is_read_with_the_kind_of_figure_it_is():
    v0 = "model weights take 13.93GiB; non_torch_memory takes 1.54GiB; PyTorch activation peak memory takes 2.84GiB"
    v1 = "Actual usage is 4.25 GiB for weight, 0.34 GiB for peak activation, 0.02 GiB for non-torch memory, and"
    v06 = "Memory profiling results: total_gpu_memory=44.42GiB non_torch_memory=0.73GiB kv_cache_size=31.68GiB"
    v2x = "Model loading took 61.74 GiB memory\\n... Actual usage is 64.5 GiB for consumed memory (weights + non-torch), 4"
    read = {k: non_torch.read(t) for k, t in {"v0": v0, "v1": v1, "v06": v06, "v2x": v2x}.items()}
    assert read["v0"].figures == (non_torch.Figure(1.54, "increase"),)
    assert read["v1"].figures == (non_torch.Figure(0.02, "increase"),)
    assert read["v06"].figures == (non_torch.Figure(0.73, "absolute"),) and read["v06"].value() is None
    assert read["v2x"].figures == (non_torch.Figure(2.76, "derived"),)
    assert non_torch.read("INFO Model loading took 14.99 GiB") is None


def test_the_degree_is_the_config_lines_or_the_worker_prefixes():
    text = (
        "(Worker_TP0_EP0 pid=1) x 0.18 GiB for non-torch memory\n(Worker_TP7_EP7 pid=8) y 0.21 GiB for non-torch memory"
    )
    found = non_torch.read(text)
    assert (found.tp, found.degree, found.value()) == (8, 8, pytest.approx(0.195))
    found = non_torch.read("tensor_parallel_size=2, pipeline_parallel_size=2 ... non_torch_memory takes 1.5GiB")
    assert found.degree == 4


def test_the_medians_are_taken_per_start_and_per_bucket():
    starts = [non_torch.LogFigures(1, 1, "x", (non_torch.Figure(v, "increase"),)) for v in (0.1, 0.2, 9.0)]
    starts += [non_torch.LogFigures(2, 1, "x", (non_torch.Figure(v, "increase"),)) for v in (1.0, 2.0)]
    assert non_torch.medians(starts) == (0.2, 1.5)


def test_the_plan_uses_the_parallel_figure_for_tp_or_pp_and_says_it_is_an_estimate():
    single, tp, pp = estimate(1), estimate(4), estimate(1, 2)
    assert single.bytes == int(non_torch.SINGLE_GIB * GiB) and tp.bytes == pp.bytes == int(non_torch.PARALLEL_GIB * GiB)
    assert all(e.assumption.startswith("estimated:") and "real vLLM starts" in e.assumption for e in (single, tp))


@pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared/corpus is not here")
def test_the_constants_are_the_corpus_medians():
    logs = [non_torch.read(p.read_text(encoding="utf-8", errors="replace")) for p in sorted(CORPUS.glob("*.log"))]
    found = [lf for lf in logs if lf is not None]
    assert non_torch.medians(found) == (non_torch.SINGLE_GIB, non_torch.PARALLEL_GIB)
    assert non_torch.parallel_range(found) == non_torch.PARALLEL_RANGE_GIB
    assert sum(lf.degree > 1 and lf.value() is not None for lf in found) >= 4


@pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared/corpus is not here")
def test_the_v06_absolute_constants_are_the_corpus_medians_of_v06_figures():
    logs = [non_torch.read(p.read_text(encoding="utf-8", errors="replace")) for p in sorted(CORPUS.glob("*.log"))]
    found = [lf for lf in logs if lf is not None]
    assert non_torch.medians(found, absolute=True) == (non_torch.ABSOLUTE_SINGLE_GIB, non_torch.ABSOLUTE_PARALLEL_GIB)


def test_a_v06_plan_takes_the_absolute_figure_and_later_releases_the_increase():
    v06, v07, v1 = estimate(2, 1, "0.6.4.post1"), estimate(2, 1, "0.7.2"), estimate(2)
    assert v06.bytes == int(non_torch.ABSOLUTE_PARALLEL_GIB * GiB) and "CUDA context" in v06.assumption
    assert v07.bytes == v1.bytes == int(non_torch.PARALLEL_GIB * GiB)
