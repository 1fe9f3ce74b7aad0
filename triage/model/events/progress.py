"""Events that mark how far a startup got: phases, graph capture, warm-ups, readiness, and
the engine configuration it printed."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from triage.model.events.base import Event


# --- phases ---------------------------------------------------------------------------


class PhaseMark(Event):
    """A line that says which startup phase a process is in."""

    kind: Literal["phase"] = "phase"
    phase: str
    what: str = ""


class GraphCaptureDone(Event):
    """`Graph capturing finished in N secs[, took X GiB]`."""

    kind: Literal["graph_capture_done"] = "graph_capture_done"
    seconds: float | None = None
    bytes: int | None = None


class SamplerWarmupOom(Event):
    """`CUDA out of memory occurred when warming up sampler/pooler with N dummy requests`."""

    kind: Literal["sampler_warmup_oom"] = "sampler_warmup_oom"
    requests: int | None = None
    what: str = "sampler"


class LoadModelOom(Event):
    """`Failed to load model - not enough GPU memory.` (0.13 ..), wrapping the torch OOM."""

    kind: Literal["load_model_oom"] = "load_model_oom"


class EncoderCacheBudget(Event):
    """Multimodal encoder profiling: budget tokens and the dummy items used."""

    kind: Literal["encoder_cache_budget"] = "encoder_cache_budget"
    tokens: int | None = None
    items: int | None = None
    modality: str | None = None


class SwapSpace(Event):
    """`(Possibly) too large swap space. X GiB out of the Y GiB total CPU memory`."""

    kind: Literal["swap_space"] = "swap_space"
    swap: int
    cpu_total: int
    is_error: bool = False


class Ready(Event):
    """The server (or offline engine) reached a serving state."""

    kind: Literal["ready"] = "ready"
    what: str


# --- configuration --------------------------------------------------------------------


class EngineConfig(Event):
    """The version banner and any engine arguments it or an argument dump carries."""

    kind: Literal["engine_config"] = "engine_config"
    source: str = "banner"  # banner | args | version | env: a restart prints the same source again
    version: str | None = None
    engine: str | None = None
    settings: dict[str, str | int | float | bool | None] = Field(default_factory=dict)
