"""A plan as text: terminal (plain, aligned), markdown, or JSON. Renderers compute nothing."""

from __future__ import annotations

import json

from triage.plan.schema import PlanReport
from triage.units import gib

FORMATS = ("terminal", "json", "markdown")


def _rows(p: PlanReport) -> list[tuple[str, str]]:
    m, g, f = p.model, p.gpu, p.flags
    quant = f", {m.quantization}" if m.quantization else ""
    free = f", {gib(g.free_bytes)} free" if g.free_bytes is not None else ""
    rows = [
        ("model", f"{m.name} ({m.architecture}, {m.parameters / 1e9:.2f}B parameters, {m.dtype}{quant})"),
        ("GPU", f"{g.count} x {g.name}, {gib(g.total_bytes)} each{free}"),
        (
            "flags",
            f"TP {f.tensor_parallel_size}, PP {f.pipeline_parallel_size}, max_model_len {f.max_model_len:,}, "
            f"gpu_memory_utilization {f.gpu_memory_utilization:g}, kv_cache_dtype {f.kv_cache_dtype}",
        ),
        ("budget", f"{gib(p.budget_bytes)} (total x {f.gpu_memory_utilization:g})"),
        ("weights", f"{gib(p.weights_bytes_per_gpu)} per GPU ({p.weights_source})"),
        ("activation peak", f"{gib(p.activation_bytes.bytes)} (estimated)"),
        ("non-torch", f"{gib(p.non_torch_bytes.bytes)} (estimated)"),
        ("CUDA graphs", f"{gib(p.cuda_graph_bytes.bytes)} outside the budget (estimated)"),
        ("KV bytes/token", f"{p.kv_bytes_per_token:,} per GPU ({p.kv.family}: {p.kv.formula})"),
    ]
    if p.kv.state_bytes_per_sequence:
        rows.append(("state/sequence", f"{p.kv.state_bytes_per_sequence:,} B per GPU (Mamba layers)"))
    if p.kv_cache_bytes is not None and p.kv_cache_bytes <= 0:
        rows.append(("KV cache", f"none: the budget is {gib(-p.kv_cache_bytes)} short of the rest"))
    elif p.kv_cache_bytes is not None:
        tokens = f" -> {p.kv_tokens:,} tokens" if p.kv_tokens is not None else ""
        rows.append(("KV cache", f"{gib(p.kv_cache_bytes)}{tokens}"))
    if p.max_model_len_fit:
        rows.append(("longest fit", f"--max-model-len {p.max_model_len_fit:,} (one request, worst case)"))
    if p.max_concurrency:
        rows.append(("concurrency", f"{p.max_concurrency:.2f}x requests of {f.max_model_len:,} tokens"))
    return rows


def _headline(p: PlanReport) -> str:
    reason = f" [{p.reason}]" if p.reason else ""
    return f"{p.verdict.upper()}{reason}: {p.why}"


def terminal(p: PlanReport) -> str:
    rows = _rows(p)
    width = max(len(k) for k, _ in rows)
    out = [f"vllm-triage plan: {_headline(p)}", ""]
    out += [f"  {k.ljust(width)}  {v}" for k, v in rows]
    out += ["", "Checks (vLLM's, through the memory model):"]
    out += [f"  [{c.verdict}] {c.text}" for c in p.checks]
    if p.remedies:
        out += ["", "To make it fit:" if p.verdict != "borderline" else "To make it fit for sure:"]
        out += [f"  - {r.text}" + (f"\n      checked: {r.checked}" if r.checked else "") for r in p.remedies]
    out += ["", "Assumptions:"] + [f"  - {a}" for a in p.assumptions]
    if p.notes:
        out += ["", "Notes:"] + [f"  - {n}" for n in p.notes]
    return "\n".join(out) + "\n"


def markdown(p: PlanReport) -> str:
    out = [
        f"## vllm-triage plan: {p.verdict}" + (f" (`{p.reason}`)" if p.reason else ""),
        "",
        p.why,
        "",
        "| | |",
        "|---|---|",
    ]
    out += [f"| {k} | {v.replace('|', '/')} |" for k, v in _rows(p)]
    out += ["", "**Checks**", ""] + [f"- **{c.verdict}**: {c.text}" for c in p.checks]
    if p.remedies:
        out += ["", "**To make it fit**", ""]
        out += [f"- {r.text}" + (f" (checked: {r.checked})" if r.checked else "") for r in p.remedies]
    out += ["", "<details><summary>Assumptions</summary>", ""] + [f"- {a}" for a in p.assumptions]
    out += ["", "</details>"]
    if p.notes:
        out += ["", "**Notes**", ""] + [f"- {n}" for n in p.notes]
    return "\n".join(out) + "\n"


def render(p: PlanReport, fmt: str) -> str:
    """Every string is redacted and made safe to print first: a pasted command line can carry
    --api-key or a token, a config's model name escape sequences."""
    from triage.diagnose.redaction import ON
    from triage.render.sanitise import clean_data

    data = clean_data(ON.data(p.model_dump(mode="json")))  # a model name from a config is input too
    if fmt == "json":
        return json.dumps(data, indent=2) + "\n"
    p = PlanReport.model_validate(data)
    return markdown(p) if fmt == "markdown" else terminal(p)
