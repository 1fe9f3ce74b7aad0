"""A model of vLLM's GPU memory arithmetic: the one copy the rule packs, `what-if` and `plan` use.

See README.md beside this file for the API. In short::

    from triage.memory import MemoryInputs, Config, Quantity, evaluate, verify
    inp = MemoryInputs(engine="v1", total=Quantity.printed_bytes(80 * GiB), ...)
    for check in evaluate(inp, Config(gpu_memory_utilization=0.85)):
        print(check.name, check.verdict, check.margin, check.describe())

No rule-pack logic lives here: the package knows vLLM's checks, not causes or remedies' wording.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# name -> the module that defines it. Imported on first use (PEP 562), so that importing one
# submodule (`triage.memory.inputs`) or a run that never asks the model a question does not
# load the whole model (~10 ms of start-up).
_WHERE = {
    **dict.fromkeys(("FAILS", "FITS", "UNKNOWN", "Check", "compare", "overall"), "checks"),
    **dict.fromkeys(
        (
            "GRAPHS",
            "HOST_SWAP",
            "KERNEL_WARMUP",
            "KV_FIT",
            "LOAD",
            "NO_POOL",
            "OUTSIDE",
            "PROFILE",
            "SAMPLER_WARMUP",
            "STARTUP",
            "Config",
            "MemoryInputs",
        ),
        "inputs",
    ),
    **dict.fromkeys(("evaluate", "resolve"), "model"),
    **dict.fromkeys(("DEFAULT", "DERIVED", "ESTIMATED", "GIVEN", "PRINTED", "Quantity"), "quantities"),
    **dict.fromkeys(("Verification", "verify"), "solve"),
}

if TYPE_CHECKING:
    from triage.memory.checks import FAILS, FITS, UNKNOWN, Check, compare, overall
    from triage.memory.inputs import (
        GRAPHS,
        HOST_SWAP,
        KERNEL_WARMUP,
        KV_FIT,
        LOAD,
        NO_POOL,
        OUTSIDE,
        PROFILE,
        SAMPLER_WARMUP,
        STARTUP,
        Config,
        MemoryInputs,
    )
    from triage.memory.model import evaluate, resolve
    from triage.memory.quantities import DEFAULT, DERIVED, ESTIMATED, GIVEN, PRINTED, Quantity
    from triage.memory.solve import Verification, verify


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    globals()[name] = value
    return value


__all__ = [
    "DEFAULT",
    "DERIVED",
    "ESTIMATED",
    "FAILS",
    "FITS",
    "GIVEN",
    "GRAPHS",
    "HOST_SWAP",
    "KERNEL_WARMUP",
    "KV_FIT",
    "LOAD",
    "NO_POOL",
    "OUTSIDE",
    "PRINTED",
    "PROFILE",
    "SAMPLER_WARMUP",
    "STARTUP",
    "UNKNOWN",
    "Check",
    "Config",
    "MemoryInputs",
    "Quantity",
    "Verification",
    "compare",
    "evaluate",
    "overall",
    "resolve",
    "verify",
]
