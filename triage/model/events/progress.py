"""Events that mark how far a startup got: phases, graph capture, warm-ups, readiness, and
the engine configuration it printed."""

from __future__ import annotations

from msgspec import field

from triage.model.events.base import Event, FactSink, Role, event

# --- phases ---------------------------------------------------------------------------


@event
class PhaseMark(Event, frozen=True, kw_only=True):
    """A line that says which startup phase a process is in."""

    kind = "phase"
    phase: str
    what: str = ""
    model: str | None = None  # `Starting to load model NAME...` (V1) names it where no arg dump does

    def reached_phase(self) -> str | None:
        return self.phase

    def add_facts(self, facts: FactSink) -> None:
        if self.model:
            facts.put("model", self.model, self)
        if self.phase == "cuda_graph_capture" and "graph_capture" not in facts:
            facts.set("graph_capture", "started", self)


@event
class GraphCaptureDone(Event, frozen=True, kw_only=True):
    """`Graph capturing finished in N secs[, took X GiB]`."""

    kind = "graph_capture_done"
    reached = "cuda_graph_capture"
    facts = {"cuda_graph_bytes": "bytes"}
    seconds: float | None = None
    bytes: int | None = None

    def add_facts(self, facts: FactSink) -> None:
        facts.set("graph_capture", "done", self)


@event
class CudaGraphEstimate(Event, frozen=True, kw_only=True):
    """`Estimated CUDA graph memory: X GiB total` (0.21+): taken out of the budget before the KV cache."""

    kind = "cuda_graph_estimate"
    facts = {"cuda_graph_estimate_bytes": "bytes"}
    bytes: int

    def add_facts(self, facts: FactSink) -> None:
        if "cuda_graph_profiling" not in facts:
            facts.put("cuda_graph_profiling", True, self)


@event
class CudaGraphAdvice(Event, frozen=True, kw_only=True):
    """vLLM's utilization advice on the graphs' estimate: `The current --gpu-memory-utilization=U is
    equivalent to ... =E ... increase --gpu-memory-utilization to S` (profiling on, 0.21+), or the
    warning that it is off (`VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0`, `from U to S`)."""

    kind = "cuda_graph_advice"
    facts = {"cuda_graph_suggested_util": "suggested", "cuda_graph_equivalent_util": "equivalent"}
    profiled: bool = True
    current: float | None = None
    equivalent: float | None = None
    suggested: float | None = None

    def add_facts(self, facts: FactSink) -> None:
        facts.set("cuda_graph_profiling", self.profiled, self)
        if self.current is not None and "gpu_memory_utilization" not in facts:  # the arguments say it first
            facts.put("gpu_memory_utilization", self.current, self)


@event
class CudaGraphPool(Event, frozen=True, kw_only=True):
    """`CUDA graph pool memory: A GiB (actual), E GiB (estimated), difference: ...` after capture."""

    kind = "cuda_graph_pool"
    facts = {"cuda_graph_bytes": "actual", "cuda_graph_estimate_bytes": "estimated"}
    actual: int
    estimated: int


@event
class SamplerWarmupOom(Event, frozen=True, kw_only=True):
    """`CUDA out of memory occurred when warming up sampler/pooler with N dummy requests`."""

    kind = "sampler_warmup_oom"
    role = Role.CAUSE
    failed_in = "profiling"
    requests: int | None = None
    what: str = "sampler"


@event
class LoadModelOom(Event, frozen=True, kw_only=True):
    """`Failed to load model - not enough GPU memory.` (0.13 ..), wrapping the torch OOM."""

    kind = "load_model_oom"
    role = Role.CAUSE
    failed_in = "loading_weights"


@event
class EncoderCacheBudget(Event, frozen=True, kw_only=True):
    """Multimodal encoder profiling: budget tokens and the dummy items used."""

    kind = "encoder_cache_budget"
    facts = {"encoder_cache_tokens": "tokens"}
    tokens: int | None = None
    items: int | None = None
    modality: str | None = None

    def add_facts(self, facts: FactSink) -> None:
        facts.put("multimodal", True, self)


@event
class SwapSpace(Event, frozen=True, kw_only=True):
    """`(Possibly) too large swap space. X GiB out of the Y GiB total CPU memory`."""

    kind = "swap_space"
    facts = {"swap_bytes": "swap", "cpu_total_bytes": "cpu_total"}
    swap: int
    cpu_total: int
    is_error: bool = False

    def states_cause(self) -> bool:
        return self.is_error  # "Possibly too large" is a warning, "Too large" the error


@event
class Ready(Event, frozen=True, kw_only=True):
    """The server (or offline engine) reached a serving state."""

    kind = "ready"
    what: str


@event
class EngineStopping(Event, frozen=True, kw_only=True):
    """The engine core beginning a shutdown it was asked for (0.18.1 .. 0.22: `Shutdown initiated
    (timeout=N)`, logged only from its busy loop, so only once it ran). The client's report that
    the engine core process died, after this, is the stop itself, not a failure."""

    kind = "engine_stopping"


# --- configuration --------------------------------------------------------------------


@event
class EngineConfig(Event, frozen=True, kw_only=True):
    """The version banner and any engine arguments it or an argument dump carries."""

    kind = "engine_config"
    facts = {"vllm_version": "version", "engine": "engine"}
    source: str = "banner"  # banner | args | version | env: a restart prints the same source again
    version: str | None = None
    engine: str | None = None
    settings: dict[str, str | int | float | bool | None] = field(default_factory=dict)
    server: bool = False  # the API server's own banner: this start serves HTTP, ready when it listens

    def add_facts(self, facts: FactSink) -> None:
        for key, value in self.settings.items():
            facts.put(key, value, self)
        if self.source == "args":  # what the user set: a None in `Namespace(...)` is an argument left to its default
            facts.put("args_given", tuple(sorted(k for k, v in self.settings.items() if v is not None)), self)


@event
class RankAssigned(Event, frozen=True, kw_only=True):
    """`rank R in world size W is assigned as DP rank d, PP rank p, TP rank t`: TP >= t + 1, PP >= p + 1."""

    kind = "rank_assigned"
    world: int
    pp_rank: int = 0
    tp_rank: int = 0

    def add_facts(self, facts: FactSink) -> None:
        for name, seen in (("tensor_parallel_size", self.tp_rank + 1), ("pipeline_parallel_size", self.pp_rank + 1)):
            now = facts.value(name)
            if now is None or (isinstance(now, int) and now < seen):
                facts.set(name, seen, self)


@event
class SchedulerBatch(Event, frozen=True, kw_only=True):
    """`Chunked prefill is enabled with max_num_batched_tokens=N.`: the V1 profile batch, set or defaulted."""

    kind = "scheduler_batch"
    facts = {"max_num_batched_tokens": "max_num_batched_tokens"}
    max_num_batched_tokens: int
