"""The plan's JSON contract (plan schema_version 1), published as docs/plan-v1.schema.json.

Renderers read only this. Changing a field's meaning or removing one is a new
schema_version; adding optional fields is not. Byte figures are per GPU unless named
otherwise; every estimated figure says so in `assumptions` or in its own `source`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from triage.version import __version__

PLAN_SCHEMA_VERSION = 1
Verdict = Literal["fits", "does not fit", "borderline", "cannot tell"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class ModelInfo(_Model):
    name: str
    architecture: str
    model_type: str
    family: str  # KV family: mha | gqa | mqa | mla | ...+sliding-window | hybrid-mamba | attention-free
    parameters: int
    parameters_source: str
    dtype: str
    dtype_source: str
    quantization: str | None = None
    multimodal: bool = False
    max_model_len_default: int | None = None  # the length vLLM derives from config.json


class GpuInfo(_Model):
    name: str
    count: int  # GPUs the launch uses (tp x pp)
    total_bytes: int
    free_bytes: int | None = None  # before the launch (nvidia-smi), the tightest GPU
    source: str
    other_processes_bytes: int | None = None


class LaunchFlags(_Model):
    tensor_parallel_size: int
    pipeline_parallel_size: int
    max_model_len: int
    gpu_memory_utilization: float
    kv_cache_dtype: str
    block_size: int
    max_num_seqs: int
    max_num_batched_tokens: int
    enforce_eager: bool
    given: list[str] = Field(default_factory=list)
    ignored: list[str] = Field(default_factory=list)


class KvLayer(_Model):
    kind: str
    layers: int
    bytes_per_token: int
    window: int | None = None
    state_bytes_per_sequence: int = 0


class KvInfo(_Model):
    family: str
    formula: str
    dtype_bytes: int
    attention_bytes_per_token: int
    state_bytes_per_sequence: int = 0
    groups: list[KvLayer] = Field(default_factory=list)


class Estimate(_Model):
    bytes: int
    assumption: str


class CheckResult(_Model):
    name: str
    verdict: Literal["fits", "fails", "cannot tell"]
    text: str
    margin_bytes: float | None = None
    source: str = ""


class PlanRemedy(_Model):
    text: str
    flags: dict[str, str] = Field(default_factory=dict)
    checked: str = ""  # what the memory model said about these flags


class PlanReport(_Model):
    schema_version: int = PLAN_SCHEMA_VERSION
    kind: Literal["plan"] = "plan"
    tool: str = f"vllm-triage {__version__}"
    model: ModelInfo
    gpu: GpuInfo
    flags: LaunchFlags
    weights_bytes_per_gpu: int
    weights_source: str
    kv_bytes_per_token: int  # per GPU, as vLLM's KV token count divides the pool
    kv: KvInfo
    budget_bytes: int
    activation_bytes: Estimate
    non_torch_bytes: Estimate
    cuda_graph_bytes: Estimate
    kv_cache_bytes: int | None = None
    kv_tokens: int | None = None
    max_model_len_fit: int | None = None
    max_concurrency: float | None = None
    checks: list[CheckResult] = Field(default_factory=list)
    verdict: Verdict
    fits: bool | None = None  # None: cannot tell
    reason: str | None = None  # a cause id of the taxonomy when it does not fit
    why: str = ""
    remedies: list[PlanRemedy] = Field(default_factory=list)
    assumptions: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


def plan_json_schema() -> dict:
    schema = PlanReport.model_json_schema()
    schema["$id"] = f"https://vllm-triage.invalid/plan-v{PLAN_SCHEMA_VERSION}.schema.json"
    return schema
