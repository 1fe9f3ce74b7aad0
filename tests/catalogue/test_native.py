"""The native layers' catalogue (rules/catalogue/native_errors.json): its contract, its causes'
traps, and every message that names a cause pasted as one line the way its layer prints it.

Stage 1 (scripts/catalogue/native.py: downloading wheels, reading NCCL's tags) is never run here;
test_build.py checks the shipped file is stage 2's output byte for byte."""

from __future__ import annotations

import json
import re
import sys
from re import _parser

import pytest
import yaml
from conftest import ROOT, triage_text
from test_build import _repeats

sys.path.insert(0, str(ROOT / "scripts" / "catalogue"))
import build
import native_causes

NATIVE = json.loads(build.NATIVE.read_text(encoding="utf-8"))
ENTRIES = NATIVE["entries"]
HOW = {"table", "wording", "benign", "internal", "none"}


def test_schema_and_provenance():
    causes = set(yaml.safe_load((ROOT / "rules" / "taxonomy.yaml").read_text())["causes"])
    assert NATIVE["schema_version"] == 1
    assert {"cuda-runtime", "cuda-driver", "hip", "cublas", "cudnn", "nccl"} <= set(NATIVE["releases"])
    assert {w["package"] for w in NATIVE["wheels"]} >= {"nvidia-cuda-runtime-cu12", "nvidia-nccl-cu12"}
    ids = [e["id"] for e in ENTRIES]
    assert len(ids) == len(set(ids))
    for e in ENTRIES:
        assert e["cause"] in causes and e["how"] in HOW, e["id"]
        releases = NATIVE["releases"][e["package"]]
        assert e["first"] in releases and e["last"] in releases, e["id"]
        assert e["file"] and e["function"] and e["wheel"] and e["literal"].strip(), e["id"]
        if e.get("code") is None:  # a WARN format: its source line in the NCCL tag named
            assert e["line"] > 0 and e["file"].startswith("src/"), e["id"]
        if e["how"] in ("benign", "internal"):
            assert e["cause"] == "unknown_failure", e["id"]


def test_patterns_are_bounded_and_hold_their_literal():
    for e in ENTRIES:
        for depth, most, body in _repeats(_parser.parse(e["pattern"])):
            assert depth == 0, e["id"]
            assert most <= 200 or body == [(_parser.IN, [(_parser.CATEGORY, _parser.CATEGORY_SPACE)])], e["id"]


def test_coverage_lists_the_native_releases():
    text = build.COVERAGE.read_text()
    for family, release in (("cuda-runtime", "12.9.79"), ("cuda-runtime", "13.5.37"), ("nccl", "2.32.3")):
        assert re.search(rf"^{family}\s+{re.escape(release)}\s+\d+\s+\d+", text, re.M), (family, release)


@pytest.mark.parametrize(
    "family,name,cause",
    [
        ("cuda-runtime", "cudaErrorMemoryAllocation", "gpu_out_of_memory"),  # OOM, phase unknown (v3)
        ("cuda-runtime", "cudaErrorIllegalAddress", "gpu_runtime_fault"),  # "memory" in it: still a fault
        ("cuda-runtime", "cudaErrorInitializationError", "unknown_failure"),  # a fork or no device: undecided
        ("cuda-runtime", "cudaErrorCudartUnloading", "unknown_failure"),  # teardown noise
        ("cuda-runtime", "cudaErrorCompatNotSupportedOnDevice", "cuda_driver_mismatch"),
        ("cuda-runtime", "cudaErrorInvalidDevice", "parallelism_mismatch"),
        ("hip", "hipErrorNoBinaryForGpu", "cuda_driver_mismatch"),
        ("cuda-runtime", "cudaErrorPeerAccessUnsupported", "nccl_failure"),  # the gfx target is not in the build
        ("hip", "hipErrorInvalidDeviceFunction", "cuda_driver_mismatch"),
        ("hip", "hipErrorOutOfMemory", "gpu_out_of_memory"),
        ("cublas", "CUBLAS_STATUS_NOT_INITIALIZED", "unknown_failure"),  # an OOM or a driver: undecided
        ("nccl", "ncclInvalidUsage", "unknown_failure"),  # the WARN before it says why
        ("nccl", "ncclSystemError", "nccl_failure"),
    ],
)
def test_table_causes_follow_the_meaning(family, name, cause):
    assert native_causes.table_cause(family, name)[0] == cause


