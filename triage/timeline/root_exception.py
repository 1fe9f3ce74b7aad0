"""The root exception of a failure, classified: its class, errno, the module that raised it,
and what its message says is missing.

When no sign of a known cause matches, these still decide a cause at lower confidence (the
fallback rules of `rules/root_exception.yaml`, and the `dependency_missing` pack): a
`PermissionError` on a cache directory, a connection error inside the hub client, a pydantic
`ValidationError` from vLLM's config classes, `No module named 'X'`. Python prints exceptions
in one well-defined shape (`module.Class: message`, `[Errno N] text: 'path'`), so this is
parsing, not guessing; rules read the fields, never the text.
"""

from __future__ import annotations

import re
from typing import Any

from triage.model import events as ev
from triage.patterns import LazyPattern
from triage.timeline.errno_about import about, errno_name
from triage.timeline.signals import Signal

# Exception classes that mean "the network is not there" whatever raised them.
CONNECTION_CLASSES = frozenset(
    {
        "ConnectionError",
        "ConnectionRefusedError",
        "ConnectionResetError",
        "ConnectionAbortedError",
        "MaxRetryError",
        "NewConnectionError",
        "ConnectTimeoutError",
        "ConnectTimeout",
        "ConnectError",
        "ProxyError",
        "SSLError",
        "ReadTimeout",
        "ReadTimeoutError",
        "NameResolutionError",
        "gaierror",
        "RemoteDisconnected",
        "ProtocolError",
        "LocalEntryNotFoundError",
        "OfflineModeIsEnabled",
    }
)
# A module name that is not the name to install (the common ones met at vLLM's start-up).
_DIST = {
    "cv2": "opencv-python",
    "PIL": "pillow",
    "yaml": "pyyaml",
    "sklearn": "scikit-learn",
    "google.protobuf": "protobuf",
    "attr": "attrs",
    "decord": "decord",
    "librosa": "librosa",
    "vllm_flash_attn": "vllm-flash-attn",
    "flashinfer": "flashinfer-python",
    "flash_attn": "flash-attn",
    "Crypto": "pycryptodome",
}

_WRAPPED = re.compile(r"^(?:[\w.]*\.)?RayTaskError\((?P<inner>[\w.]+)\)$")
_ERRNO = re.compile(r"\[Errno (-?\d{1,6})\]|\(os error (\d{1,6})\)|\(errno: (\d{1,6})")
_ERRNO_PATH = re.compile(r"\[Errno -?\d+\][^']*'(?P<path>[^'\n]+)'?")  # a cut paste may lose the closing quote
_NO_MODULE = re.compile(r"No module named '(?P<name>[\w.]+)'")
_PLEASE_INSTALL = re.compile(
    r"(?:[Pp]lease install|pip install|is not installed|are not installed|requires? the|not found\. Please)"
)
_PIP_LINE = re.compile(r"`?(?P<cmd>(?:uv )?pip3? install [^`\"'\n]+?)(?:`|\"|'|\.(?:\s|$)|$| to | for )")
_INSTALL_NAME = LazyPattern(
    r"[Pp]lease install (?:the )?`?(?P<name>[A-Za-z][\w.\-\[\]]*(?:[<>=!~]=?[\w.]+)?)`?"
    r"|`?(?P<name2>[A-Za-z][\w.\-]*)`? (?:is|are) not installed"
)
_TOOLKIT = re.compile(
    r"Could not find nvcc|nvcc[^\n]{0,40}not found|CUDA_HOME environment variable is not set"
    r"|cuda_home='[^']*' doesn't exist|Failed to find C compiler|No CUDA runtime is found"
    r"|No working C\+\+ compiler found"  # torch inductor's InvalidCxxCompiler
)
_PROGRAMS = ("ffmpeg", "ffprobe", "avconv", "numactl", "ninja", "git-lfs")
_PROGRAM_WORDS = re.compile(
    r"\b(?P<name>"
    + "|".join(re.escape(p) for p in _PROGRAMS)
    + r")\b[^\n]{0,40}\b(?:not (?:installed|found|available)|is required|missing)",
    re.I,
)
# A program met under another name: audioread tries ffmpeg, then libav's avconv, and names the last.
_PROGRAM_PACKAGES = {"avconv": "ffmpeg", "ffprobe": "ffmpeg"}
# A deadline a message states: "within 5 minutes", "Waited 600 seconds", "within 10000 ms".
_DEADLINE = re.compile(
    r"(?:within|[Ww]aited|after|timeout of) (?P<n>\d{1,9}(?:\.\d{1,6})?) ?"
    r"(?P<unit>minutes?|mins?|seconds?|secs?|s|ms)\b"
)
# Startup deadlines vLLM states when they run out (NCCL and collective timeouts are not these:
# they stay nccl_failure). Which one decides the remedy: the env var or the Ray cluster.
_TIMEOUTS = (
    (
        "engine_ready",
        re.compile(
            r"Timed out waiting for (?:new )?engine|VLLM_ENGINE_READY_TIMEOUT_S"
            r"|Timed out waiting for engines to send initial message"
        ),
    ),
    ("handshake", re.compile(r"Did not receive response from (?:the )?front-end process")),
    ("rpc", re.compile(r"didn't reply within|RPC [Ss]erver (?:did not|didn't) (?:reply|respond)|VLLM_RPC_TIMEOUT")),
    (
        "placement_group",
        re.compile(r"Cannot provide a placement group|[Pp]lacement group[^\n]{0,80}(?:timed out|not ready)"),
    ),
)
_COLLECTIVE = re.compile(r"NCCL|HCCL|[Ww]atchdog|collective|ProcessGroup")
_UNIT_S = {"m": 60.0, "s": 1.0, "ms": 0.001}
_STDLIB = LazyPattern(r"/lib/python3\.\d+/(?P<mod>[\w/]+)\.py$")
_PACKAGED = re.compile(r"(?:site|dist)-packages/(?P<mod>[\w/.]+?)\.py$")
_SOURCE_TREE = LazyPattern(r"(?:^|/)(?P<mod>vllm/[\w/]+)\.py$")


