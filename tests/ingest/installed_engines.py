"""The matcher engines installed here, for tests that hold every engine to the same lines."""

from __future__ import annotations

from triage.parse import vocabulary

ALL = ("hyperscan", "python")


def installed_engines() -> list[str]:
    """The engines of ALL that build on this machine (Hyperscan has wheels for Linux x86-64 only)."""
    out = []
    for name in ALL:
        try:
            vocabulary.matcher(name)
        except ImportError:
            continue
        out.append(name)
    return out
