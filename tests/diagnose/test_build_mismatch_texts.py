"""Rule texts that must use the figures the log prints: the GPU's compute capability for a
kernel-build mismatch (never an example capability the GPU cannot use), one explanation of the
mismatch (not the worded rule's and the runtime-error rule's both), torch's CUDA for nvcc, and
the Mamba state blocks' remedies without a --max-model-len that adds no blocks."""

from __future__ import annotations

from conftest import FIXTURES, triage_file, triage_text

V100 = "cuda_driver_mismatch/v0110-v100-torch28-cu128-no-kernel-image.log"
RTX5090 = "cuda_driver_mismatch/v092-rtx5090-torch27-cu126-no-kernel-image.log"
NVCC = "dependency_missing/v0111-flashinfer-jit-nvcc-missing.log"
MAMBA = "kv_cache_insufficient/v0330-hybrid-mamba-blocks-below-default-max-num-seqs.log"


def _lead(report):
    assert report.diagnoses, "no diagnosis"
    return report.diagnoses[0]


def test_the_arch_list_remedy_is_the_capability_the_log_prints():
    for rel, cap in ((V100, "7.0"), (RTX5090, "12.0")):
        d = _lead(triage_file(FIXTURES / rel))
        assert d.id == "cuda_driver_mismatch"
        arch = [r.text for r in d.remedies if "TORCH_CUDA_ARCH_LIST" in r.text]
        assert len(arch) == 1 and f"TORCH_CUDA_ARCH_LIST={cap} " in arch[0], arch
        assert not any("TORCH_CUDA_ARCH_LIST" in r.env for r in d.remedies)  # a source build's, never the one-line fix
        assert f"compute capability is {cap}" in d.explanation


def test_the_build_mismatch_is_explained_once():
    d = _lead(triage_file(FIXTURES / V100))
    assert d.explanation.count("were not compiled for") == 1, d.explanation
    assert "reported: no kernel image is available" not in d.explanation  # the device-error rule's repeat


def test_nvcc_remedy_names_the_cuda_torch_was_built_for():
    text = (FIXTURES / NVCC).read_text() + "PyTorch version: 2.8.0+cu128\nCUDA used to build PyTorch: 12.8\n"
    d = _lead(triage_text(text))
    assert any("CUDA 12.8 toolkit" in r.text for r in d.remedies), [r.text for r in d.remedies]
    assert any(r.env.get("VLLM_USE_FLASHINFER_SAMPLER") == "0" for r in d.remedies)


def test_mamba_blocks_remedies_are_checked_and_never_a_shorter_max_model_len():
    d = _lead(triage_file(FIXTURES / MAMBA))
    assert d.rule == "mamba-blocks-below-max-num-seqs"
    by_flag = {k: (v, r.check) for r in d.remedies for k, v in r.flags.items()}
    assert by_flag["--max-num-seqs"][0] == "618"
    util, check = by_flag["--gpu-memory-utilization"]
    assert float(util) > 0.9 and check is not None and check.verdict == "fits"
    assert not any("max-model-len" in r.text or "--max-model-len" in r.flags for r in d.remedies)


def test_torchs_older_capability_warning_is_read_too():
    text = (
        "/usr/local/lib/python3.10/dist-packages/torch/cuda/__init__.py:129: UserWarning:\n"
        "    Found GPU0 Tesla P100-PCIE-16GB which is of cuda capability 6.0.\n"
        "    PyTorch no longer supports this GPU because it is too old.\n"
        "    The minimum cuda capability supported by this library is 7.0.\n"
        "ERROR 03-02 10:00:01 engine.py:366] RuntimeError: CUDA error: no kernel image is available for"
        " execution on the device\n"
    )
    d = _lead(triage_text(text))
    assert d.id == "cuda_driver_mismatch"
    assert any("TORCH_CUDA_ARCH_LIST=6.0 " in r.text for r in d.remedies), [r.text for r in d.remedies]
