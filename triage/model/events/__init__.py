"""The vocabulary: typed facts that a log line can state.

Every event is a frozen pydantic model with a `kind` discriminator, the line number it
came from and the origin (process/rank) that printed it. Every quantity of memory is an
int in bytes; vLLM's "GB" labels are GiB values and are converted as such.

The classes live by family (`events_memory`, `events_progress`, `events_failures`,
`events_evidence`); this module gathers them so every stage names an event `ev.<Class>`.
The layers under vLLM (`events_layers`) are read by their kind and not gathered here.
"""

from __future__ import annotations

from triage.model.events.base import Event  # noqa: F401
from triage.model.events.memory import (  # noqa: F401 - re-exported: `ev.<Class>` is how the stages name events
    OomProcess, TorchOom, CudaErrorOom, CpuAllocFailed, MemoryBudget, MemoryProfile, KvCacheMemory,
    KvCachePinned, KvCacheTokens, MaxConcurrency, CacheBlocks, WeightsLoaded, StartupFreeMemory,
    ProfilingMismatch, KvTooSmall, KvNeeded, NoCacheMemory,
)
from triage.model.events.progress import (  # noqa: F401 - re-exported: `ev.<Class>` is how the stages name events
    PhaseMark, GraphCaptureDone, SamplerWarmupOom, LoadModelOom, EncoderCacheBudget, SwapSpace,
    Ready, EngineConfig,
)
from triage.model.events.failures import (  # noqa: F401 - re-exported: `ev.<Class>` is how the stages name events
    TracebackStart, Frame, ChainNote, ExceptionRaised, ProcessDied, ErrorLine, AddressInUse,
    HubAuthError, RepoNotFound, ArchitectureUnsupported, NotDivisible, NotEnoughGpus,
    CapabilityTooLow, DriverProblem, NcclError, SharedMemoryProblem, HostMemoryProblem, UsageError,
    RestartCount, SignalKilled, ProcessCrash,
)
from triage.model.events.evidence import (  # noqa: F401 - re-exported: `ev.<Class>` is how the stages name events
    GpuInfo, GpuProcess, SystemInfo,
)
