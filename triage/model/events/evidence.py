"""Events read from evidence pasted beside a log: nvidia-smi, fuser, collect_env."""

from __future__ import annotations

from triage.model.events.base import Event, event

# --- evidence bundles: nvidia-smi, fuser, collect_env ------------------------------------


@event
class GpuInfo(Event, frozen=True, kw_only=True):
    """A GPU as nvidia-smi or collect_env lists it."""

    kind = "gpu_info"
    facts = {"gpu_name": "name", "gpu_total_bytes": "total", "gpu_used_bytes": "used"}
    index: int | None = None
    name: str | None = None
    total: int | None = None
    used: int | None = None
    free: int | None = None


@event
class GpuProcess(Event, frozen=True, kw_only=True):
    """A process holding a GPU (nvidia-smi's process table, its CSV, or fuser -v /dev/nvidia*)."""

    kind = "gpu_process"
    pid: int
    name: str | None = None
    bytes: int | None = None
    gpu: int | None = None
    user: str | None = None


@event
class GpuProcessesCounted(Event, frozen=True, kw_only=True):
    """Rows of a long process table counted and summed, not read one by one: a report lists
    the largest processes (read whole) and counts the rest (`ingest/rows.py`)."""

    kind = "gpu_processes_counted"
    count: int = 0
    bytes: int = 0


@event
class SystemInfo(Event, frozen=True, kw_only=True):
    """Driver, CUDA and torch versions (nvidia-smi header, collect_env)."""

    kind = "system_info"
    facts = {name: name for name in ("driver_version", "cuda_version", "torch_version", "torch_cuda_version")}
    driver_version: str | None = None
    cuda_version: str | None = None
    torch_version: str | None = None
    torch_cuda_version: str | None = None
    cuda_runtime_version: str | None = None
