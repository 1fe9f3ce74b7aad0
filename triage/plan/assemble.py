"""The plan report from a resolved launch and the memory model's answer: verdict, reason, remedies.

Verdicts: `does not fit` when vLLM would refuse the configuration or a check fails even in
the best case of the estimates; `fits` when every check fits in the worst case;
`borderline` when a check fits or fails depending on where the estimates fall; `cannot
tell` when a figure the checks need is missing. The reason is a cause id of the taxonomy,
the same a failed log of that launch would be diagnosed with.
"""

from __future__ import annotations

from typing import Any

from triage.memory import FAILS, Check
from triage.plan import schema as s
from triage.plan.answer import CAUSE, Answer, all_fit, first_failure
from triage.plan.launch import Launch
from triage.plan.remedies import remedies
from triage.plan.wording import describe
from triage.units import gib
from triage.vllm_flags import releases_note

EXIT = {"fits": 0, "does not fit": 1, "borderline": 2, "cannot tell": 2}


def _verdict(launch: Launch, ans: Answer) -> tuple[s.Verdict, str | None, str, Check | None]:
    if launch.problems:
        cause, message = launch.problems[0]
        return "does not fit", cause, message, None
    if launch.layout.family == "attention-free" and not launch.layout.groups:
        return "cannot tell", None, "config.json gives no layer or head counts to size the KV cache from", None
    failed = first_failure(ans.checks)
    if failed is not None:
        cause = CAUSE.get(failed.name)  # type: ignore[assignment]
        w = ans.inputs.weights
        if failed.name == "kv_pool_positive" and w is not None and w.lo >= ans.budget.hi:
            cause = "weights_exceed_memory"
        if failed.name == "startup_free_memory" and launch.gpu.other_processes_bytes:
            cause = "foreign_gpu_processes"
        return "does not fit", cause, describe(failed), failed
    if all_fit(ans.checks):
        return "fits", None, "every check fits in the worst case of the estimates", None
    open_checks = [c for c in ans.checks if c.verdict != "fits"]
    if open_checks and all(not c.missing for c in open_checks):
        return "borderline", None, "; ".join(describe(c) for c in open_checks), None
    why = "; ".join(describe(c) for c in open_checks) or "no check could be made"
    return "cannot tell", None, why, None


def _check(c: Check) -> s.CheckResult:
    verdict: Any = c.verdict  # the memory model's words: "fits", "fails", "cannot tell"
    return s.CheckResult(name=c.name, verdict=verdict, text=describe(c), margin_bytes=c.margin, source=c.source)


def _model(launch: Launch) -> s.ModelInfo:
    cfg, w = launch.cfg, launch.weights
    from triage.plan.params import quant_method

    method, bits, _ = quant_method(cfg, launch.flags.quantization)
    quant = f"{method} {bits}-bit" if method and bits else method
    return s.ModelInfo(
        name=launch.files.name,
        architecture=cfg.architecture,
        model_type=cfg.model_type,
        family=launch.layout.family,
        parameters=w.parameters,
        parameters_source=w.parameters_source,
        dtype=launch.dtype,
        dtype_source=launch.dtype_source,
        quantization=quant,
        multimodal=cfg.multimodal,
        max_model_len_default=launch.derived_len,
    )


def _kv(launch: Launch) -> s.KvInfo:
    lay = launch.layout
    groups = [
        s.KvLayer(
            kind=g.kind,
            layers=g.layers,
            bytes_per_token=g.bytes_per_token,
            window=g.window,
            state_bytes_per_sequence=g.state_bytes_per_sequence,
        )
        for g in lay.groups
    ]
    return s.KvInfo(
        family=lay.family,
        formula=lay.formula,
        dtype_bytes=launch.kv_bytes,
        attention_bytes_per_token=lay.attention_bytes_per_token,
        state_bytes_per_sequence=lay.state_bytes_per_sequence,
        groups=groups,
    )


