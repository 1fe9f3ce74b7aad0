"""The built log parser, pickled whole: a start loads lark's objects instead of rebuilding them.

lark caches a grammar's tables as plain data and rebuilds its objects from that data on
every start (for vllm_log.lark, ~700 parser states and ~200 lexers: ~9 ms, a tenth of a small
log's run). A pickle of the objects themselves loads in about half that. What a pickle cannot
hold is left out and made again by lark: the tree-building callbacks (`_prepare_callbacks`,
what lark's own loading calls). The `re` module and lark's two parser actions (compared by
identity) travel as names. Anything else a pickle cannot hold (a later lark keeping a
function somewhere new) makes the snapshot refuse to be written: lark's own cache is then
used, as before. A snapshot is named by the grammar's content, lark's and Python's versions.
"""

from __future__ import annotations

import importlib
import os
import pickle
import sys
import types
from typing import Any

import lark
from lark import Lark
from lark.parsers import lalr_analysis

_ACTIONS = {"Shift": lalr_analysis.Shift, "Reduce": lalr_analysis.Reduce}
_MODULES = ("re", "regex")  # what lark's lexers hold as `re`


class _Pickler(pickle.Pickler):
    def persistent_id(self, obj: Any) -> Any:
        if isinstance(obj, types.ModuleType):
            return ("module", obj.__name__)
        for name, action in _ACTIONS.items():
            if obj is action:
                return ("action", name)
        if isinstance(obj, (types.FunctionType, types.MethodType, types.BuiltinFunctionType)):
            raise pickle.PicklingError(f"the parser holds a function: {obj!r}")
        return None


class _Unpickler(pickle.Unpickler):
    def persistent_load(self, pid: Any) -> Any:
        kind, name = pid
        if kind == "module" and name in _MODULES:
            return importlib.import_module(name)
        if kind == "action" and name in _ACTIONS:
            return _ACTIONS[name]
        raise pickle.UnpicklingError(f"unknown reference in a parser snapshot: {pid!r}")


def _callback_holders(parser: Lark) -> list[tuple[Any, str]]:
    """Where lark 1.x keeps the tree-building callbacks (left out of the pickle)."""
    frontend = parser.parser
    return [(parser, "_callbacks"), (parser, "_parse_tree_builder"), (frontend.parser_conf, "callbacks"),
            (frontend.parser.parser, "callbacks")]


def snapshot_name(cache_file: str, options: dict[str, Any]) -> str:
    """The snapshot's file name beside lark's cache file of the same grammar (whose name holds
    the grammar's digest), with lark's and Python's versions and the build options."""
    import hashlib

    base = os.path.basename(cache_file)
    built = hashlib.sha256(repr(sorted(options.items())).encode()).hexdigest()[:12]
    return f"{base}.lark-{lark.__version__}.py{sys.version_info[0]}{sys.version_info[1]}.{built}.snapshot"


def save(parser: Lark, name: str) -> None:
    """Write the snapshot (nothing, when some part of the parser cannot be pickled)."""
    from triage import cache

    holders = _callback_holders(parser)
    held = [getattr(obj, attr) for obj, attr in holders]
    try:
        for obj, attr in holders:
            setattr(obj, attr, None)
        cache.save(name, parser, pickler=_Pickler)
    finally:
        for (obj, attr), value in zip(holders, held):
            setattr(obj, attr, value)


def load(name: str) -> Lark | None:
    """The parser from its snapshot, its callbacks made again; None when there is none usable."""
    from triage import cache

    parser = cache.load(name, unpickler=_Unpickler)
    if not isinstance(parser, Lark):
        return None
    try:
        parser._prepare_callbacks()
        frontend = parser.parser
        frontend.parser_conf.callbacks = parser._callbacks
        frontend.parser.parser.callbacks = parser._callbacks
    except Exception:  # noqa: BLE001 - another lark's layout: build it the usual way
        return None
    return parser
