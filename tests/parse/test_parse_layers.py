"""The layers under vLLM (../shared/errors.md): one event family per error, whatever the platform.

Each error is checked in every spelling errors.md lists for it (CUDA, HIP, old ROCm enum
names, the driver API, Triton, NCCL's Cuda failure, torch.AcceleratorError), and each
trap errors.md names is checked not to become the event it looks like.
"""

import pytest

from triage.ingest.lines import peel
from triage.parse.parse import parse_line


def kinds(text):
    return [e.kind for e in parse_line(peel(text, 1))]


def one(text, kind):
    found = [e for e in parse_line(peel(text, 1)) if e.kind == kind]
    assert found, f"no {kind} in {kinds(text)}"
    return found[0]


@pytest.mark.parametrize(
    "text",
    [
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "torch.AcceleratorError: CUDA error: an illegal memory access was encountered",
        "RuntimeError: HIP error: an illegal memory access was encountered",
        "RuntimeError: HIP error: hipErrorIllegalAddress",
        "cupy_backends.cuda.api.driver.CUDADriverError: CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was "
        "encountered",
        "RuntimeError: Triton Error [CUDA]: an illegal memory access was encountered",
        "misc/strongstream.cc:395 NCCL WARN Cuda failure 'an illegal memory access was encountered'",
        "[rank1]:[E714 10:03:58.412733081 ProcessGroupNCCL.cpp:1896] [PG ID 2 PG GUID 3 Rank 1] Process group watchdog "
        "thread terminated with exception: CUDA error: an illegal memory access was encountered",
    ],
)
def test_illegal_address_is_one_event_on_every_platform(text):
    e = one(text, "device_error")
    assert (e.error, e.family) == ("illegal_address", "runtime_fault")


@pytest.mark.parametrize(
    "text,platform",
    [
        ("RuntimeError: CUDA error: device-side assert triggered", "CUDA"),
        ("torch.AcceleratorError: CUDA error: device-side assert triggered", "CUDA"),
        ("RuntimeError: HIP error: device-side assert triggered", "HIP"),
        ("RuntimeError: XPU error: device-side assert triggered", "XPU"),
    ],
)
def test_platform_is_a_field_not_a_family(text, platform):
    e = one(text, "device_error")
    assert (e.error, e.platform) == ("device_assert", platform)


@pytest.mark.parametrize(
    "text,error,family",
    [
        ("RuntimeError: HIP error: invalid device function", "invalid_device_function", "build_mismatch"),
        ("RuntimeError: HIP error: hipErrorNoBinaryForGpu", "no_kernel_image", "build_mismatch"),
        (
            "RuntimeError: CUDA error: no kernel image is available for execution on the device",
            "no_kernel_image",
            "build_mismatch",
        ),
        (
            "RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA runtime version",
            "insufficient_driver",
            "build_mismatch",
        ),
        ("RuntimeError: HIP error: no ROCm-capable device is detected", "no_device", "not_visible"),
        (
            "RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable",
            "devices_unavailable",
            "not_visible",
        ),
        ("RuntimeError: CUDA error: unspecified launch failure", "launch_failure", "runtime_fault"),
        ("Hip error: hipErrorLaunchFailure", "launch_failure", "runtime_fault"),
        ("RuntimeError: CUDA error: uncorrectable ECC error encountered", "ecc_uncorrectable", "runtime_fault"),
        (
            "Memory access fault by GPU node-1 (Agent handle: 0x43578c10) on address 0x7f58f8001000. Reason: Page not "
            "present or supervisor privilege.",
            "memory_access_fault",
            "runtime_fault",
        ),
        (
            "RuntimeError: CUDA error: peer access is not supported between these two devices",
            "peer_access",
            "peer_access",
        ),
        ("NVRM: Xid (PCI:0000:3b:00): 79, pid=2231, GPU has fallen off the bus.", "gpu_lost", "runtime_fault"),
        ("pynvml.NVMLError_GpuIsLost: GPU is lost", "gpu_lost", "runtime_fault"),
        ("NVRM: Xid (PCI:0000:3b:00): 48, pid=2231, DBE (double bit error) ECC error", "xid", "runtime_fault"),
    ],
)
def test_device_errors_are_keyed_by_the_error(text, error, family):
    e = one(text, "device_error")
    assert (e.error, e.family) == (error, family)


