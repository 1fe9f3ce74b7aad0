"""The errno table is the generator's output, and the errno/about reading it feeds the fallback rules."""

from __future__ import annotations

import errno
import importlib.util
import os
import platform
from pathlib import Path

import pytest

from triage.timeline import errno_table
from triage.timeline.errno_about import about, errno_name

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gen_errno_table.py"


def _generator():
    spec = importlib.util.spec_from_file_location("gen_errno_table", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_table_is_the_scripts_output_where_its_provenance_matches():
    gen = _generator()
    committed = (ROOT / "triage" / "timeline" / "errno_table.py").read_text(encoding="utf-8")
    if gen.provenance().split(",")[0] + "," not in committed or platform.libc_ver()[0] != "glibc":
        pytest.skip(f"made on another Python or C library than this one ({gen.provenance()})")
    assert committed == gen.render()


def test_every_row_agrees_with_this_pythons_errno_module():
    """Whatever Python runs the suite: a number both know has the same name and (on glibc) text."""
    known = [n for n in errno_table.NAMES if n in errno.errorcode]
    assert len(known) >= 120
    for n in known:
        assert errno_table.NAMES[n] == errno.errorcode[n]
        if platform.libc_ver()[0] == "glibc":
            assert errno_table.TEXTS[n] == os.strerror(n)


@pytest.mark.parametrize(
    ("message", "number", "name"),
    [
        ("[Errno 30] Read-only file system: '/models/x'", 30, "EROFS"),
        ("[Errno 48] Address already in use", 48, "EADDRINUSE"),  # macOS's number, Linux's text
        ("No space left on device (os error 28)", 28, "ENOSPC"),
        (
            "unable to open shared memory object </torch_1_2_3> in read-write mode: Too many open files (24)",
            None,
            "EMFILE",
        ),
        ("Cannot assign requested address (addr='tcp://10.0.0.5:13345')", None, "EADDRNOTAVAIL"),
        ("[Errno 110] Connection timed out", 110, "ETIMEDOUT"),
        ("something failed", None, None),
        ("something failed", 12, "ENOMEM"),
    ],
)
def test_errno_name_by_text_then_number(message, number, name):
    assert errno_name(message, number) == name


@pytest.mark.parametrize(
    ("path", "modules", "message", "what"),
    [
        ("/dev/shm/nccl-AbC123", [], "", "shm"),
        ("/torch_1234_5_6", [], "", "shm"),
        ("/root/.cache/huggingface/hub/models--org--m", ["huggingface_hub.file_download"], "", "cache"),
        ("/models/llama-3-8b", [], "", "file"),
        (None, ["socket", "urllib3.util.connection"], "", "hub"),
        (None, ["socket", "torch.distributed.distributed_c10d"], "", "distributed"),
        (None, ["zmq.sugar.socket", "vllm.utils"], "", "distributed"),
        (None, ["socket", "vllm.entrypoints.openai.api_server"], "", "api_server"),
        (None, [], "bind failed for tcp://10.0.0.5:1234", "distributed"),
        (None, [], "", None),
    ],
)
def test_what_the_error_is_about(path, modules, message, what):
    assert about(path, modules, message) == what
