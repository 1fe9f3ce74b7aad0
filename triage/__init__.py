"""vllm-triage: explain why a vLLM server failed to start.

The Python API (`triage.api`, documented there and in the README) is re-exported here:
`from triage import Triager`. It is imported on first use, so `import triage` stays cheap
for the command line."""

from __future__ import annotations

from typing import Any

from triage.version import __version__

__all__ = ["__version__"]

_API_NAMES = frozenset(
    {
        "API_VERSION",
        "SCHEMA_VERSION",
        "InputError",
        "Report",
        "Summary",
        "TriageError",
        "Triager",
        "error_record",
        "found_failure",
        "summarize",
        "to_dict",
        "triage",
    }
)


def __getattr__(name: str) -> Any:
    if name in _API_NAMES:
        from triage import api

        return getattr(api, name)
    raise AttributeError(f"module 'triage' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_API_NAMES})
