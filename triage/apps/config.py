"""The project's settings: `[tool.vllm-triage]` in pyproject.toml or a `.vllm-triage.toml`,
found upward from the working directory, as ruff and mypy find theirs.

In each folder from the working directory up to the root, `.vllm-triage.toml` (its keys at
the top level) is read if present, else a pyproject.toml that has a `[tool.vllm-triage]`
table; the first found is the only one used. The command line wins over it, and so does
$VLLM_TRIAGE_FORMAT. Keys:

    format = "markdown"            # the report format when no --format is given
    rules = ["ci/vllm-rules"]      # extra rule packs, relative to the file's folder
    ignore = ["foreign_gpu_processes"]  # causes never reported
    min-confidence = 0.5           # diagnoses below it are not reported

An unknown key, a wrong type or an unknown cause is a usage error naming the file, so a
typo never silently does nothing.
"""

from __future__ import annotations

import os
import re
import sys
from typing import TYPE_CHECKING, Any

from msgspec import Struct, field

from triage.errors import UsageError
from triage.patterns import LazyPattern

if TYPE_CHECKING:
    from pathlib import Path  # imported at run time only where a settings file exists (start-up)

NAMES = (".vllm-triage.toml", "pyproject.toml")
# The lines that can open the `tool.vllm-triage` table in a pyproject.toml, however TOML lets it
# be written: its header (spaced, quoted), a bare `[tool]` table, a top-level `tool` key (dotted
# or an inline table). A pyproject.toml with none of them (one that names vllm-triage as its own
# name, a dependency or a script) is passed over without the TOML parser (~5 ms of a run).
_TOOL_LINES = LazyPattern(
    r"""^[ \t]*(?:\[[ \t]*["']?tool["']?[ \t]*(?:\]|\.[ \t]*["']?vllm-triage)|["']?tool["']?[ \t]*[.=])""",
    re.MULTILINE,
)
KEYS = ("format", "rules", "ignore", "min-confidence")


class Config(Struct, kw_only=True):
    """The settings read from one file (all empty: no file)."""

    path: Path | None = None
    formats: list[str] = field(default_factory=list)
    rules: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    min_confidence: float | None = None


def _toml():
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - 3.10
        import tomli as tomllib
    return tomllib


def _table(path: str | Path) -> dict[str, Any] | None:
    """The settings table of one file (None: a pyproject.toml without one)."""
    try:
        with open(path, encoding="utf-8") as file:
            text = file.read()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML: {exc}") from None
    is_pyproject = os.path.basename(path) == "pyproject.toml"
    if is_pyproject and ("vllm-triage" not in text or not _TOOL_LINES.search(text)):
        return None  # most projects' pyproject.toml: no TOML parser needed to say so
    toml = _toml()
    try:
        data = toml.loads(text)
    except toml.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML: {exc}") from None
    tool = data.get("tool")
    if is_pyproject or (isinstance(tool, dict) and "vllm-triage" in tool):
        table = tool.get("vllm-triage") if isinstance(tool, dict) else None
        if table is not None and not isinstance(table, dict):
            raise UsageError(f"{path}: [tool.vllm-triage] must be a table")
        return table
    return data


def find(start: Path | None = None) -> tuple[Path, dict[str, Any]] | None:
    """The first settings file upward from `start` (the working directory) and its table.

    Walked with os.path: a plain run with no settings file never imports pathlib."""
    here = os.path.realpath(str(start) if start is not None else os.getcwd())
    while True:
        for name in NAMES:
            candidate = os.path.join(here, name)
            if os.path.isfile(candidate):
                table = _table(candidate)
                if table is not None:
                    from pathlib import Path

                    return Path(candidate), table
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def load(explicit: str | None = None, start: Path | None = None) -> Config:
    """The settings: from `explicit` (--config FILE) or found upward; none found is no settings."""
    if explicit is not None:
        from pathlib import Path

        path = Path(explicit)
        if not path.is_file():
            raise UsageError(f"--config {explicit}: no such file")
        table = _table(path)
        if table is None:
            raise UsageError(f"--config {explicit}: no [tool.vllm-triage] table in it")
        found: tuple[Path, dict[str, Any]] | None = (path, table)
    else:
        found = find(start)
    return Config() if found is None else parse(*found)


def parse(path: Path, table: dict[str, Any]) -> Config:
    """Check every key of one table and turn it into a Config."""
    from triage.render import FORMATS

    for key in table:
        if key not in KEYS:
            import difflib  # only to suggest a key for a wrong one

            near = difflib.get_close_matches(str(key), KEYS, n=1)
            hint = f" (did you mean {near[0]}?)" if near else f"; known: {', '.join(KEYS)}"
            raise UsageError(f"{path}: unknown key {key!r}{hint}")
    config = Config(path=path)
    if "format" in table and not isinstance(table["format"], str):
        raise UsageError(f'{path}: format must be one format name, e.g. "markdown"')
    config.formats = _strings(path, table, "format")
    for fmt in config.formats:
        if fmt not in FORMATS:
            raise UsageError(f"{path}: format {fmt!r} is not one of: {', '.join(FORMATS)}")
    config.rules = [str(path.parent / r) for r in _strings(path, table, "rules")]
    config.ignore = check_causes(_strings(path, table, "ignore"), f"{path}: ignore")
    if "min-confidence" in table:
        config.min_confidence = confidence(table["min-confidence"], f"{path}: min-confidence")
    return config


def _strings(path: Path, table: dict[str, Any], key: str) -> list[str]:
    value = table.get(key, [])
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise UsageError(f"{path}: {key} must be a string or a list of strings")
    return values


def confidence(value: Any, where: str) -> float:
    """A confidence floor: a number from 0 to 1."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise UsageError(f"{where}: {value!r} is not a number from 0 to 1") from None
    if isinstance(value, bool) or not 0 <= number <= 1:
        raise UsageError(f"{where}: {value!r} is not a number from 0 to 1")
    return number


def check_causes(causes: list[str], where: str) -> list[str]:
    """Cause ids split on commas, each one in the taxonomy (a typo is refused, with the nearest).

    No causes given (a plain run): the taxonomy is not read."""
    out = [c.strip() for item in causes for c in item.split(",") if c.strip()]
    if not out:
        return out
    from triage.rule_engine.load import load_taxonomy

    known = set(load_taxonomy())
    for cause in out:
        if cause not in known:
            import difflib  # only to suggest a cause for an unknown one

            near = difflib.get_close_matches(cause, sorted(known), n=1, cutoff=0.6)
            hint = f" (did you mean {near[0]}?)" if near else "; `vllm-triage explain` lists the causes"
            raise UsageError(f"{where}: unknown cause {cause!r}{hint}")
    return out


def from_env() -> bool:
    """Whether settings files are read at all ($VLLM_TRIAGE_NO_CONFIG unset or empty)."""
    return not os.environ.get("VLLM_TRIAGE_NO_CONFIG")
