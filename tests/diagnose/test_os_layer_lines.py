"""One-line pastes from the OS layer (../shared/errors.md §4): errnos by name and by what they are
about, fatal signals as the shell, Python, torch and the kernel name them, the loader's lines.
Each line and its lookalike: the cause, or none (SILENT) where the line reports no failure."""

from __future__ import annotations

import pytest
from conftest import triage_text

SILENT = None
LINES = [
    # errnos: the path or the raising code decides (errors.md §4.1, §9 traps 6-7)
    ("OSError: [Errno 30] Read-only file system: '/models/llama-3-8b'", "cache_dir_not_writable"),
    ("PermissionError: [Errno 13] Permission denied: '/models/llama-3-8b/config.json'", "unknown_failure"),
    ("OSError: [Errno 28] No space left on device: '/dev/shm/psm_1a2b3c'", "shared_memory_exhausted"),
    ("OSError: [Errno 28] No space left on device: '/root/.cache/huggingface/hub/x'", "disk_space_exhausted"),
    ("OSError: [Errno 28] No space left on device: '/dev/shm'", "shared_memory_exhausted"),
    ("OSError: [Errno 28] No space left on device: '/home/hashmap/.cache/huggingface/hub/x'", "disk_space_exhausted"),
    ("OSError: [Errno 99] Cannot assign requested address", "invalid_arguments"),
    ("zmq.error.ZMQError: Cannot assign requested address (addr='tcp://10.0.0.5:13345')", "nccl_failure"),
    ("TimeoutError: [Errno 110] Connection timed out", "hub_unreachable"),
    ("OSError: Cannot allocate memory (os error 12)", "host_memory_exhausted"),
    ("socket.gaierror: [Errno -3] Temporary failure in name resolution", "hub_unreachable"),
    (
        "ssl.SSLCertVerificationError: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed:"
        " self-signed certificate in certificate chain (_ssl.c:1006)",
        "hub_unreachable",
    ),
    # torch's shared-memory objects live in /dev/shm; the errno after them decides (errors.md 4.3)
    (
        "RuntimeError: unable to open shared memory object </torch_1234_567_8> in read-write mode:"
        " No space left on device (28)",
        "shared_memory_exhausted",
    ),
    (
        "RuntimeError: unable to open shared memory object </torch_1234_567_8> in read-write mode:"
        " Too many open files (24)",
        "unknown_failure",
    ),
    # signals (errors.md §4.5)
    ("Bus error", "shared_memory_exhausted"),
    ("INFO 09-26 08:11:02 [launcher.py:88] Bus error", SILENT),
    ("INFO 09-26 08:11:02 [launcher.py:88] Killed", SILENT),
    ("Illegal instruction", "package_version_mismatch"),
    ("Illegal instruction (core dumped)", "package_version_mismatch"),
    ("RuntimeError: CUDA error: an illegal instruction was encountered", "gpu_runtime_fault"),
    ("<Process name='Process-1' pid=123 parent=1 stopped exitcode=-SIGBUS>", "shared_memory_exhausted"),
    ("  traceback : Signal 7 (SIGBUS) received by PID 142", "shared_memory_exhausted"),
    ("failed (exitcode: -9) local_rank: 0 (pid: 77) of binary: /usr/bin/python3", "host_memory_exhausted"),
    ("failed (exitcode: -4) local_rank: 0 (pid: 77) of binary: /usr/bin/python3", "package_version_mismatch"),
    ("  traceback : Signal 15 (SIGTERM) received by PID 142", SILENT),
    (
        "RuntimeError: DataLoader worker (pid 87) is killed by signal: Bus error. It is possible that"
        " dataloader's workers are out of shared memory. Please try to raise your shared memory limit.",
        "shared_memory_exhausted",
    ),
    (
        "[71234.551203] traps: python3[63] trap invalid opcode ip:7f2a1c3e41b0 sp:7ffd3a0c1e20 error:0"
        " in _C.abi3.so[7f2a1c2b8000+1a41000]",
        "package_version_mismatch",
    ),
    # the loader's line for an executable: the library decides (taxonomy v2 tie-break)
    (
        "undefined symbol: _ZN5torch3jit17parseSchemaOrNameERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE",
        "package_version_mismatch",
    ),
    ("INFO 09-26 14:31:18 [x.py:1] checking for undefined symbol: foo in the plugin table", SILENT),
    (
        "/usr/bin/python3: error while loading shared libraries: libcudart.so.12: cannot open shared object"
        " file: No such file or directory",
        "package_version_mismatch",
    ),
    (
        "nvidia-smi: error while loading shared libraries: libnvidia-ml.so.1: cannot open shared object file:"
        " No such file or directory",
        "gpu_not_visible",
    ),
]


@pytest.mark.parametrize(("line", "cause"), LINES, ids=[line[:48] for line, _ in LINES])
def test_os_layer_line(line, cause):
    got = [d.id for d in triage_text(line + "\n").diagnoses]
    assert (got[0] if got else SILENT) == cause, got


@pytest.mark.parametrize(
    "line",
    [
        "OSError: [Errno 24] Too many open files",
        "RuntimeError: unable to open shared memory object </torch_1_2_3> in read-write mode: Too many open files (24)",
    ],
)
def test_too_many_open_files_stays_unexplained_with_its_remedy(line):
    """errors.md 4.1 / 4.3: EMFILE is unknown_failure; the report still says to raise the descriptor limit."""
    top = triage_text(line + "\n").diagnoses[0]
    assert top.id == "unknown_failure"
    assert any("ulimit -n" in r.text for r in top.remedies), top.remedies
