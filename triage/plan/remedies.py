"""The flags that make a launch fit: the memory model's solvers, each value verified before it is offered.

The same machinery as a failed log's remedies (`triage.memory.solve`): the failing check is
set as the launch's failure, each solver inverts vLLM's arithmetic in the worst case, and
`verify` re-runs every check under the proposed flags. When nothing fits, it says so plainly.
"""

from __future__ import annotations

from collections.abc import Callable

from msgspec.structs import replace

from triage.memory import Check, MemoryInputs, solve
from triage.plan.answer import Answer
from triage.plan.schema import PlanRemedy
from triage.plan.wording import describe
from triage.units import gib

Replan = Callable[[dict], str]  # flags -> the whole plan's verdict under them
UTIL_STEP, UTIL_TRIES = 0.01, 40


def _checked(inp: MemoryInputs, flags: dict[str, str]) -> str:
    v = solve.verify(inp, flags)
    return describe(v.target) if v.target is not None else ""


def _offer(inp: MemoryInputs, flags: dict[str, str], text: str) -> PlanRemedy:
    return PlanRemedy(text=text, flags=flags, checked=_checked(inp, flags))


def _kv(inp: MemoryInputs, out: list[PlanRemedy], longest: int | None, linear: bool) -> None:
    # the solver extrapolates the need linearly, exact for one kind of layer; windows and Mamba
    # states are not linear in the length, so there the memory model's own search answers
    n = solve.fit_len(inp) if linear else (longest or None)
    if n:
        out.append(
            _offer(
                inp,
                {"--max-model-len": str(n)},
                f"--max-model-len {n}: the longest length one request can have in this KV pool",
            )
        )
    u = solve.kv_util(inp)
    if u:
        flag = solve.num(u)
        out.append(
            _offer(
                inp,
                {"--gpu-memory-utilization": flag},
                f"--gpu-memory-utilization {flag}: the smallest budget whose pool holds max_model_len",
            )
        )
    if solve.fp8_alone(inp):
        out.append(_offer(inp, {"--kv-cache-dtype": solve.FP8}, "--kv-cache-dtype fp8: half the KV bytes per token"))
    else:
        n8 = solve.fp8_len(inp)
        if n8 and (not n or n8 > n):
            flags = {"--kv-cache-dtype": solve.FP8, "--max-model-len": str(n8)}
            out.append(_offer(inp, flags, f"--kv-cache-dtype fp8 with --max-model-len {n8}: fp8 alone is not enough"))


def _weights(inp: MemoryInputs, out: list[PlanRemedy]) -> None:
    tp = solve.load_tp(replace(inp, failure="weights_load"))
    if tp:
        out.append(
            _offer(
                replace(inp, failure="weights_load"),
                {"--tensor-parallel-size": str(tp)},
                f"--tensor-parallel-size {tp}: the weights split over {tp} GPUs",
            )
        )
    w = inp.weights
    room = inp.free if inp.free is not None else inp.total
    size = gib(w.value) if w is not None else "the weights"
    where = gib(room.value) if room is not None else "this GPU"
    out.append(
        PlanRemedy(
            text=f"no flag fits {size} of weights per GPU into {where}: use a quantized checkpoint "
            "(AWQ/GPTQ/FP8), more GPUs (--tensor-parallel-size), or a bigger GPU"
        )
    )


def _startup(inp: MemoryInputs, out: list[PlanRemedy], replan: Replan) -> None:
    u = solve.startup_util(inp)
    for _ in range(UTIL_TRIES if u else 0):  # the largest one that also leaves room for CUDA graphs
        if u <= UTIL_STEP or replan({"--gpu-memory-utilization": solve.num(u)}) == "fits":  # type: ignore[arg-type, operator]
            break
        u = round(u - UTIL_STEP, 2)  # type: ignore[operator]
    if u and u > UTIL_STEP:
        flag = solve.num(u)
        out.append(
            _offer(
                inp,
                {"--gpu-memory-utilization": flag},
                f"--gpu-memory-utilization {flag}: the largest budget the free memory passes",
            )
        )
    held = inp.total.value - inp.free.value if inp.total is not None and inp.free is not None else 0
    if held > 1 << 30:
        out.append(
            PlanRemedy(
                text=f"free the GPU: {gib(held)} is in use before vLLM starts (nvidia-smi; fuser -v /dev/nvidia*)"
            )
        )


def _graphs(inp: MemoryInputs, out: list[PlanRemedy]) -> None:
    out.append(
        PlanRemedy(
            text="--enforce-eager: no CUDA graphs, so nothing is needed outside the budget",
            flags={"--enforce-eager": ""},
        )
    )
    u = solve.outside_util(inp)
    if u:
        flag = solve.num(u)
        out.append(
            _offer(
                inp,
                {"--gpu-memory-utilization": flag},
                f"--gpu-memory-utilization {flag}: leaves room for the graphs outside the budget",
            )
        )


def remedies(ans: Answer, failed: Check, replan: Replan) -> list[PlanRemedy]:
    """Remedies for the first failing check, each verified by the memory model, then by re-planning."""
    inp = replace(ans.inputs, failure=failed.name)
    if failed.name == "outside_budget":
        inp = replace(inp, failure="cuda_graph_capture", oom_requested=failed.need, oom_free=failed.have)
    out: list[PlanRemedy] = []
    if failed.name == "startup_free_memory":
        _startup(inp, out, replan)
    elif failed.name == "weights_load" or (failed.name == "kv_pool_positive" and _weights_over_budget(ans)):
        _weights(inp, out)
    elif failed.name in ("kv_pool_positive", "kv_fits_max_model_len"):
        _kv(inp, out, ans.longest, ans.linear)
        if not out:
            _weights(inp, out)
    elif failed.name == "outside_budget":
        _graphs(inp, out)
    return [r for r in (_confirm(r, replan) for r in out) if r is not None]


def _confirm(remedy: PlanRemedy, replan: Replan) -> PlanRemedy | None:
    """Keep a flag remedy only when the whole plan under it does not fail; say when it is borderline."""
    if not remedy.flags:
        return remedy
    verdict = replan(remedy.flags)
    if verdict == "does not fit":
        return None
    if verdict != "fits":
        remedy.text += f" ({verdict}: the estimates decide)"
    return remedy


def _weights_over_budget(ans: Answer) -> bool:
    w = ans.inputs.weights
    return w is not None and w.lo >= ans.budget.hi
