"""Which package a traceback frame belongs to, and which of those are vLLM's companions.

A companion is a package that vLLM loads but does not ship: its kernel libraries
(flash-attn, flashinfer, xformers, triton), platform plugins (vllm-ascend and the other
`vllm_<name>` plugins by their naming convention) and the accelerator stacks they wrap.
A TypeError or AttributeError raised across the seam between vLLM and a companion means
the two were built for different versions (taxonomy v2: package_version_mismatch).
"""

from __future__ import annotations

import re

from triage.patterns import LazyPattern

COMPANIONS = frozenset(
    {
        "flash_attn",
        "flashinfer",
        "xformers",
        "triton",
        "vllm_flash_attn",
        "mindie_turbo",
        "torch_npu",
        "intel_extension_for_pytorch",
        "lmcache",
        "deep_gemm",
        "tpu_inference",
        "habana_frameworks",
        "optimum",
    }
)
_PLUGIN = LazyPattern(r"^vllm_\w+$")
_SITE = re.compile(r"(?:site|dist)-packages/([A-Za-z_]\w*)")


def frame_package(path: str) -> str | None:
    """The top-level package of a frame's file: the folder after site-/dist-packages, else the
    innermost folder named like a companion or a vLLM plugin (a source checkout)."""
    m = _SITE.search(path)
    if m:
        return m.group(1)
    for part in reversed(path.split("/")[:-1]):
        if part in COMPANIONS or _PLUGIN.match(part) or part == "vllm":
            return part
    return None


def companions(paths: list[str]) -> list[str]:
    """Companion packages among the frames, in the order first seen."""
    out: list[str] = []
    for path in paths:
        pkg = frame_package(path)
        if pkg and pkg != "vllm" and (pkg in COMPANIONS or _PLUGIN.match(pkg)) and pkg not in out:
            out.append(pkg)
    return out