@pytest.mark.parametrize(
    "text",
    [
        "RuntimeError: CUDA error: out of memory",
        "RuntimeError: HIP error: out of memory",
        "RuntimeError: XPU error: out of memory",
        "NCCL WARN Cuda failure 'out of memory'",
        "cupy_backends.cuda.api.driver.CUDADriverError: CUDA_ERROR_OUT_OF_MEMORY: out of memory",
    ],
)
def test_out_of_memory_from_the_runtime_is_the_oom_family(text):
    assert "cuda_error_oom" in kinds(text) and "device_error" not in kinds(text)


def test_teardown_noise_is_no_event():
    assert "device_error" not in kinds("RuntimeError: CUDA error: driver shutting down")


@pytest.mark.parametrize(
    "text,device",
    [
        (
            "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 1.08 GiB. GPU 0 has a total capacity of 62.47 GiB "
            "of which 769.00 MiB is free. Of the allocated memory 61.41 GiB is allocated by PyTorch, and 12.00 MiB is "
            "reserved by PyTorch but unallocated.",
            "HIP",
        ),
        (
            "torch.OutOfMemoryError: XPU out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of 15.11 GiB "
            "of which 300.00 MiB is free. Of the allocated memory 14.20 GiB is allocated by PyTorch, and 100.00 MiB is "
            "reserved by PyTorch but unallocated.",
            "XPU",
        ),
        (
            "RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB (NPU 0; 60.96 GiB total capacity; 57.10 GiB "
            "already allocated; 57.10 GiB current active; 1.21 GiB free; 58.80 GiB reserved in total by PyTorch) If "
            "reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.",
            "NPU",
        ),
        (
            "RuntimeError: MPS backend out of memory (MPS allocated: 17.70 GiB, other allocations: 1.20 GiB, max allowed: "
            "18.13 GiB). Tried to allocate 256.00 MiB on private pool.",
            "MPS",
        ),
    ],
)
def test_every_allocator_oom_is_one_oom_event_with_its_platform(text, device):
    e = one(text, "torch_oom")
    assert e.device == device and e.requested and e.total


@pytest.mark.parametrize(
    "text,problem,driver",
    [
        (
            "ImportError: /usr/local/lib/python3.10/dist-packages/flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so: "
            "undefined symbol: _ZN3c105ErrorC2ENS_14SourceLocationE",
            "undefined symbol",
            False,
        ),
        (
            "ImportError: /opt/venv/lib/python3.12/site-packages/vllm/_C.abi3.so: undefined symbol: "
            "_ZN3c1017RegisterOperatorsD1Ev",
            "undefined symbol",
            False,
        ),
        (
            "ImportError: libcudart.so.12: cannot open shared object file: No such file or directory",
            "missing shared library",
            False,
        ),
        (
            "OSError: libcuda.so.1: cannot open shared object file: No such file or directory",
            "missing shared library",
            True,
        ),
        (
            "ImportError: /lib64/libc.so.6: version `GLIBC_2.32' not found (required by /opt/venv/lib/python3.10/"
            "site-packages/vllm/_C.abi3.so)",
            "version GLIBC_2.32 not found",
            False,
        ),
    ],
)
def test_loader_errors(text, problem, driver):
    e = one(text, "loader_error")
    assert (e.problem, e.driver) == (problem, driver)


def test_nccl_net_plugin_probe_is_no_loader_error():
    line = (
        "a46f6c76528f:2777:2777 [0] NCCL INFO NET/Plugin : dlerror=libnccl-net.so: cannot open shared object "
        "file: No such file or directory No plugin found (libnccl-net.so), using internal implementation"
    )
    assert "loader_error" not in kinds(line)


