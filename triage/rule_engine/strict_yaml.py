"""The hardened YAML loader for rule packs (imported only when a pack is actually read)."""

from __future__ import annotations

import yaml

MAX_YAML_DEPTH = 40  # a rule nests 5 levels; `[[[[...` 5000 deep would exhaust the composer's recursion


class LineDict(dict):
    """A mapping that remembers the pack line it starts on and the line of each key, so load
    problems can point at the rule and at the field."""

    line: int = 0
    key_lines: dict = {}  # key -> line; set per instance by the loader


class LineList(list):
    """A sequence that remembers the line it starts on and the line of each item."""

    line: int = 0
    item_lines: list = []  # set per instance by the loader


def line_of(node: object, path: tuple) -> int:
    """The line of `path` (keys and indexes) inside a loaded document: the deepest step whose line
    the loader kept (a scalar's own line is its key's or its item's)."""
    line = getattr(node, "line", 0)
    for step in path:
        if isinstance(node, LineDict) and not isinstance(step, int) and step in node:
            line, node = node.key_lines.get(step, line), node[step]
        elif isinstance(node, LineList) and isinstance(step, int) and 0 <= step < len(node):
            line, node = node.item_lines[step], node[step]
        else:
            break
    return line


class StrictLoader(yaml.SafeLoader):
    """SafeLoader minus aliases, plus duplicate-key refusal, a nesting limit and line numbers on mappings."""

    _depth = 0

    def compose_node(self, parent, index):  # type: ignore[override]
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.MarkedYAMLError(
                "while composing", None, "aliases (*name) are not allowed in rule packs", event.start_mark
            )
        if self._depth >= MAX_YAML_DEPTH:
            raise yaml.MarkedYAMLError(
                "while composing", None, f"nested more than {MAX_YAML_DEPTH} levels deep", self.peek_event().start_mark
            )
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node, deep=False):  # type: ignore[override]
        seen: dict = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, (dict, list, set)):
                raise yaml.MarkedYAMLError(
                    "while constructing a mapping",
                    node.start_mark,
                    "a key must be a plain value, not a list or mapping",
                    key_node.start_mark,
                )
            if key in seen:
                raise yaml.MarkedYAMLError(
                    "while constructing a mapping", node.start_mark, f"duplicate key {key!r}", key_node.start_mark
                )
            seen[key] = key_node.start_mark.line + 1
        mapping = LineDict(super().construct_mapping(node, deep=True))
        mapping.line = node.start_mark.line + 1
        mapping.key_lines = seen
        return mapping


def _construct_map(loader, node):
    """The mapping itself (SafeLoader's builds a plain dict and copies into it, losing the line)."""
    return loader.construct_mapping(node, deep=True)


def _construct_seq(loader, node):
    """The sequence with its lines (SafeLoader's fills a plain list after the fact)."""
    seq = LineList(loader.construct_sequence(node, deep=True))
    seq.line = node.start_mark.line + 1
    seq.item_lines = [item.start_mark.line + 1 for item in node.value]
    return seq


def _refuse_tag(loader, tag_suffix, node):  # pragma: no cover - exercised through the loader
    raise yaml.MarkedYAMLError(None, None, f"YAML tag {node.tag!r} is not allowed in rule packs", node.start_mark)


StrictLoader.add_constructor("tag:yaml.org,2002:map", _construct_map)
StrictLoader.add_constructor("tag:yaml.org,2002:seq", _construct_seq)
StrictLoader.add_multi_constructor("!", _refuse_tag)
StrictLoader.add_multi_constructor("tag:yaml.org,2002:python/", _refuse_tag)
