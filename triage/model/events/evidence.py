"""Events read from evidence pasted beside a log: nvidia-smi, fuser, collect_env."""

from __future__ import annotations

from typing import Literal

from triage.model.events.base import Event


# --- evidence bundles: nvidia-smi, fuser, collect_env ------------------------------------


class GpuInfo(Event):
    """A GPU as nvidia-smi or collect_env lists it."""

    kind: Literal["gpu_info"] = "gpu_info"
    index: int | None = None
    name: str | None = None
    total: int | None = None
    used: int | None = None
    free: int | None = None


class GpuProcess(Event):
    """A process holding a GPU (nvidia-smi's process table, its CSV, or fuser -v /dev/nvidia*)."""

    kind: Literal["gpu_process"] = "gpu_process"
    pid: int
    name: str | None = None
    bytes: int | None = None
    gpu: int | None = None
    user: str | None = None


class SystemInfo(Event):
    """Driver, CUDA and torch versions (nvidia-smi header, collect_env)."""

    kind: Literal["system_info"] = "system_info"
    driver_version: str | None = None
    cuda_version: str | None = None
    torch_version: str | None = None
    torch_cuda_version: str | None = None
    cuda_runtime_version: str | None = None