@pytest.mark.parametrize(
    "text",
    [
        "RuntimeError: oneCCL: comm_selector.cpp:57 create_comm_impl: EXCEPTION: ze_data was not initialized",
        "2025:08:14-14:34:47:(19220) |CCL_ERROR| comm_selector.cpp:57 create_comm_impl: condition failed",
        "RuntimeError: create:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:102 HCCL function error: "
        "HcclCommInitRootInfo(numRanks, &rootInfo, rank, &(comm->hcclComm_)), error code is 7",
        "RuntimeError: Gloo connectFullMesh failed with [../third_party/gloo/gloo/transport/tcp/pair.cc:144] no error",
        "[Rank 0] Watchdog caught collective operation timeout: WorkHCCL(SeqNum=1, OpType=ALLREDUCE, "
        "Timeout(ms)=1800000) ran for 1800123 milliseconds before timing out.",
    ],
)
def test_collectives_of_every_platform_are_the_nccl_family(text):
    one(text, "nccl_error")


@pytest.mark.parametrize(
    "text,kind",
    [
        (
            "OSError: [Errno 28] No space left on device: '/root/.cache/huggingface/hub/models--x/blobs/a.incomplete'",
            "disk_full",
        ),
        ("RuntimeError: Data processing error: I/O error: No space left on device (os error 28)", "disk_full"),
        ("OSError: [Errno 28] No space left on device: '/dev/shm/psm_3e8a1c57'", "shm_problem"),
        ("OSError: [Errno 122] Disk quota exceeded: '/home/u/.cache/vllm'", "disk_full"),
        ("PermissionError: [Errno 13] Permission denied: '/.cache'", "not_writable"),
        ("OSError: [Errno 30] Read-only file system: '/home/vllm/.triton/cache'", "not_writable"),
        ("RuntimeError: Failed to infer device type", "gpu_not_visible"),
        ("RuntimeError: No CUDA GPUs are available", "gpu_not_visible"),
        ("AssertionError: Torch not compiled with CUDA enabled", "package_mismatch"),
        (
            "Exception: data did not match any variant of untagged enum ModelWrapper at line 1251003 column 3",
            "package_mismatch",
        ),
        (
            "OSError: We couldn't connect to 'https://huggingface.co' to load the files, and couldn't find them in the "
            "cached files.",
            "hub_unreachable",
        ),
        (
            "huggingface_hub.errors.LocalEntryNotFoundError: Cannot find the requested files in the disk cache and outgoing "
            "traffic has been disabled.",
            "hub_unreachable",
        ),
        (
            "huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name' or 'namespace/repo_name': "
            "'/models/llama'. Use `repo_type` argument if needed.",
            "repo_not_found",
        ),
        ("safetensors_rust.SafetensorError: Error while deserializing header: HeaderTooLarge", "model_files_corrupt"),
        (
            "safetensors._safetensors_rust.SafetensorError: Error while deserializing header: header too large",
            "model_files_corrupt",
        ),
        ("_pickle.UnpicklingError: invalid load key, 'v'.", "model_files_corrupt"),
        (
            "  Input should be less than or equal to 1 [type=less_than_equal, input_value=1.5, input_type=float]",
            "config_invalid",
        ),
        ("RuntimeError: An attempt has been made to start a new process before the", "main_guard_missing"),
        (
            "RuntimeError: unable to mmap 3945026048 bytes from file </models/m/pytorch_model-00002-of-00017.bin>: Cannot "
            "allocate memory (12)",
            "host_memory_problem",
        ),
        ("OSError: [Errno 12] Cannot allocate memory", "host_memory_problem"),
        (
            "(raylet) node_manager.cc:3040: 1 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers "
            "crashed due to other reasons at node (ID: ab12, IP: 10.0.0.2) over the last time period.",
            "host_memory_problem",
        ),
        ("ImportError: libgomp.so.1: cannot allocate memory in static TLS block", "loader_error"),
        (
            "ValueError: Tokenizer class Qwen2TokenizerFast does not exist or is not currently imported.",
            "package_mismatch",
        ),
    ],
)
def test_families_of_the_layers_under_vllm(text, kind):
    one(text, kind)


