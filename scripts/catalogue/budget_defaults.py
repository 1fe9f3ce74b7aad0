"""vLLM's defaults that move the startup memory budget, per release and per kind of GPU, read from vLLM's own sources.

Maintainer tooling, never run by users or tests.  Stage 1 is ``fetch.py`` (each release's ``.py``
sources, the wheel deleted at once).  This stage reads, with ``ast``:

- ``max_num_batched_tokens`` and ``max_num_seqs`` as ``vllm serve`` defaults them (the
  ``UsageContext.OPENAI_API_SERVER`` entry): the function of ``vllm/engine/arg_utils.py`` that
  assigns the ``default_max_num_batched_tokens`` dicts (``_override_v1_engine_args`` 0.6-0.7,
  ``_set_default_args_v1`` 0.8-0.10, ``get_batch_defaults`` 0.11+).  Those dicts sit under
  ``if`` tests on the device (total memory, name, compute capability, TPU/CPU), so the function
  body is walked with each device of ``DEVICES`` standing in for ``current_platform``: a test
  that reads anything else (``self``, the usage context) is skipped, branch and all.
- ``cudagraph_memory_in_budget``: the default of ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS``
  in ``vllm/envs.py`` (1: the CUDA graphs' estimated memory is taken out of
  ``gpu_memory_utilization``'s budget before the KV cache; 0 or no such variable: it is not).

The result is written to triage/memory/vllm_defaults.txt, one value a line with its provenance.

    python scripts/catalogue/fetch.py --cache /tmp/catsrc      # network, once
    python scripts/catalogue/budget_defaults.py --cache /tmp/catsrc
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path
from typing import Any

from fetch import VLLM_RELEASES, fetch

HERE = Path(__file__).resolve().parent
OUT = HERE.parent.parent / "triage" / "memory" / "vllm_defaults.txt"
GiB = 1 << 30
ARG_UTILS = "vllm/engine/arg_utils.py"
ENVS = "vllm/envs.py"
GRAPH_ENV = "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS"
# The GPUs the device tests tell apart: total memory as CUDA reports it (GiB), the name as
# vLLM lowercases it, the compute capability. One of each side of every test vLLM has made.
DEVICES: dict[str, tuple[float, str, tuple[int, int]]] = {
    "under-70gib": (23.6, "nvidia geforce rtx 4090", (8, 9)),
    "a100-80gb": (79.3, "nvidia a100-sxm4-80gb", (8, 0)),
    "h100-80gb": (79.2, "nvidia h100 80gb hbm3", (9, 0)),
    "h200": (139.8, "nvidia h200", (9, 0)),
    "gb10": (119.7, "nvidia gb10", (12, 1)),
    "b200": (178.4, "nvidia b200", (10, 0)),
}
SERVE = "OPENAI_API_SERVER"
NAMES = {"default_max_num_batched_tokens": "max_num_batched_tokens", "default_max_num_seqs": "max_num_seqs"}


class Unknown(Exception):
    """An expression that reads something other than the device."""


class Walk:
    """Runs a defaults function's body with one device standing in for `current_platform`."""

    def __init__(self, device: tuple[float, str, tuple[int, int]]) -> None:
        self.total, self.name, self.cc = device
        self.env: dict[str, Any] = {"GiB_bytes": GiB}

    def call(self, node: ast.Call) -> Any:
        f = node.func
        if not isinstance(f, ast.Attribute):
            if isinstance(f, ast.Name) and f.id == "min" and node.args:
                return min(self.eval(a) for a in node.args)
            raise Unknown(ast.unparse(node))
        if f.attr == "lower":
            return str(self.eval(f.value)).lower()
        if not (isinstance(f.value, ast.Name) and f.value.id == "current_platform"):
            raise Unknown(ast.unparse(node))
        if f.attr == "get_device_total_memory":
            return int(self.total * GiB)
        if f.attr == "get_device_name":
            return self.name.upper()
        if f.attr in ("is_device_capability", "has_device_capability"):
            want = tuple(self.eval(node.args[0]))
            return self.cc == want if f.attr == "is_device_capability" else self.cc >= want
        if f.attr == "is_cuda" or f.attr == "is_cuda_alike":
            return True
        if f.attr.startswith("is_"):  # is_tpu, is_cpu, is_rocm, is_xpu, ...: a CUDA GPU is none of them
            return False
        raise Unknown(ast.unparse(node))

    def eval(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in self.env:
                return self.env[node.id]
            raise Unknown(node.id)
        if isinstance(node, ast.Tuple):
            return tuple(self.eval(e) for e in node.elts)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "UsageContext":
            return node.attr
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return not self.eval(node.operand)
        if isinstance(node, ast.BoolOp):
            values = [self.eval(v) for v in node.values]
            return all(values) if isinstance(node.op, ast.And) else any(values)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            return self.eval(node.left) * self.eval(node.right)
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            a, b, op = self.eval(node.left), self.eval(node.comparators[0]), node.ops[0]
            table = {ast.GtE: a >= b, ast.Gt: a > b, ast.Lt: a < b, ast.LtE: a <= b, ast.Eq: a == b}
            if isinstance(op, (ast.In, ast.NotIn)):
                return (a in b) == isinstance(op, ast.In)
            if type(op) in table:
                return table[type(op)]
        if isinstance(node, ast.Dict):
            return {self.eval(k): self.eval(v) for k, v in zip(node.keys, node.values, strict=True) if k is not None}
        raise Unknown(ast.unparse(node))

    def run(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            if isinstance(stmt, ast.Try):
                self.run(stmt.body)
            elif isinstance(stmt, ast.ImportFrom):
                continue
            elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                try:
                    self.env[stmt.targets[0].id] = self.eval(stmt.value)
                except Unknown:
                    self.env.pop(stmt.targets[0].id, None)
            elif isinstance(stmt, ast.If):
                try:
                    taken = bool(self.eval(stmt.test))
                except Unknown:
                    continue  # a test on the arguments, not the device: not a default
                self.run(stmt.body if taken else stmt.orelse)


def defaults_function(tree: ast.Module) -> tuple[str, ast.FunctionDef] | None:
    """The method that assigns the default dicts: (Class.method, node)."""
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        for fn in (n for n in cls.body if isinstance(n, ast.FunctionDef)):
            for node in ast.walk(fn):
                if (
                    isinstance(node, ast.Assign)
                    and isinstance(node.targets[0], ast.Name)
                    and node.targets[0].id == "default_max_num_batched_tokens"
                    and isinstance(node.value, ast.Dict)
                ):
                    return f"{cls.name}.{fn.name}", fn
    return None


def batch_defaults(root: Path) -> list[tuple[str, str, str, str]]:
    """(setting, device, value, source) for the serve defaults of one release."""
    found = defaults_function(ast.parse((root / ARG_UTILS).read_text(encoding="utf-8")))
    if found is None:
        return []
    where, fn = found
    rows = []
    for device, spec in DEVICES.items():
        walk = Walk(spec)
        walk.run(fn.body)
        for var, setting in NAMES.items():
            value = walk.env.get(var)
            if isinstance(value, dict):
                value = value.get(SERVE)
            if isinstance(value, int):
                rows.append((setting, device, str(value), f"{ARG_UTILS}:{where}"))
    return rows


def graph_default(root: Path) -> tuple[str, str, str, str]:
    """Whether the CUDA graphs' estimate is inside the budget by default (the env variable's default)."""
    for node in ast.walk(ast.parse((root / ENVS).read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Dict):
            continue
        for key, value in zip(node.keys, node.values, strict=True):
            if isinstance(key, ast.Constant) and key.value == GRAPH_ENV:
                for call in ast.walk(value):
                    if (
                        isinstance(call, ast.Call)
                        and isinstance(call.func, ast.Attribute)
                        and call.func.attr == "getenv"
                        and len(call.args) == 2
                        and isinstance(call.args[1], ast.Constant)
                    ):
                        return (
                            "cudagraph_memory_in_budget",
                            "any",
                            str(int(call.args[1].value)),
                            f"{ENVS}:{GRAPH_ENV}",
                        )
    return ("cudagraph_memory_in_budget", "any", "0", f"{ENVS}:no-{GRAPH_ENV}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", type=Path, required=True, help="the fetch.py cache (fetched if missing)")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    lines = []
    for version in VLLM_RELEASES:
        root = fetch("vllm", version, args.cache)
        rows = batch_defaults(root) + [graph_default(root)]
        if len(rows) < 2:
            print(f"{version}: no batch defaults found", file=sys.stderr)
        lines += [f"{version} {' '.join(row)}" for row in rows]
    devices = " ".join(f"{k}={t}GiB,{n.replace(' ', '_')},{a}.{b}" for k, (t, n, (a, b)) in DEVICES.items())
    header = [
        "# vLLM's defaults that move the startup memory budget, for `vllm serve` on a CUDA GPU, one a line:",
        "# RELEASE SETTING DEVICE VALUE SOURCE (file:Class.method or file:VARIABLE).",
        "# Generated by scripts/catalogue/budget_defaults.py from vLLM's own sources (read with ast);",
        "# do not edit by hand.",
        f"# Releases read: {' '.join(VLLM_RELEASES)}.",
        f"# Devices (total memory as CUDA reports it, name, compute capability): {devices}.",
        "# cudagraph_memory_in_budget: 1 where the CUDA graphs' estimate is taken out of the budget by default.",
    ]
    args.out.write_text("\n".join(header + lines) + "\n", encoding="utf-8")
    print(f"{len(lines)} values -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
