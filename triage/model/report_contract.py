"""The report's contract as pydantic reads it: validation and the JSON Schema.

The report's parts (`report.py`) are msgspec Structs, which pydantic does not know. Here each
one is mirrored, field for field (name, type, default, docstring), by a stdlib dataclass that
pydantic validates (`extra="forbid"`) and describes; a validated report is handed back as the
Structs. Made from the Structs on first use, so the two cannot drift, and imported only where
the contract is checked (reading a report back, `vllm-triage schema`, the OpenAPI document):
a plain run loads neither this module nor pydantic.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import typing
from functools import cache
from typing import Any

import msgspec
from pydantic import TypeAdapter


@cache
def _mirrors(base: type) -> dict[type, type]:
    """Struct class -> its dataclass, for every part of the report (the subclasses of `base`,
    their common base), each part's parts mirrored before it."""
    subclasses: list[type] = base.__subclasses__()
    parts = {part.__name__: part for part in subclasses}
    made: dict[type, type] = {}

    def make(cls: type) -> None:
        if cls not in made:
            written = " ".join(map(str, inspect.get_annotations(cls).values()))
            for name in re.findall(r"\w+", written):
                if name in parts and parts[name] is not cls:
                    make(parts[name])
            made[cls] = _mirror(cls, {c.__name__: m for c, m in made.items()})

    for part in parts.values():
        make(part)
    return made


def _mirror(cls: type, mirrored: dict[str, type]) -> type:
    """The dataclass pydantic reads for `cls`: its annotations resolved with the parts' names
    meaning their mirrors."""
    types = typing.get_type_hints(cls, localns=mirrored)
    specs = []
    for f in msgspec.structs.fields(cls):
        if f.default_factory is not msgspec.NODEFAULT:
            spec = dataclasses.field(default_factory=f.default_factory)
        elif f.default is not msgspec.NODEFAULT:
            spec = dataclasses.field(default=f.default)
        else:
            spec = dataclasses.field()
        specs.append((f.name, types[f.name], spec))
    namespace = {"__doc__": cls.__doc__, "__module__": cls.__module__, "__pydantic_config__": {"extra": "forbid"}}
    return dataclasses.make_dataclass(cls.__name__, specs, kw_only=True, namespace=namespace)


@cache
def adapter(cls: type) -> TypeAdapter[Any]:
    """pydantic's validator and schema for a part of the report."""
    return TypeAdapter(_mirrors(cls.__bases__[0])[cls])


def validate(cls: type, data: Any, json: bool) -> Any:
    """`data` (Python data or JSON text) checked as a `cls`, returned as one (pydantic's
    ValidationError for a wrong type or an unknown key)."""
    if isinstance(data, msgspec.Struct):
        data = data.model_dump()  # type: ignore[attr-defined]  # a part of the report
    checked = adapter(cls).validate_json(data) if json else adapter(cls).validate_python(data)
    return _as_struct(checked, {m: c for c, m in _mirrors(cls.__bases__[0]).items()})


def _as_struct(value: Any, structs: dict[type, type]) -> Any:
    """A validated mirror instance (and what it holds) as the report's Structs."""
    cls = structs.get(type(value))
    if cls is not None:
        return cls(**{f.name: _as_struct(getattr(value, f.name), structs) for f in dataclasses.fields(value)})
    if isinstance(value, list):
        return [_as_struct(v, structs) for v in value]
    if isinstance(value, dict):
        return {k: _as_struct(v, structs) for k, v in value.items()}
    return value
