"""A family whose event fields are its terminals needs no transformer method.

When a start rule of the grammar has no method in the transformer and its name is an event's
`kind`, the event is read off the tree: each terminal whose name is a field's, upper-cased
(`PATH` -> `path`, `COUNT` -> `count`), fills that field, typed by the field's annotation
(a whole number, a decimal, a size in bytes from `SIZE`-like text, a flag, a string). A family
whose text needs interpreting (units in the tail, a choice between wordings) keeps a method.
"""

from __future__ import annotations

import inspect
from functools import cache
from typing import Any

from triage.model.events.base import KINDS
from triage.parse.grammar import START_RULES
from triage.parse.lark_runtime import Token, Tree
from triage.parse.transform_common import num, whole
from triage.units import parse_size


def fields_from_terminals(kind: str, children: list[Any]) -> dict[str, Any] | None:
    """The event fields of a start rule `kind` read off its terminals; None if no event has that kind."""
    cls = KINDS.get(kind)
    if cls is None:
        return None
    types = _field_types(cls)
    item: dict[str, Any] = {"kind": kind}
    for token in children:
        if not isinstance(token, Token):
            continue
        name = token.type.lower()
        if name in types and name not in item:
            value = _typed(str(token), types[name])
            if value is not None:
                item[name] = value
    return item


@cache
def _field_types(cls: type) -> dict[str, str]:
    """Field name -> its annotation, as written (a string: the event modules defer annotations)."""
    written: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        written.update(inspect.get_annotations(klass))
    return {name: str(written[name]) for name in cls.__struct_fields__}  # type: ignore[attr-defined]


def _typed(text: str, annotation: str) -> Any:
    """The token's text as the field's annotation asks (annotations are strings here)."""
    if annotation.startswith("bool"):
        return True
    if annotation.startswith("int"):
        stripped = text.replace(",", "")
        if stripped.isdigit():
            return whole(stripped)
        try:
            return parse_size(text)
        except ValueError:
            return None  # not a figure: the field keeps its default
    if annotation.startswith("float"):
        try:
            return num(text)
        except ValueError:
            return None
    return text


class DefaultEvents:
    """The transformer's fallback for start rules that have no method of their own."""

    def __default__(self, data: str, children: list[Any], meta: Any) -> Any:
        if data in START_RULES:
            item = fields_from_terminals(str(data), children)
            if item is not None:
                return item
        return Tree(data, children, meta)