def test_an_mmap_that_failed_for_another_reason_is_not_host_memory():
    assert "host_memory_problem" not in kinds(
        "RuntimeError: unable to mmap 100 bytes from file </m/x.bin>: No such file or directory (2)"
    )


def test_a_local_path_that_is_not_there_is_marked_local():
    e = one(
        "huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name' or "
        "'namespace/repo_name': '/models/llama'. Use `repo_type` argument if needed.",
        "repo_not_found",
    )
    assert e.repo == "/models/llama" and e.local


def test_the_hub_low_disk_warning_keeps_its_figures():
    e = one(
        "UserWarning: Not enough free disk space to download the file. The expected file size is: 3945.03 MB. "
        "The target location /root/.cache/huggingface/hub only has 1203.44 MB free disk space.",
        "disk_full",
    )
    assert e.warning and e.needed == 3_945_030_000 and e.free == 1_203_440_000


def test_permission_denied_without_a_path_is_no_cache_folder():
    e = one("PermissionError: [Errno 13] Permission denied", "not_writable")
    assert not e.cache
    assert one("PermissionError: [Errno 13] Permission denied: '/.cache/huggingface'", "not_writable").cache


@pytest.mark.parametrize(
    "text,layer",
    [
        # a cuBLAS / cuDNN status the device table does not key, with or without torch's wrapper
        ("RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`", "CUDA"),
        ("CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`", "CUDA"),
        ("CUDNN_STATUS_EXECUTION_FAILED", "CUDA"),  # the status alone
        ("RuntimeError: HIP error: CUDNN_STATUS_EXECUTION_FAILED", "HIP"),
        # NCCL WARNs whose meaning is not NCCL's transport, that no other family reads
        ("gpu-a:5512:5640 [0] include/alloc.h:125 NCCL WARN Failed to CUDA calloc 6291456 bytes", "NCCL"),
        ("gpu-a:5512:5640 [1] os/linux.cc:801 NCCL WARN Call to open failed: No such file or directory", "NCCL"),
    ],
)
def test_native_texts_no_family_keys_are_native_errors(text, layer):
    """A failure whose cause only the native catalogue names (rules/catalogue/native_errors.json)."""
    e = one(text, "native_error")
    assert e.layer == layer and e.text


def test_nccl_duplicate_gpu_is_two_ranks_on_one_gpu():
    """NCCL's "Duplicate GPU detected" means more ranks than visible GPUs (parallelism_mismatch's
    not_enough_gpus family), not a transport failure; its WARN relay stays NCCL's own line."""
    e = one(
        "gpu-a:5512:5640 [0] init.cc:974 NCCL WARN Duplicate GPU detected : rank 0 and rank 1 both on CUDA device 1000",
        "not_enough_gpus",
    )
    assert "two ranks on one GPU" in e.detail and "rank 0 and rank 1" in e.detail


@pytest.mark.parametrize(
    "text,kind",
    [
        ("invalid device function", "device_error"),  # the runtime's text pasted bare
        ("peer access is not supported between these two devices", "device_error"),
        ("unhandled system error (run with NCCL_DEBUG=INFO for details)", "nccl_error"),  # NCCL 2.18+ result text
        ("remote process exited or there was a network error", "nccl_error"),
        ("[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLRED", "nccl_error"),
    ],
)
def test_bare_native_sentences_are_their_families(text, kind):
    assert kind in kinds(text)


def test_the_native_sentences_need_their_own_words():
    """`out of memory`, `invalid usage` and `internal error` alone are too plain to read bare."""
    for text in ("out of memory", "invalid usage", "internal error", "warning: invalid device", "CUBLAS_STATUS"):
        assert not {"device_error", "native_error", "nccl_error", "cuda_error_oom"} & set(kinds(text)), text


def test_torch_211_capability_warning_gives_the_capability():
    e = one("Found GPU0 Tesla V100-SXM2-32GB which is of compute capability (CC) 7.0.", "torch_arch")
    assert e.capability == "7.0"