@pytest.mark.parametrize(
    "text,cause",
    [
        ("Failed to CUDA calloc {arg} bytes", "gpu_out_of_memory"),
        ("Intrusive address map initialization failed: calloc({arg} entries) returned null", "unknown_failure"),
        ("Duplicate GPU detected : rank {arg} and rank {arg} both on CUDA device {arg}", "parallelism_mismatch"),
        ("Error while {arg} shared memory segment {arg} (size {arg})", "unknown_failure"),  # creating or attaching
        ("Error: Could not map view of file {arg} size {arg}, error code: {arg}", "unknown_failure"),
        ("Unable to create thread context due to old driver, disabling.", "unknown_failure"),  # carries on
    ],
)
def test_warn_causes_follow_the_meaning(text, cause):
    assert native_causes.warn_cause("src/x.cc", text)[0] == cause


def _filled(template: str) -> str:
    return re.sub(r"\{[^}]*\}", "7", template)


def _pastes(e: dict) -> list[str]:
    """The one-line forms a user pastes of one catalogue entry, as its layer prints it."""
    t, name = e["template"], e["exception"]
    if e["package"] == "cuda-runtime" and e["literal"] == " ".join(t.split()).rstrip("."):
        forms = [f"RuntimeError: CUDA error: {t}", f"CUDA error: {t}", f"torch.AcceleratorError: CUDA error: {t}"]
        forms.append(f"gpu-node-a:4242:4300 [0] enqueue.cc:1556 NCCL WARN Cuda failure '{t}'")
        if name == "cudaErrorMemoryAllocation":
            forms += [f"torch.OutOfMemoryError: CUDA error: {t}", f"torch.cuda.OutOfMemoryError: CUDA error: {t}"]
        return forms
    if e["package"] == "hip" and e["literal"] == " ".join(t.split()).rstrip("."):
        return [f"RuntimeError: HIP error: {t}", f"HIP error: {t}", f"torch.AcceleratorError: HIP error: {t}"]
    if e["package"] == "hip" and e["literal"] == name:  # ROCm before mid-2022 printed the enum name
        return [f"RuntimeError: HIP error: {name}", f"Hip error: {name}"]
    if e["package"] == "cuda-driver":  # CuPy, numba, cuda-python: the driver's name, then its text
        return [f"cupy_backends.cuda.api.driver.CUDADriverError: {name}: {t}", f"{name}: {t}"]
    if e["package"] == "cublas" and e["literal"] == name:
        return [f"RuntimeError: CUDA error: {name} when calling `cublasCreate(handle)`", f"CUDA error: {name}"]
    if e["package"] == "cudnn" and e["literal"] == name:
        return [f"RuntimeError: cuDNN error: {name}"]
    if e["package"] == "nccl" and e.get("code") is not None and e["literal"] != name:
        where = "../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970"
        return [
            f"torch.distributed.DistBackendError: NCCL error in: {where}, {t}, NCCL version 2.21.5",
            f"RuntimeError: NCCL error: {t}",
        ]
    if e["package"] == "nccl" and e["exception"] == "NCCL WARN":
        return [f"gpu-node-a:4242:4300 [0] {e['file'].removeprefix('src/')}:{e['line']} NCCL WARN {_filled(t)}"]
    return []


PASTES = [(e["id"], p, e["cause"]) for e in ENTRIES if e["cause"] != "unknown_failure" for p in _pastes(e)]
# Where the tool's specific rules name another cause than the catalogue, and why they are right.
STANDING = {
    # vLLM's own wording a WARN template quotes beside NCCL's: none yet
}


def test_every_family_has_pastes():
    packages = {i.rsplit("-", 1)[0] for i, _, _ in PASTES}
    assert {"cuda-runtime", "cuda-driver", "hip", "cublas", "cudnn", "nccl"} <= packages, packages
    assert len(PASTES) > 300


@pytest.mark.parametrize("entry,line,cause", PASTES, ids=[f"{i}-{n}" for n, (i, _, _) in enumerate(PASTES)])
def test_a_native_one_liner_gets_the_catalogues_cause(entry, line, cause):
    got = [d.id for d in triage_text(line + "\n").diagnoses][:1]
    assert got == [STANDING.get(line, cause)], line
