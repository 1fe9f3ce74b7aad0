"""The vocabulary: typed facts that a log line can state.

Every event is a frozen msgspec Struct (`base.event`) with a `kind` (the name rules use), the
line number it came from and the origin (process/rank) that printed it. Every quantity of
memory is an int in bytes; vLLM's "GB" labels are GiB values and are converted as such.
What a kind means to the timeline and the facts (its role, the phase it marks or names,
the figures it gives) is declared on its class (`base.Event`).

The classes live by family (`memory`, `progress`, `failures`, `evidence`); this module
gathers them so every stage names an event `ev.<Class>`. The layers under vLLM (`layers`)
are read by their kind and not gathered here.
"""

from __future__ import annotations

from triage.model.events import layers as _layers  # noqa: F401 - its classes register their kinds
from triage.model.events.base import Event, Role  # noqa: F401
from triage.model.events.evidence import (  # noqa: F401 - re-exported: `ev.<Class>` is how the stages name events
    GpuInfo,
    GpuProcess,
    GpuProcessesCounted,
    SystemInfo,
)
from triage.model.events.failures import (  # noqa: F401 - re-exported: `ev.<Class>` is how the stages name events
    AddressInUse,
    ArchitectureUnsupported,
    ArgumentsRejected,
    CapabilityTooLow,
    ChainNote,
    DriverProblem,
    ErrorLine,
    ExceptionRaised,
    Frame,
    HostMemoryProblem,
    HubAuthError,
    NcclError,
    NotDivisible,
    NotEnoughGpus,
    ProcessCrash,
    ProcessDied,
    RepoNotFound,
    RestartCount,
    SharedMemoryProblem,
    SignalKilled,
    TorchArch,
    TracebackStart,
)
from triage.model.events.memory import (  # noqa: F401 - re-exported: `ev.<Class>` is how the stages name events
    CacheBlocks,
    CpuAllocFailed,
    CudaErrorOom,
    KvCacheMemory,
    KvCachePinned,
    KvCacheTokens,
    KvNeeded,
    KvTooSmall,
    MambaBlocksShort,
    MaxConcurrency,
    MemoryBudget,
    MemoryProfile,
    NoCacheMemory,
    OomProcess,
    ProfilingMismatch,
    StartupFreeMemory,
    TorchOom,
    WeightsLoaded,
)
from triage.model.events.progress import (  # noqa: F401 - re-exported: `ev.<Class>` is how the stages name events
    CudaGraphAdvice,
    CudaGraphEstimate,
    CudaGraphPool,
    EncoderCacheBudget,
    EngineConfig,
    EngineStopping,
    GraphCaptureDone,
    LoadModelOom,
    PhaseMark,
    RankAssigned,
    Ready,
    SamplerWarmupOom,
    SchedulerBatch,
    SwapSpace,
)