def exception_fields(signal: Signal) -> dict[str, Any]:
    """The fields a failure view carries about its root exception (None where the log lacks them)."""
    exc, tb = _root_exception(signal)
    if exc is None:
        return {}
    cls_path = _unwrap(exc.type)
    module = _module(tb.frames[-1].file) if tb is not None and tb.frames else None
    message = exc.message or ""
    errno = _errno(message)
    missing, kind, install = _missing(cls_path, message, module, errno)
    said = f"{message} {signal.exception.message if signal.exception else ''}"  # the root's and the wrapper's
    path = _path(message)
    return {
        "exception_class": cls_path.rsplit(".", 1)[-1],
        "exception_module": cls_path.rsplit(".", 1)[0] if "." in cls_path else None,
        "errno": errno,
        "module": module,
        "path": path,
        "errno_name": errno_name(message, errno),
        "about": about(path, _modules_inside_out(signal, tb), said),
        "missing": missing,
        "missing_kind": kind,
        "install": install,
        "deadline_s": _deadline(said),
        "timeout_kind": _timeout_kind(said),
    }


def _modules_inside_out(signal: Signal, tb: Any) -> list[str | None]:
    """The modules of the root traceback's frames, innermost first, then the rest of the chain's."""
    frames = list(reversed(tb.frames)) if tb is not None else []
    if signal.chain is not None:
        frames += [f for t in reversed(signal.chain.tracebacks) for f in reversed(t.frames)]
    return [_module(f.file) for f in frames]


def _timeout_kind(message: str) -> str | None:
    if _COLLECTIVE.search(message):
        return None
    return next((kind for kind, pattern in _TIMEOUTS if pattern.search(message)), None)


def _deadline(message: str) -> float | None:
    """The deadline, in seconds, a timeout message states (None when it states none)."""
    m = _DEADLINE.search(message)
    if m is None:
        return None
    unit = m.group("unit")
    scale = _UNIT_S["ms"] if unit == "ms" else _UNIT_S["m"] if unit.startswith("m") else _UNIT_S["s"]
    return round(float(m.group("n")) * scale, 3)


def _root_exception(signal: Signal) -> tuple[ev.ExceptionRaised | None, Any]:
    """The chain's first exception with its traceback (what a wrapper re-raised), else the signal's."""
    chain = signal.chain
    if chain is not None:
        for tb in chain.tracebacks:
            if tb.exception is not None:
                return tb.exception, tb
    return signal.exception, None


def _unwrap(type_: str) -> str:
    m = _WRAPPED.match(type_.strip())
    return m.group("inner") if m else type_.strip()


def _errno(message: str) -> int | None:
    m = _ERRNO.search(message)
    if m is None:
        return None
    return int(next(g for g in m.groups() if g is not None))


def _path(message: str) -> str | None:
    m = _ERRNO_PATH.search(message)
    return m.group("path") if m else None


def _module(file: str) -> str | None:
    """The dotted module of a frame's file: `huggingface_hub.file_download`, `subprocess`."""
    file = file.replace("\\", "/")
    for pattern in (_PACKAGED, _SOURCE_TREE, _STDLIB):
        m = pattern.search(file)
        if m:
            mod = m.group("mod").replace("/", ".")
            return mod[: -len(".__init__")] if mod.endswith(".__init__") else mod
    return None


def _missing(
    cls: str, message: str, module: str | None, errno: int | None
) -> tuple[str | None, str | None, str | None]:
    """What the message says is not installed: (name, 'module' | 'program' | 'toolkit', install line)."""
    pip = _PIP_LINE.search(message)
    install = pip.group("cmd").strip().rstrip(".") if pip else None
    named = _NO_MODULE.search(message)
    if named and cls.endswith(("ModuleNotFoundError", "ImportError")):
        name = named.group("name")
        if "." in name:  # Python names the first missing component: the package is there, its part is not
            return name, "submodule", None
        return name, "module", install or f"pip install {_DIST.get(name, name.replace('_', '-'))}"
    if _TOOLKIT.search(message):
        return (
            "nvcc" if "nvcc" in message or "CUDA" in message or "cuda" in message else "a C compiler",
            "toolkit",
            None,
        )
    program = _path(message) if errno == 2 else None
    # a bare name with no folder and no extension is a program (a file vLLM opens has either),
    # and subprocess raising it says so outright
    if program and "/" not in program and ("." not in program or (module or "").startswith("subprocess")):
        return _PROGRAM_PACKAGES.get(program, program), "program", None
    named = _PROGRAM_WORDS.search(message)
    if named:
        return named.group("name").lower(), "program", None
    if _PLEASE_INSTALL.search(message) and cls.endswith(
        ("ImportError", "ModuleNotFoundError", "ValueError", "RuntimeError", "AssertionError")
    ):
        name = _INSTALL_NAME.search(message)
        got = name and (name.group("name") or name.group("name2"))
        if got:
            return got, "module", install or f"pip install {got}"
        if install:
            return install.split()[-1], "module", install
    return None, None, None