def _flags(launch: Launch) -> s.LaunchFlags:
    f = launch.flags
    return s.LaunchFlags(
        tensor_parallel_size=f.tp,
        pipeline_parallel_size=f.pp,
        max_model_len=launch.max_model_len,
        gpu_memory_utilization=launch.util,
        kv_cache_dtype=f.kv_cache_dtype or "auto",
        block_size=launch.block_size,
        max_num_seqs=launch.max_num_seqs,
        max_num_batched_tokens=launch.max_num_batched_tokens,
        enforce_eager=f.enforce_eager,
        given=f.given,
        ignored=f.ignored,
    )


def build_report(launch: Launch, ans: Answer) -> s.PlanReport:
    verdict, reason, why, failed = _verdict(launch, ans)
    gpu = launch.gpu
    pool = ans.pool.value if ans.pool is not None else None
    target = failed or (next((c for c in ans.checks if c.verdict != "fits"), None) if verdict == "borderline" else None)
    fixes = (
        remedies(ans, target, lambda flags: _replan(launch, flags))
        if target is not None and reason != "parallelism_mismatch"
        else []
    )
    notes = list(launch.layout.notes) + list(launch.files.notes) + list(gpu.notes)
    if launch.flags.ignored:
        notes.append("not taken into account: " + ", ".join(releases_note(t) for t in launch.flags.ignored))
    assumptions = [
        launch.dtype_source,
        f"KV dtype {launch.kv_source}",
        f"weights: {launch.weights.source}",
        ans.activation.assumption,
        ans.non_torch.assumption,
        ans.graphs.assumption,
        *launch.assumptions,
        *ans.assumptions,
        f"vLLM {launch.version or '0.7'} (V0 engine) arithmetic" if launch.v0 else "vLLM 0.10 (V1 engine) arithmetic",
    ]
    return s.PlanReport(
        model=_model(launch),
        gpu=s.GpuInfo(
            name=gpu.name,
            count=launch.world,
            total_bytes=gpu.total_bytes,
            free_bytes=gpu.free_bytes,
            source=gpu.source,
            other_processes_bytes=gpu.other_processes_bytes,
        ),
        flags=_flags(launch),
        weights_bytes_per_gpu=launch.weights.per_gpu_bytes,
        weights_source=launch.weights.source,
        kv_bytes_per_token=launch.layout.bytes_per_token,
        kv=_kv(launch),
        budget_bytes=int(ans.budget.value),
        activation_bytes=s.Estimate(bytes=ans.activation.bytes, assumption=ans.activation.assumption),
        non_torch_bytes=s.Estimate(bytes=ans.non_torch.bytes, assumption=ans.non_torch.assumption),
        cuda_graph_bytes=s.Estimate(bytes=ans.graphs.bytes, assumption=ans.graphs.assumption),
        kv_cache_bytes=int(pool) if pool is not None else None,
        kv_tokens=ans.kv_tokens,
        max_model_len_fit=ans.longest,
        max_concurrency=ans.concurrency,
        checks=[_check(c) for c in ans.checks],
        verdict=verdict,
        fits={"fits": True, "does not fit": False}.get(verdict),
        reason=reason,
        why=why if verdict != "does not fit" or failed is None else f"{why}; {_shortfall(failed)}",
        remedies=fixes,
        assumptions=assumptions,
        notes=notes,
    )


def _replan(launch: Launch, flags: dict) -> str:
    """The verdict of the same launch with these flags changed (the remedies' last check)."""
    from msgspec.structs import replace

    from triage.plan.answer import answer
    from triage.plan.launch import build
    from triage.vllm_flags import parse

    tokens = [t for flag, value in flags.items() for t in ((flag, value) if value else (flag,))]
    changed = parse(tokens, replace(launch.flags, given=list(launch.flags.given), ignored=[]))
    new = build(launch.files, changed, launch.gpu, launch.version, launch.engine)
    return _verdict(new, answer(new))[0]


def _shortfall(c: Check) -> str:
    if c.verdict == FAILS and c.need is not None and c.have is not None and c.unit == "bytes":
        return f"needs {gib(c.need.value)}, has {gib(c.have.value)}"
    return c.what
