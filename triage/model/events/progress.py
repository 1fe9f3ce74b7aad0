"""Events that mark how far a startup got: phases, graph capture, warm-ups, readiness, and
the engine configuration it printed."""

from __future__ import annotations

from triage.model.events.base import Event, FactSink, Role, event
from triage.records import field


# --- phases ---------------------------------------------------------------------------


@event
class PhaseMark(Event):
    """A line that says which startup phase a process is in."""

    kind = "phase"
    phase: str
    what: str = ""

    def reached_phase(self) -> str | None:
        return self.phase

    def add_facts(self, facts: FactSink) -> None:
        if self.phase == "cuda_graph_capture" and "graph_capture" not in facts:
            facts.set("graph_capture", "started", self)


@event
class GraphCaptureDone(Event):
    """`Graph capturing finished in N secs[, took X GiB]`."""

    kind = "graph_capture_done"
    reached = "cuda_graph_capture"
    facts = {"cuda_graph_bytes": "bytes"}
    seconds: float | None = None
    bytes: int | None = None

    def add_facts(self, facts: FactSink) -> None:
        facts.set("graph_capture", "done", self)


@event
class SamplerWarmupOom(Event):
    """`CUDA out of memory occurred when warming up sampler/pooler with N dummy requests`."""

    kind = "sampler_warmup_oom"
    role = Role.CAUSE
    failed_in = "profiling"
    requests: int | None = None
    what: str = "sampler"


@event
class LoadModelOom(Event):
    """`Failed to load model - not enough GPU memory.` (0.13 ..), wrapping the torch OOM."""

    kind = "load_model_oom"
    role = Role.CAUSE
    failed_in = "loading_weights"


@event
class EncoderCacheBudget(Event):
    """Multimodal encoder profiling: budget tokens and the dummy items used."""

    kind = "encoder_cache_budget"
    facts = {"encoder_cache_tokens": "tokens"}
    tokens: int | None = None
    items: int | None = None
    modality: str | None = None

    def add_facts(self, facts: FactSink) -> None:
        facts.put("multimodal", True, self)


@event
class SwapSpace(Event):
    """`(Possibly) too large swap space. X GiB out of the Y GiB total CPU memory`."""

    kind = "swap_space"
    facts = {"swap_bytes": "swap", "cpu_total_bytes": "cpu_total"}
    swap: int
    cpu_total: int
    is_error: bool = False

    def states_cause(self) -> bool:
        return self.is_error  # "Possibly too large" is a warning, "Too large" the error


@event
class Ready(Event):
    """The server (or offline engine) reached a serving state."""

    kind = "ready"
    what: str


# --- configuration --------------------------------------------------------------------


@event
class EngineConfig(Event):
    """The version banner and any engine arguments it or an argument dump carries."""

    kind = "engine_config"
    facts = {"vllm_version": "version", "engine": "engine"}
    source: str = "banner"  # banner | args | version | env: a restart prints the same source again
    version: str | None = None
    engine: str | None = None
    settings: dict[str, str | int | float | bool | None] = field(default_factory=dict)

    def add_facts(self, facts: FactSink) -> None:
        for key, value in self.settings.items():
            facts.put(key, value, self)
